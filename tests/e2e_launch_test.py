#!/usr/bin/env python3
"""End-to-end tests of launching and exit reporting on a real `corral dev` (docs/control-plane.md,
"Agent protocol"): a big gang and a big array start on one node without the node ever being
declared lost (launches run on the agent's runtime thread, apart from its heartbeats), a job
already running there survives them, and an ended job is seen ended at once (exits are pushed).

A watcher reads GET /api/v1/nodes every 50 ms for the whole run; the node must never be seen
other than ready, and no task may end `lost`. Polls with deadlines; never sleeps to wait for
time to pass.

Usage: tests/e2e_launch_test.py path/to/corral [--only TEST_NAME]
"""
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

CORRAL = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else "build/corral"
ONLY = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None

FAILURES = []
PASSED = []


def check(name, condition, detail=""):
    (PASSED if condition else FAILURES).append(name)
    print(("ok   " if condition else "FAIL ") + name + ("" if condition else ": " + str(detail)),
          flush=True)


def wait_for(predicate, timeout=30.0, interval=0.05):
    """Polls `predicate` until it returns a true value or the deadline passes."""
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


class Dev:
    """A `corral dev` in its own data dir, with a watcher of its node's state."""

    def __init__(self, root, fake_gpus="8xA100-80GB"):
        self.root = root
        os.makedirs(root, exist_ok=True)
        self.data = os.path.join(root, "dev")
        self.log = open(os.path.join(root, "dev.log"), "w")
        self.proc = subprocess.Popen(
            [CORRAL, "dev", "--data-dir", self.data, "--listen", f"127.0.0.1:{free_port()}",
             "--fake-gpus", fake_gpus, "--web-dir", "", "--metrics-interval", "0"],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.url = None
        for line in self.proc.stdout:  # the banner names the URL (the port may have moved on)
            m = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
            if m and self.url is None:
                self.url = m.group(1)
            if line.startswith("Stop with"):
                break
        assert self.url, "corral dev printed no URL"
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()  # drain the rest
        self.token = open(os.path.join(self.data, "admin.token")).read().strip()
        self.node_states = set()  # every state the watcher saw the node in
        self.slow_answers = 0  # watcher requests that failed or timed out (not node states)
        self.watching = True
        self.watcher = threading.Thread(target=self.watch, daemon=True)
        self.watcher.start()
        assert wait_for(lambda: "ready" in self.node_states, 30), "the dev node did not join"

    def api(self, method, path, body=None):
        req = urllib.request.Request(self.url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None)
        req.add_header("Authorization", "Bearer " + self.token)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def watch(self):
        while self.watching:
            try:
                status, nodes = self.api("GET", "/api/v1/nodes")
                if status == 200:
                    self.node_states.update(n["state"] for n in nodes)
                    if not nodes and self.node_states:  # gone after it had joined
                        self.node_states.add("missing")
            except Exception:  # the server is busy: a slow answer is not a lost node
                self.slow_answers += 1
            time.sleep(0.05)

    def submit(self, spec):
        status, body = self.api("POST", "/api/v1/jobs", spec)
        assert status == 201, (status, body)
        return body

    def job(self, job_id):
        return self.api("GET", f"/api/v1/jobs/{job_id}")[1]

    def state(self, job_id):
        return self.job(job_id)["state"]

    def stop(self):
        """Cancels what still runs (tasks outlive their agent), then stops corral dev."""
        self.watching = False
        self.watcher.join()
        try:
            status, jobs = self.api("GET", "/api/v1/jobs?all=1&limit=1000&state=pending,starting,"
                                    "running")
            for j in jobs if status == 200 else []:
                self.api("POST", f"/api/v1/jobs/{j['id']}/cancel")
            wait_for(lambda: not self.api("GET", "/api/v1/jobs?all=1&limit=1&state=pending,"
                                          "starting,running")[1], 120, 0.2)
        except Exception as e:  # still stop the process
            print(f"     (clean-up: {e!r})", flush=True)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def lost_tasks(dev, job_ids):
    """(job id, task index) of every task that ended lost."""
    out = []
    for job_id in job_ids:
        for t in dev.job(job_id).get("tasks", []):
            if t.get("state") == "lost":
                out.append((job_id, t.get("task_index")))
    return out


def test_gang_of_600_on_one_node(root):
    dev = Dev(os.path.join(root, "gang"))
    try:
        bystander = dev.submit({"name": "bystander", "command": ["sleep", "600"],
                                "resources": {"gpus": 1}})["id"]
        check("a job already runs on the node", wait_for(
            lambda: dev.state(bystander) == "running", 60), dev.job(bystander))
        started = time.monotonic()
        gang = dev.submit({"name": "gang", "command": ["sleep", "600"], "tasks": 600,
                           "resources": {"gpus": 0, "cpu_milli": 3}})["id"]
        running = wait_for(lambda: dev.state(gang) in ("running", "failed", "lost"), 240, 0.2)
        took = time.monotonic() - started
        check("a 600-task gang on one node starts: all its tasks run",
              running and dev.state(gang) == "running", dev.job(gang).get("reason"))
        print(f"     (600 tasks running {took:.1f} s after the submission; {dev.slow_answers} "
              "node listings failed or took over 30 s meanwhile)", flush=True)
        check("the node is never declared lost while they start", dev.node_states == {"ready"},
              dev.node_states)
        job = dev.job(bystander)
        check("the job already running there keeps running, never requeued",
              job["state"] == "running" and job["restarts"] == 0, job)
        status, _ = dev.api("POST", f"/api/v1/jobs/{gang}/cancel")
        check("the gang is cancelled", status == 202 and wait_for(
            lambda: dev.state(gang) == "cancelled", 240, 0.2), dev.job(gang).get("reason"))
        check("no task ended lost", not lost_tasks(dev, [gang, bystander]),
              lost_tasks(dev, [gang, bystander]))
        check("the node stayed ready throughout", dev.node_states == {"ready"}, dev.node_states)
    finally:
        dev.stop()


def test_array_of_1000_on_one_node(root):
    dev = Dev(os.path.join(root, "array"))
    try:
        bystander = dev.submit({"name": "bystander", "command": ["sleep", "600"],
                                "resources": {"gpus": 1}})["id"]
        check("a job already runs on the node", wait_for(
            lambda: dev.state(bystander) == "running", 60), dev.job(bystander))
        answer = dev.submit({"name": "sweep", "command": ["true"],
                             "resources": {"gpus": 0, "cpu_milli": 10},
                             "array": {"indices": list(range(1000))}})
        ids = answer["ids"]

        def ended():
            status, page = dev.api("GET", f"/api/v1/jobs?array={answer['array_id']}&limit=1000"
                                   "&state=pending,starting,running")
            return status == 200 and not page
        done = wait_for(ended, 600, 0.5)
        states = {}
        if done:
            status, page = dev.api("GET", f"/api/v1/jobs?array={answer['array_id']}&limit=1000")
            for j in page:
                states[j["state"]] = states.get(j["state"], 0) + 1
        check("a 1,000-element array with small CPU requests runs to the end on one node",
              done and states == {"succeeded": 1000}, states)
        check("the node is never declared lost meanwhile", dev.node_states == {"ready"},
              dev.node_states)
        job = dev.job(bystander)
        check("the job already running there keeps running, never requeued",
              job["state"] == "running" and job["restarts"] == 0, job)
        check("no element was lost or requeued", done and all(
            dev.job(i)["restarts"] == 0 for i in ids[::50]), "restarts")
    finally:
        dev.stop()


def test_exits_are_seen_at_once(root):
    """Submit -> seen ended by a client polling every 5 ms: pushed exits make it fast. The
    bound is loose (the issue's target, p50 <= 100 ms, is measured by bench/exit_bench.py on an
    idle machine); the old path took a heartbeat round (~1 s) for most jobs."""
    dev = Dev(os.path.join(root, "exits"))
    try:
        times = []
        for _ in range(20):
            start = time.monotonic()
            job = dev.submit({"command": ["true"], "resources": {"gpus": 1}})["id"]
            ok = wait_for(lambda: dev.state(job) in ("succeeded", "failed"), 30, 0.005)
            times.append(time.monotonic() - start)
            assert ok and dev.state(job) == "succeeded", dev.job(job)
        median = statistics.median(times)
        print(f"     (submit -> seen succeeded: median {median * 1000:.0f} ms, "
              f"max {max(times) * 1000:.0f} ms over {len(times)} jobs)", flush=True)
        check("an ended job is seen ended in well under a heartbeat round (median < 500 ms)",
              median < 0.5, f"median {median * 1000:.0f} ms")
    finally:
        dev.stop()


def main():
    if not os.path.exists(CORRAL):
        sys.exit(f"no corral binary at {CORRAL}")
    root = tempfile.mkdtemp(prefix="corral-e2e-launch-")
    tests = [test_exits_are_seen_at_once, test_gang_of_600_on_one_node,
             test_array_of_1000_on_one_node]
    try:
        for test in tests:
            if ONLY and test.__name__ != ONLY:
                continue
            print(f"--- {test.__name__}", flush=True)
            try:
                test(root)
            except Exception as e:  # a broken harness step is a failure, not a crash
                check(test.__name__, False, repr(e))
    finally:
        if FAILURES:
            print(f"logs kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\n{len(PASSED)} passed, {len(FAILURES)} failed")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
