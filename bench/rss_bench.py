#!/usr/bin/env python3
"""The server's memory over many finished jobs (docs/benchmarks.md, "Server memory"): a
`corral server` (SQLite store) and a node: by default a fake agent in this script (8 GPUs, the
agent protocol over HTTP: each launch is reported running with a line of output and GPU
metrics, then exited with code 0, so no process is forked and the server is what limits the
rate), with --real-agent a
`corral agent` (8 fake GPUs) that runs each task. Short jobs (`true`, each with its own name,
one in four on a GPU) are submitted over HTTP by a few threads, at most --in-flight unfinished at once, and the server's RSS (VmRSS of
/proc/PID/status) is read once the checkpoint's number of jobs have finished (and nothing
runs). One or more corral binaries, each in turn on the same machine.

Usage: python3 bench/rss_bench.py CORRAL [CORRAL ...] [--jobs 100000] [--real-agent]
       [--checkpoints 10000,50000,100000] [--in-flight 400] [--threads 4] [--dir /dev/shm]
       [--server-args "--keep-finished 1h"] [--json PATH]

Prints, per binary, RSS at each checkpoint, the jobs/s, and the ratio of the last checkpoint's
RSS to the first's. Only the Python 3 standard library. Every process is stopped at the end,
also on failure.
"""
import argparse
import http.client
import json
import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import bench_cluster
from bench_cluster import free_port


def rss_mib(pid):
    return (bench_cluster.proc_status_kib(pid, "VmRSS") or 0) / 1024.0


class Api:
    """One keep-alive connection per thread."""

    def __init__(self, port, token, headers=None):
        self.port, self.token = port, token
        self.headers = headers or {}
        self.local = threading.local()

    def request(self, method, path, body=None):
        conn = getattr(self.local, "conn", None)
        for attempt in range(3):
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                self.local.conn = conn
            try:
                conn.request(method, path, body=json.dumps(body) if body is not None else None,
                             headers={"Authorization": "Bearer " + self.token,
                                      "Content-Type": "application/json", **self.headers})
                r = conn.getresponse()
                data = r.read()
                return r.status, json.loads(data or b"null")
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = None
                self.local.conn = None
                if attempt == 2:
                    raise
                time.sleep(0.2)


def fake_agent(port, join_token, stop):
    """One 8-GPU node. A launch is reported running (with a line of output, and its GPUs at 50 %
    in the report's GPU metrics) in the next heartbeat, exited with code 0 in the first one
    after the server took that, and left out once the server took the exit."""
    api = Api(port, join_token, {"X-Corral-Node": "n1"})
    gpus = [{"index": g, "uuid": f"GPU-fake-{g}", "memory_mib": 81920, "nvlink_domain": 0}
            for g in range(8)]
    status, body = api.request("POST", "/api/v1/agent/register", {
        "protocol_version": 1, "name": "n1", "node_id": "rss-bench-node-id-0123456789",
        "inventory": {"hostname": "n1", "cpu_milli": 512000, "memory_mib": 1 << 20,
                      "gpu_model": "A100-80GB", "gpus": gpus}})
    assert status == 200, (status, body)
    api.token = body["node_token"]
    seq = 0
    tasks = {}  # (allocation, generation) -> {"status", "gpus", "seq": first report in this phase}
    while not stop.is_set():
        seq += 1
        now = int(time.time())
        logs = []
        for key, t in tasks.items():
            if t["seq"] is None:
                t["seq"] = seq
                if t["status"]["state"] == "running":
                    logs.append({"allocation_id": key[0], "generation": key[1],
                                 "stream": "stdout", "offset": 0,
                                 "data": f"task {key[0]} of job {t['status']['job_id']}\n"})
        on_gpu = {g: [] for g in range(8)}
        for key, t in tasks.items():
            if t["status"]["state"] == "running":
                for g in t["gpus"]:
                    on_gpu[g].append(f"{key[0]}-{key[1]}")
        metrics = {"sampled_at_ms": int(time.time() * 1000), "gpus": [
            {"index": g, "tasks": on_gpu[g], "processes": [],
             "utilization_percent": 50 if on_gpu[g] else 0, "memory_used_mib": 1024,
             "power_mw": 100000, "temperature_c": 40} for g in range(8)]}
        report = {"seq": seq, "tasks": [t["status"] for t in tasks.values()], "logs": logs,
                  "wait_ms": 500, "gpu_metrics": metrics}
        status, answer = api.request("POST", "/api/v1/agent/heartbeat", report)
        if status != 200:
            time.sleep(0.1)
            continue
        taken = answer.get("taken_seq", 0)
        for key in list(tasks):
            t = tasks[key]
            if t["seq"] is None or t["seq"] > taken:
                continue
            if t["status"]["state"] == "running":
                t["status"] = dict(t["status"], state="exited", ended_at=now, exit_code=0,
                                   end_cause="exited")
                t["seq"] = None
            else:
                del tasks[key]
        for launch in answer.get("run", []):
            key = (launch["allocation_id"], launch["generation"])
            tasks.setdefault(key, {"status": {
                "job_id": launch["job_id"], "task_index": launch.get("task_index", 0),
                "allocation_id": key[0], "generation": key[1], "state": "running", "pid": 1,
                "started_at": now, "message": ""}, "gpus": launch.get("gpus", []), "seq": None})


