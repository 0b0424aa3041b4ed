#!/usr/bin/env python3
"""End-to-end tests of GPU monitoring (docs/monitoring.md) with real processes on loopback.

A server and an agent with fake GPUs whose tasks declare the utilisation they cause
(FAKE_GPU_UTILIZATION): the busy job's GPU reads busy and the idle job's GPU is flagged idle
(API and `corral idle`); GET /metrics serves the Prometheus exposition to the metrics token and
admins only; Debian's real `prometheus` scrapes it and answers a query for the busy job's GPU;
and the GPU time lands in `corral usage` (JSON and CSV) after the server stops.

Usage: tests/e2e_monitoring_test.py path/to/corral [--store-url URL]
"""
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request

import e2e_test as e2e
from e2e_test import Cluster, check, free_port, submit, wait_for

METRICS_TOKEN = "metrics-0123456789abcdef-scrape"


def gpus(c, idle=False):
    status, body = c.api("GET", "/api/v1/gpus" + ("?idle=1" if idle else ""))
    assert status == 200, (status, body)
    return body["gpus"]


def held_by(c, job_id):
    return [g for g in gpus(c) if any(h["job"] == job_id for h in g["holders"])]


def scrape(c, token):
    req = urllib.request.Request(c.url + "/metrics")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, "", e.read().decode(errors="replace")


def start_prometheus(root, c, token_file):
    """A real Prometheus scraping the server every second; returns (process, its URL)."""
    port = free_port()
    config = os.path.join(root, "prometheus.yml")
    with open(config, "w") as f:
        f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: corral
    metrics_path: /metrics
    authorization:
      type: Bearer
      credentials_file: {token_file}
    static_configs:
      - targets: ["127.0.0.1:{c.port}"]
