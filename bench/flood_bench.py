#!/usr/bin/env python3
"""The API under a slow-client flood, and its submit throughput, side by side for two or more
corral binaries (docs/decisions.md, "The API's HTTP server"; docs/benchmarks.md).

Usage:
    python3 bench/flood_bench.py LABEL=path/to/corral [LABEL=path/to/corral ...]
        [--seconds 20] [--jobs-per-client 1000]

For each binary, in turn: a `corral server` (SQLite) and one agent with a fake GPU on loopback
(--node-timeout 10), a `sleep` job running on it, then three phases of --seconds each: no flood,
48 slow connections, and 300 slow plus 200 idle connections. A slow connection sends a request
head a byte a second; an idle one sends nothing; both come from 127.0.0.2 and are opened again
whenever the server closes them (tests/security/hostile_clients.py). Throughout, an
authenticated GET /api/v1/nodes from 127.0.0.1 every 0.25 s (3 s timeout) measures what a user
gets: answered, p50 and worst latency, and whether the node was ever seen lost. Then the
server's durable submit throughput: bench/api_bench.py --parts 1 (8 clients, keep-alive).
Prints one table; the machine is noisy, so compare the binaries within one run.
"""
import argparse
import json
import os
import pwd
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "security"))
from hostile_clients import Flood, peak_rss_mib  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(url, token, path, timeout=3.0):
    req = urllib.request.Request(url + path, headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read())


def wait_until(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def probe(url, token, seconds):
    latencies, failures, lost = [], 0, False
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        start = time.monotonic()
        try:
            status, nodes = api(url, token, "/api/v1/nodes")
            latencies.append(time.monotonic() - start)
            lost |= any(n["state"] != "ready" for n in nodes)
        except OSError:
            failures += 1
        time.sleep(max(0.0, 0.25 - (time.monotonic() - start)))
    return {"answered": len(latencies), "failed": failures,
            "p50_ms": statistics.median(latencies) * 1e3 if latencies else None,
            "worst_ms": max(latencies) * 1e3 if latencies else None, "node_lost": lost}


def measure(label, corral, args):
    tmp = tempfile.mkdtemp(prefix="corral-flood-bench.")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    data = os.path.join(tmp, "server")
    procs = []
    try:
        server = subprocess.Popen(
            [corral, "server", "--listen", f"127.0.0.1:{port}", "--store",
             "sqlite:" + os.path.join(tmp, "corral.db"), "--data-dir", data,
             "--session-listen", f"127.0.0.1:{free_port()}", "--node-timeout", "10",
             "--fence-after", "3", "--kill-grace", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(server)
        assert wait_until(lambda: os.path.exists(os.path.join(data, "admin.token")), 30)
        token = open(os.path.join(data, "admin.token")).read().strip()
        procs.append(subprocess.Popen(
            [corral, "agent", "--server", url, "--join-token-file",
             os.path.join(data, "join.token"), "--name", "n1", "--fake-gpus", "1xA100-80GB",
             "--work-dir", os.path.join(tmp, "agent"),
             "--task-user", pwd.getpwuid(os.getuid()).pw_name],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        assert wait_until(lambda: len(api(url, token, "/api/v1/nodes")[1]) == 1, 30)
        req = urllib.request.Request(
            url + "/api/v1/jobs", method="POST",
            data=json.dumps({"command": ["sleep", "3600"], "resources": {"gpus": 1}}).encode(),
            headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
        job = json.loads(urllib.request.urlopen(req, timeout=10).read())["id"]
        assert wait_until(lambda: api(url, token, f"/api/v1/jobs/{job}")[1]["state"] == "running",
                          30)
        rows = {}
        for phase, slow, idle in (("no flood", 0, 0), ("48 slow", 48, 0),
                                  ("300 slow + 200 idle", 300, 200)):
            with Flood("127.0.0.1", port, slow=slow, idle=idle):
                rows[phase] = probe(url, token, args.seconds)
        rows["job still running"] = api(url, token, f"/api/v1/jobs/{job}")[1]["state"] == "running"
        rows["server peak RSS MiB"] = peak_rss_mib(server.pid)
        for p in procs:
            p.terminate()
            p.wait(15)
        out = os.path.join(tmp, "submit.json")
        subprocess.run([sys.executable, os.path.join(HERE, "api_bench.py"), corral, "--parts", "1",
                        "--jobs-per-client", str(args.jobs_per_client), "--json", out],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        submit = json.load(open(out)).get("submit", {}) if os.path.exists(out) else {}
        rows["submit jobs/s"] = submit.get("jobs_per_s")
        rows["submit p99 ms"] = submit.get("latency_p99_ms")
        return rows
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binaries", nargs="+", help="LABEL=path/to/corral")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--jobs-per-client", type=int, default=1000)
    args = ap.parse_args()
    results = {}
    for item in args.binaries:
        label, _, path = item.partition("=")
        print(f"measuring {label} ({path})", file=sys.stderr, flush=True)
        results[label] = measure(label, os.path.abspath(path), args)
    labels = list(results)
    print("| | " + " | ".join(labels) + " |")
    print("|---" * (len(labels) + 1) + "|")
    first = results[labels[0]]
    for key, value in first.items():
        if isinstance(value, dict):
            for field in value:
                cells = []
                for label in labels:
                    v = results[label][key][field]
                    cells.append(f"{v:.0f}" if isinstance(v, float) else str(v))
                print(f"| {key}: {field} | " + " | ".join(cells) + " |")
        else:
            cells = [f"{results[l][key]:.0f}" if isinstance(results[l][key], float)
                     else str(results[l][key]) for l in labels]
            print(f"| {key} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