def run_one(corral, args, root):
    os.makedirs(root)
    port = free_port()
    data = os.path.join(root, "server")
    server = subprocess.Popen(
        [corral, "server", "--listen", f"127.0.0.1:{port}", "--store",
         "sqlite:" + os.path.join(root, "corral.db"), "--data-dir", data, "--session-listen",
         f"127.0.0.1:{free_port()}", "--envs-dir", "", *shlex.split(args.server_args)],
        stdout=open(os.path.join(root, "server.out"), "w"),
        stderr=open(os.path.join(root, "server.err"), "w"))
    procs = [server]
    stop = threading.Event()
    agent = None
    try:
        url = f"http://127.0.0.1:{port}"

        def healthy():
            try:
                return urllib.request.urlopen(url + "/healthz", timeout=1).status == 200
            except Exception:
                return False

        bench_cluster.wait_for("the server to answer", healthy, 30)
        token = open(os.path.join(data, "admin.token")).read().strip()
        if not args.real_agent:
            agent = threading.Thread(target=fake_agent, args=(
                port, open(os.path.join(data, "join.token")).read().strip(), stop))
            agent.start()
        else:
            procs.append(subprocess.Popen(
                [corral, "agent", "--server", url, "--join-token-file",
                 os.path.join(data, "join.token"), "--name", "n1", "--fake-gpus", "8xA100-80GB",
                 "--cpus", "512", "--metrics-interval", "5", "--work-dir",
                 os.path.join(root, "agent"), "--task-user", pwd.getpwuid(os.getuid()).pw_name],
                stdout=subprocess.DEVNULL, stderr=open(os.path.join(root, "agent.err"), "w")))
        api = Api(port, token)
        bench_cluster.wait_for("the node to join", lambda: any(
            n["state"] == "ready" for n in api.request("GET", "/api/v1/nodes")[1]), 30)

        lock = threading.Lock()
        # next: the next job's index; posted: jobs the server took (201).
        state = {"next": 0, "posted": 0, "errors": 0}
        slots = threading.Semaphore(args.in_flight)

        def unfinished():
            s = api.request("GET", "/api/v1/summary")[1]
            return s["jobs_pending"] + s["jobs_starting"] + s["jobs_running"]

        def submitter():
            while not stop.is_set():
                with lock:
                    i = state["next"]
                    if i >= args.jobs:
                        return
                    state["next"] = i + 1
                slots.acquire()
                spec = {"name": f"rss-{i}", "command": ["true"],
                        "resources": {"gpus": 1 if i % 4 == 0 else 0, "cpu_milli": 1}}
                status, body = api.request("POST", "/api/v1/jobs", spec)
                with lock:
                    state["posted" if status == 201 else "errors"] += 1
                if status != 201:
                    slots.release()
                    print(f"submit {i}: {status} {body}", file=sys.stderr)

        # The slots come back as jobs finish: a watcher compares unfinished jobs with the window.
        def releaser():
            released = 0
            while not stop.is_set():
                with lock:
                    posted = state["posted"]
                done = posted - unfinished()
                for _ in range(max(0, done - released)):
                    slots.release()
                released = max(released, done)
                time.sleep(0.05)

        threads = [threading.Thread(target=submitter) for _ in range(args.threads)]
        threads.append(threading.Thread(target=releaser))
        start = time.monotonic()
        for t in threads:
            t.start()
        results = []
        try:
            for checkpoint in args.checkpoints:
                # Wait until `checkpoint` jobs were taken and as many finished.
                def finished():
                    with lock:
                        posted = state["posted"]
                    return posted - unfinished() >= checkpoint

                bench_cluster.wait_for(f"{checkpoint} jobs to finish", finished, 24 * 3600, 0.2)
                rss = rss_mib(server.pid)
                elapsed = time.monotonic() - start
                results.append({"finished": checkpoint, "rss_mib": round(rss, 1),
                                "elapsed_s": round(elapsed, 1)})
                print(f"  {checkpoint:>7} jobs finished: server RSS {rss:7.1f} MiB "
                      f"({elapsed:7.1f} s, {checkpoint / elapsed:6.1f} jobs/s)", flush=True)
        finally:
            stop.set()
            for _ in range(args.in_flight + args.threads):
                slots.release()
            for t in threads:
                t.join()
        # Quiet: nothing runs; the RSS once the server has had a few seconds of nothing to do.
        bench_cluster.wait_for("every job to end", lambda: unfinished() == 0, 120, 0.2)
        time.sleep(5)
        results.append({"finished": args.checkpoints[-1], "rss_mib": round(
            rss_mib(server.pid), 1), "quiet": True})
        print(f"  quiet after 5 s:        server RSS {results[-1]['rss_mib']:7.1f} MiB")
        return {"results": results, "submit_errors": state["errors"]}
    finally:
        stop.set()
        if agent is not None:
            agent.join()
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corral", nargs="+")
    ap.add_argument("--jobs", type=int, default=100000)
    ap.add_argument("--checkpoints", default="10000,50000,100000")
    ap.add_argument("--in-flight", type=int, default=400)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    ap.add_argument("--server-args", default="")
    ap.add_argument("--real-agent", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    args.checkpoints = sorted(int(c) for c in args.checkpoints.split(","))
    args.jobs = max(args.jobs, args.checkpoints[-1])
    print(f"machine: {os.cpu_count()} cores; {args.jobs} jobs, at most {args.in_flight} "
          f"unfinished, {args.threads} submitting threads; store in {args.dir or 'TMPDIR'}")
    out = {}
    for corral in args.corral:
        root = tempfile.mkdtemp(prefix="corral-rss-", dir=args.dir)
        print(f"{corral} ({subprocess.run([corral, '--version'], capture_output=True, text=True).stdout.strip()})",
              flush=True)
        try:
            out[corral] = run_one(corral, args, os.path.join(root, "run"))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        rows = [r for r in out[corral]["results"] if not r.get("quiet")]
        print(f"  RSS at {rows[-1]['finished']} / at {rows[0]['finished']}: "
              f"{rows[-1]['rss_mib'] / rows[0]['rss_mib']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