""")
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={config}",
         f"--storage.tsdb.path={os.path.join(root, 'tsdb')}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(root, "prometheus.log"), "a"))
    return proc, f"http://127.0.0.1:{port}"


def prometheus_query(url, query):
    try:
        with urllib.request.urlopen(
                url + "/api/v1/query?" + urllib.parse.urlencode({"query": query}), timeout=5) as r:
            body = json.loads(r.read())
            return body["data"]["result"] if body.get("status") == "success" else []
    except Exception:
        return []


def test_gpu_metrics_idle_prometheus_and_usage(root):
    if shutil.which("prometheus") is None:
        check("prometheus is installed (scripts/bootstrap.sh)", False, "no prometheus on PATH")
        return
    root = os.path.join(root, "monitoring")
    os.makedirs(root, exist_ok=True)
    token_file = os.path.join(root, "metrics.token")
    with open(token_file, "w") as f:
        f.write(METRICS_TOKEN + "\n")
    c = Cluster(root, server_args=["--gpu-idle-after", "3", "--gpu-idle-threshold", "10",
                                   "--metrics-token-file", token_file])
    prom = None
    try:
        c.start_agent("node-m", gpus="2xA100-80GB", extra=["--metrics-interval", "0.5"])
        check("monitoring: the agent registers", c.wait_nodes(1))
        busy = submit(c, {"name": "busy", "command": ["sleep", "120"],
                          "resources": {"gpus": 1}, "env": {"FAKE_GPU_UTILIZATION": "90"}})
        idle = submit(c, {"name": "idle", "command": ["sleep", "120"],
                          "resources": {"gpus": 1}, "env": {"FAKE_GPU_UTILIZATION": "2"}})
        check("monitoring: both jobs run", c.wait_state(busy, ["running"]) and
              c.wait_state(idle, ["running"]))
        busy_gpu = wait_for(lambda: [g for g in held_by(c, busy)
                                     if g.get("utilization_percent") == 90], 20)
        check("monitoring: the busy job's GPU reads its 90 %", busy_gpu, gpus(c))
        if busy_gpu:
            g = busy_gpu[0]
            check("monitoring: the GPU names its job, user and project",
                  g["holders"][0]["user"] == "admin" and g["holders"][0]["project"] == "default"
                  and g["node"] == "node-m" and g["model"] == "A100-80GB", g)
            check("monitoring: the fake power and memory follow the load",
                  g.get("power_w", 0) > 300 and g.get("memory_used_mib", 0) > 0, g)
            check("monitoring: the task's process is on its GPU, not foreign",
                  g["processes"] == 1 and g["foreign_processes"] == 0, g)

        flagged = wait_for(lambda: gpus(c, idle=True), 20)
        check("monitoring: the idle job's GPU is flagged after 3 s under 10 %",
              len(flagged or []) == 1 and flagged[0]["holders"][0]["job"] == idle, flagged)
        check("monitoring: the busy GPU is not flagged",
              all(g["holders"][0]["job"] != busy for g in flagged or []), flagged)
        out = c.cli("idle")
        lines = out.stdout.splitlines()
        # The table's columns start where their headers do.
        start = lines[0].index("JOB") if lines and "JOB" in lines[0] else 0
        jobs = [line[start:].split()[0] for line in lines[1:]]
        check("monitoring: corral idle lists the idle job's GPU, flagged",
              out.returncode == 0 and jobs == [str(idle)] and lines[1].endswith("yes"),
              out.stdout + out.stderr)
        out = c.cli("gpus", "-o", "json")
        check("monitoring: corral gpus -o json lists both GPUs",
              out.returncode == 0 and len(json.loads(out.stdout)["gpus"]) == 2,
              out.stdout + out.stderr)
        status, body = c.api("GET", f"/api/v1/jobs/{busy}/gpus")
        check("monitoring: the job's GPUs come with a recent series",
              status == 200 and body["gpus"] and len(body["gpus"][0]["series"]) >= 2
              and body["gpus"][0]["series"][-1]["utilization_percent"] == 90, body)

        # /metrics: the metrics token and admins; nobody else.
        status, ctype, text = scrape(c, METRICS_TOKEN)
        check("monitoring: /metrics answers the metrics token in the text format",
              status == 200 and ctype.startswith("text/plain; version=0.0.4"), (status, ctype))
        check("monitoring: the exposition has the busy GPU under DCGM's name with its job",
              f'DCGM_FI_DEV_GPU_UTIL{{gpu="' in text and f'job_id="{busy}"' in text
              and f'job_id="{busy}",user="admin",project="default"}} 90' in text, text[:2000])
        check("monitoring: the exposition flags the idle GPU",
              f'corral_gpu_idle{{' in text and f'job_id="{idle}",user="admin",project="default"}} 1'
              in text, text[:2000])
        status, _, _ = scrape(c, None)
        check("monitoring: /metrics without a token is 401", status == 401, status)
        status, body = c.api("POST", "/api/v1/users", {"name": "mona"})
        mona = body.get("token") if status == 201 else None
        status, _, _ = scrape(c, mona)
        check("monitoring: /metrics with a user's token is 403", status == 403, status)
        status, _, _ = scrape(c, c.token)
        check("monitoring: /metrics with the admin token is 200", status == 200, status)
        status, _ = c.api("GET", "/api/v1/gpus", token=METRICS_TOKEN)
        check("monitoring: the metrics token opens nothing else", status == 401, status)

        # A real Prometheus scrapes it.
        prom, prom_url = start_prometheus(root, c, token_file)
        result = wait_for(lambda: prometheus_query(
            prom_url, f'DCGM_FI_DEV_GPU_UTIL{{job_id="{busy}"}}'), 30, 0.5)
        check("monitoring: Prometheus scraped the busy GPU's utilisation",
              result and float(result[0]["value"][1]) == 90.0, result)
        up = prometheus_query(prom_url, 'up{job="corral"}')
        check("monitoring: Prometheus sees the target up",
              up and float(up[0]["value"][1]) == 1.0, up)
        gpus_total = prometheus_query(prom_url, "corral_gpus")
        check("monitoring: Prometheus has the cluster's GPU count",
              gpus_total and float(gpus_total[0]["value"][1]) == 2.0, gpus_total)

        # Capacity planning: the demand history has the two running jobs; the what-if replays.
        status, body = c.api("GET", f"/api/v1/jobs/{busy}/gpus")
        check("monitoring: the API gives each GPU's total memory",
              status == 200 and body["gpus"][0]["memory_total_mib"] == 81920, body)
        status, fc = c.api("GET", "/api/v1/capacity/forecast?history_days=1&horizon_days=1")
        check("monitoring: the capacity forecast has the cluster and the current demand",
              status == 200 and fc["capacity_gpus"] == 2 and len(fc["history"]) == 24
              and len(fc["forecast"]) == 24, (status, str(fc)[:500]))
        status, wi = c.api("POST", "/api/v1/capacity/what-if",
                           {"since": "1d", "extra_gpus": [0, 8], "target_p90_wait_s": 60})
        check("monitoring: the what-if replays the recorded jobs with more GPUs",
              status == 200 and wi["jobs"] == 2 and [r["gpus"] for r in wi["results"]] == [2, 10]
              and wi["smallest_meeting_target"] == 0, wi)
        status, _ = c.api("POST", "/api/v1/capacity/what-if", {}, token=mona)
        check("monitoring: the what-if is for admins", status == 403, status)
        out = c.cli("capacity", token=mona)
        check("monitoring: corral capacity gives a user the forecast without the what-if",
              out.returncode == 0 and "Capacity 2 GPUs" in out.stdout
              and "for admins" in out.stdout, out.stdout + out.stderr)
        status, body = c.api("POST", "/api/v1/capacity/what-if", {"extra_gpus": "many"})
        check("monitoring: a bad what-if names the field",
              status == 400 and "extra_gpus" in body.get("detail", ""), body)
        out = c.cli("capacity", "--extra", "0,8", "--since", "1d", "--target-p90-wait", "60")
        check("monitoring: corral capacity prints the what-if table",
              out.returncode == 0 and "EXTRA GPUS" in out.stdout
              and "smallest that meets" in out.stdout, out.stdout + out.stderr)

        # Accounting: cancel, stop the server (its last flush), then read the usage back.
        for job_id in (busy, idle):
            c.api("POST", f"/api/v1/jobs/{job_id}/cancel")
        c.wait_state(busy, ["cancelled"])
        c.server.terminate()
        c.server.wait(20)
        c.start_server()
        status, hist = c.api("GET", f"/api/v1/jobs/{busy}/gpu-history")
        intervals = hist.get("intervals", []) if status == 200 else []
        # 10 s intervals while the job held the GPU; the first may also hold readings from
        # before it started (0 %), so its mean is lower.
        check("monitoring: the busy job's GPU history survived the restart in the store",
              intervals and all(i["resolution_s"] == 10 and i["gpu"] == busy_gpu[0]["index"]
                                for i in intervals)
              and 0 < max(i["utilization_percent"] for i in intervals) <= 90, hist)
        status, _ = c.api("GET", "/api/v1/jobs/999/gpu-history")
        check("monitoring: an unknown job has no GPU history", status == 404, status)
        status, report = c.api("GET", "/api/v1/usage?by=user&since=1d")
        rows = report.get("rows", []) if status == 200 else []
        check("monitoring: usage has the admin's allocated and used GPU-hours",
              len(rows) == 1 and rows[0]["user"] == "admin"
              and rows[0]["allocated_gpu_hours"] > 0
              and 0 < rows[0]["used_gpu_hours"] < rows[0]["allocated_gpu_hours"], report)
        out = c.cli("usage", "--by", "project", "--since", "1d", "--csv")
        parsed = list(csv.DictReader(io.StringIO(out.stdout))) if out.returncode == 0 else []
        check("monitoring: corral usage --csv writes one row per project",
              len(parsed) == 1 and parsed[0]["project"] == "default"
              and float(parsed[0]["allocated_gpu_hours"]) > 0, out.stdout + out.stderr)
        out = c.cli("usage", "--by", "team")
        check("monitoring: a bad --by names the field",
              out.returncode == 2 and "'team' is none of user, project, day" in out.stderr,
              out.stdout + out.stderr)
        status, report = c.api("GET", "/api/v1/usage?by=user&since=1d", token=mona)
        check("monitoring: a member of the project sees its usage",
              status == 200 and [r["user"] for r in report["rows"]] == ["admin"], report)
    finally:
        if prom:
            prom.terminate()
            prom.wait(10)
        c.stop()


def main():
    e2e.run_tests("e2e monitoring", (test_gpu_metrics_idle_prometheus_and_usage,))


if __name__ == "__main__":
    main()
