#!/usr/bin/env python3
"""How fast an agent's exits reach the server and clients, how long a freed GPU stays idle, and
what heartbeats cost with 1,000 tasks on a node: one or more corral binaries side by side, each
part run for every binary in turn on the same machine (docs/benchmarks.md, "Pushed exits and
launches apart from heartbeats").

Usage: python3 bench/exit_bench.py CORRAL [CORRAL ...] [--parts exit,gap,heartbeat]
       [--exit-jobs 50] [--gap-jobs 160] [--tasks 1000] [--window 20] [--json PATH]

  exit       a fresh `corral dev` (8 fake GPUs); --exit-jobs times in a row, a 1-GPU job runs
             `true`, and a client polls GET /api/v1/jobs/ID every 5 ms: the time from before the
             POST until the answer says succeeded. p50, p95, max.
  gap        a fresh `corral dev` (8 fake GPUs); --gap-jobs 1-GPU jobs `sleep 1` submitted at
             once. Each task writes the time it starts and ends (date +%s.%N) with its GPU; the
             idle gap is, per GPU, the next task's start minus the previous task's end. p50, p95,
             max; and the makespan (first start to last end) against its ideal
             (jobs / 8 GPUs x 1 s).
  heartbeat  `corral server` and one `corral agent` (8 fake GPUs) as separate processes (the
             harness of tests/e2e_test.py); a --tasks element array of `sleep 3600` with
             cpu_milli 1 (no GPU). The time until all run (and whether the node was ever seen
             lost meanwhile); then, over --window seconds with nothing changing, the CPU time of
             the server and of the agent (utime+stime of their own threads, /proc/PID/stat) per
             second. Both agents make one heartbeat round a second (1 s long poll).

Only the Python 3 standard library. Every process is stopped at the end, also on failure.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def percentile(values, p):
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def wait_for(predicate, timeout, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """utime + stime of the process's threads (not its children), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Api:
    def __init__(self, url, token):
        self.url = url
        self.token = token

    def call(self, method, path, body=None):
        req = urllib.request.Request(self.url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None)
        req.add_header("Authorization", "Bearer " + self.token)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def submit(self, spec):
        status, body = self.call("POST", "/api/v1/jobs", spec)
        assert status == 201, (status, body)
        return body

    def state(self, job_id):
        return self.call("GET", f"/api/v1/jobs/{job_id}")[1]["state"]


class Dev:
    def __init__(self, corral, root):
        self.root = root
        data = os.path.join(root, "dev")
        self.proc = subprocess.Popen(
            [corral, "dev", "--data-dir", data, "--listen", f"127.0.0.1:{free_port()}", "--web-dir", "",
             "--fake-gpus", "8xA100-80GB", "--metrics-interval", "0"],
            stdout=subprocess.PIPE, stderr=open(os.path.join(root, "dev.log"), "w"), text=True)
        url = None
        for line in self.proc.stdout:
            m = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
            url = url or (m.group(1) if m else None)
            if line.startswith("Stop with"):
                break
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        self.api = Api(url, open(os.path.join(data, "admin.token")).read().strip())
        assert wait_for(lambda: any(n["state"] == "ready"
                                    for n in self.api.call("GET", "/api/v1/nodes")[1]), 30)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def bench_exit(corral, root, jobs):
    dev = Dev(corral, root)
    try:
        times = []
        for _ in range(jobs):
            start = time.monotonic()
            job = dev.api.submit({"command": ["true"], "resources": {"gpus": 1}})["id"]
            while dev.api.state(job) not in ("succeeded", "failed"):
                time.sleep(0.005)
            times.append((time.monotonic() - start) * 1000)
        return {"p50_ms": percentile(times, 50), "p95_ms": percentile(times, 95),
                "max_ms": max(times), "jobs": jobs}
    finally:
        dev.stop()


def bench_gap(corral, root, jobs):
    dev = Dev(corral, root)
    record = os.path.join(root, "spans.txt")
    open(record, "w").close()
    script = ('s=$(date +%s.%N); sleep 1; e=$(date +%s.%N); '
              'echo "$CUDA_VISIBLE_DEVICES $s $e" >> ' + record)
    try:
        ids = [dev.api.submit({"command": [script], "shell": True, "resources": {"gpus": 1}})["id"]
               for _ in range(jobs)]
        assert wait_for(lambda: all(dev.api.state(i) in ("succeeded", "failed") for i in ids),
                        jobs * 3 + 60, 0.5), "jobs did not end"
        spans = {}
        for line in open(record):
            gpu, s, e = line.split()
            spans.setdefault(gpu, []).append((float(s), float(e)))
        gaps = []
        for gpu_spans in spans.values():
            gpu_spans.sort()
            gaps += [(b[0] - a[1]) * 1000 for a, b in zip(gpu_spans, gpu_spans[1:])]
        first = min(s for v in spans.values() for s, _ in v)
        last = max(e for v in spans.values() for _, e in v)
        return {"p50_ms": percentile(gaps, 50), "p95_ms": percentile(gaps, 95),
                "max_ms": max(gaps), "gaps": len(gaps), "makespan_s": last - first,
                "ideal_makespan_s": jobs / 8}
    finally:
        dev.stop()


def bench_heartbeat(corral, root, tasks, window):
    sys.argv = [sys.argv[0], corral]
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    import e2e_test as e2e  # the harness: Cluster (server + agents as processes)
    e2e.CORRAL = corral
    cluster = e2e.Cluster(os.path.join(root, "c"))
    try:
        cluster.start_agent("n", "8xA100-80GB")
        assert cluster.wait_nodes(1)
        api = Api(cluster.url, cluster.token)
        seen = set()
        watching = [True]

        def watch():
            while watching[0]:
                status, nodes = api.call("GET", "/api/v1/nodes")
                if status == 200:
                    seen.update(n["state"] for n in nodes)
                time.sleep(0.1)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        start = time.monotonic()
        answer = api.submit({"command": ["sleep", "3600"], "resources": {"gpus": 0, "cpu_milli": 1},
                             "array": {"indices": list(range(tasks))}})
        array = answer["array_id"]

        def all_started():
            # Every element running or ended: on a host shared with other corral clusters, one
            # may be killed by another's clean-up (fixed by the per-cluster cgroup namespacing).
            status, page = api.call("GET", f"/api/v1/jobs?array={array}&limit=1&"
                                    "state=pending,starting")
            return status == 200 and not page
        wait_for(all_started, 600, 0.5)
        started_s = time.monotonic() - start
        running = len(api.call("GET", f"/api/v1/jobs?array={array}&limit=1000&state=running")[1])
        watching[0] = False
        watcher.join()
        agent = cluster.agents["n"].pid
        server = cluster.server.pid
        time.sleep(2)  # let the last reports settle before the quiet window
        s0, a0, t0 = cpu_seconds(server), cpu_seconds(agent), time.monotonic()
        time.sleep(window)
        s1, a1, t1 = cpu_seconds(server), cpu_seconds(agent), time.monotonic()
        api.call("POST", f"/api/v1/arrays/{array}/cancel")
        wait_for(lambda: not api.call("GET", f"/api/v1/jobs?array={array}&limit=1&"
                                      "state=pending,starting,running")[1], 300, 0.5)
        return {"running": running, "start_all_s": started_s,
                "node_states_seen": sorted(seen),
                "server_cpu_ms_per_s": (s1 - s0) * 1000 / (t1 - t0),
                "agent_cpu_ms_per_s": (a1 - a0) * 1000 / (t1 - t0)}
    finally:
        cluster.stop()


def fmt(v):
    return "-" if v is None else (f"{v:.0f}" if isinstance(v, float) else str(v))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("corral", nargs="+")
    p.add_argument("--parts", default="exit,gap,heartbeat")
    p.add_argument("--exit-jobs", type=int, default=50)
    p.add_argument("--gap-jobs", type=int, default=160)
    p.add_argument("--tasks", type=int, default=1000)
    p.add_argument("--window", type=float, default=20)
    p.add_argument("--json")
    args = p.parse_args()
    binaries = [os.path.abspath(c) for c in args.corral]
    results = {}
    root = tempfile.mkdtemp(prefix="corral-exit-bench-")
    try:
        for part in args.parts.split(","):
            for n, corral in enumerate(binaries):
                where = os.path.join(root, f"{part}-{n}")
                os.makedirs(where)
                print(f"== {part}: {corral}", flush=True)
                if part == "exit":
                    r = bench_exit(corral, where, args.exit_jobs)
                elif part == "gap":
                    r = bench_gap(corral, where, args.gap_jobs)
                elif part == "heartbeat":
                    r = bench_heartbeat(corral, where, args.tasks, args.window)
                else:
                    sys.exit(f"unknown part {part}")
                print("   " + json.dumps(r), flush=True)
                results.setdefault(part, {})[corral] = r
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print()
    for part, by_binary in results.items():
        keys = list(next(iter(by_binary.values())).keys())
        print(f"{part:10s} " + " ".join(f"{k:>18s}" for k in keys))
        for corral, r in by_binary.items():
            print(f"  {corral}")
            print(" " * 11 + " ".join(f"{fmt(r[k]):>18s}" for k in keys))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
