#!/usr/bin/env python3
"""Fencing (docs/control-plane.md, "Fencing"): an agent that reaches no server stops the tasks
whose jobs the server would requeue elsewhere, before the server's node timeout; the other tasks
keep running, their jobs shown `running` with "node ... unreachable since T", and are re-adopted
when the agent is heard again.

Two faults, each with a real server and agent on fake GPUs and two jobs of one GPU: one
requeue-able (max_restarts 1), one with no restarts left (max_restarts 0). Each task writes
start and stop stamps (job, allocation, pid, time) to a file; a requeued run gets a new
allocation, the job's view says which generation each is. Checked: the requeue-able task's stop
comes before the node timeout passes and before its next run starts (no overlap of two runs);
the other task runs on through the fault, one run only, and is re-adopted.

- The server frozen (SIGSTOP) for longer than the node timeout, then thawed (SIGCONT).
- The agent cut off: it runs in a network namespace, the server listens on the host's end of a
  veth pair, and the link goes down for longer than the node timeout, then up (root and
  iproute2; skipped, saying why, otherwise). Meanwhile the server runs: it requeues the fenced
  job, keeps the other running with the reason in `corral job show`, and its GPU allocated.

Timings (stated): --node-timeout 10, --fence-after 3, --kill-grace 1 (3 + 1 + the agents' 5 s
request timeout < 10). The faults last 14 s: how long the fault lasts is the test's subject, the
only timed waits; everything else polls conditions with deadlines.

Usage: tests/faults/fence_test.py path/to/corral [--only TEST_NAME]
"""
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import e2e_test  # noqa: E402  (its Cluster, check, wait_for; it reads the same argv)
from e2e_test import Cluster, check, submit, wait_for  # noqa: E402

NODE_TIMEOUT = 10  # Cluster passes --fence-after 3 --kill-grace 1 under 30
FENCE_AFTER = 3
KILL_GRACE = 1
FAULT = NODE_TIMEOUT + 4  # how long each fault lasts
# The server heard the agent at most a long poll (1 s) and its answer before the fault began.
HEARD_SLACK = 1.5

STAMPER = ('f={stamps}; '
           'echo "start $CORRAL_JOB_ID $CORRAL_ALLOCATION_ID $$ $(date +%s.%N)" >> $f; '
           'trap \'echo "stop $CORRAL_JOB_ID $CORRAL_ALLOCATION_ID $$ $(date +%s.%N)" >> $f; '
           'exit 143\' TERM; '
           'while :; do sleep 0.1; done')


def spec(stamps, max_restarts):
    return {"command": [STAMPER.format(stamps=stamps)], "shell": True,
            "resources": {"gpus": 1, "cpu_milli": 0}, "max_restarts": max_restarts}


def runs(stamps):
    """{allocation id: {"job", "pid", "start", "stop"?}} from the stamps file."""
    out = {}
    if not os.path.exists(stamps):
        return out
    for line in open(stamps):
        words = line.split()
        if len(words) != 5:
            continue  # a line being written
        what, job, alloc, pid, at = words
        run = out.setdefault(int(alloc), {"job": int(job), "pid": int(pid)})
        run[what] = float(at)
    return out


def runs_of(stamps, job):
    return sorted((r for r in runs(stamps).values() if r["job"] == job),
                  key=lambda r: r["start"])


def generations(c, job):
    """{allocation id: generation} from the job's view."""
    return {t["allocation_id"]: t["generation"] for t in c.job(job)["tasks"]}


def overlaps(stamps, job):
    """Pairs of runs of `job` where the later one started before the earlier one stopped (a run
    with no stop stamp never stopped on its terms: it overlaps whatever came after it)."""
    listed = runs_of(stamps, job)
    return [(a, b) for a, b in zip(listed, listed[1:]) if a.get("stop", float("inf")) > b["start"]]


def alive(pid):
    try:
        os.kill(pid, 0)
        return open(f"/proc/{pid}/stat").read().split()[2] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def start_jobs(c, stamps):
    c.start_agent("n1", "2xA100-80GB")
    check("agent joins", c.wait_nodes(1))
    requeueable = submit(c, spec(stamps, 1))
    kept = submit(c, spec(stamps, 0))
    started = wait_for(lambda: c.job(requeueable)["state"] == "running" and
                       c.job(kept)["state"] == "running" and
                       len(runs_of(stamps, requeueable)) == 1 and len(runs_of(stamps, kept)) == 1,
                       30)
    check("both jobs run", started, (c.job(requeueable), c.job(kept)))
    return requeueable, kept


def check_fenced_in_time(stamps, job, fault_at, what):
    """The requeue-able job's first run stopped (its stop stamp) before the server's node timeout
    could pass, and not before the fence_after (counted from the agent's last answer, up to a long
    poll before the fault): the fault began at `fault_at`."""
    stopped = wait_for(lambda: "stop" in runs_of(stamps, job)[0], NODE_TIMEOUT + 5)
    first = runs_of(stamps, job)[0]
    took = first.get("stop", float("inf")) - fault_at
    check(f"{what}: the requeue-able task is stopped by its agent {took:.1f} s into the fault, "
          f"before the node timeout ({NODE_TIMEOUT} s less {HEARD_SLACK} s)",
          stopped and FENCE_AFTER - HEARD_SLACK <= took < NODE_TIMEOUT - HEARD_SLACK, first)
    return first


def check_after(c, stamps, requeueable, kept, what):
    """Once the fault is over: the requeue-able job's next run starts after its first stopped;
    the other job's one run goes on, re-adopted."""
    requeued = wait_for(lambda: len(runs_of(stamps, requeueable)) >= 2 and
                        c.job(requeueable)["state"] == "running", 40)
    gens = generations(c, requeueable)
    listed = runs_of(stamps, requeueable)
    check(f"{what}: the requeued job runs again as generation 2",
          requeued and [gens.get(a) for a in sorted(runs(stamps)) if a in gens] == [1, 2] and
          c.job(requeueable)["restarts"] == 1, (c.job(requeueable), listed))
    bad = overlaps(stamps, requeueable)
    check(f"{what}: overlap of the two runs is 0 (stopped {listed[0].get('stop')}, "
          f"next started {listed[-1]['start'] if len(listed) > 1 else None})", not bad, bad)
    first_task = [t for t in c.job(requeueable)["tasks"] if t["generation"] == 1]
    reasons = [e["reason"] for e in c.job(requeueable)["events"]]
    check(f"{what}: the fenced run is lost, its job requeued with the reason 'fenced'",
          first_task and first_task[0]["state"] == "lost" and
          any(r.startswith("task 0 was lost: fenced") or r.startswith("fenced: node n1")
              for r in reasons), (first_task, reasons))
    job = c.job(kept)
    only = runs_of(stamps, kept)
    check(f"{what}: the job with no restarts left keeps running, one run, re-adopted",
          job["state"] == "running" and job["restarts"] == 0 and len(only) == 1 and
          "stop" not in only[0] and alive(only[0]["pid"]) and
          [t["state"] for t in job["tasks"]] == ["running"], (job, only))
    # Still itself a while later: the agent's reports match the server's record.
    check(f"{what}: the re-adopted task is not killed as stale",
          not wait_for(lambda: not alive(only[0]["pid"]) or c.job(kept)["state"] != "running",
                       3) and len(runs_of(stamps, kept)) == 1, c.job(kept))


def test_server_frozen_past_the_node_timeout(root):
    c = Cluster(os.path.join(root, "freeze"), node_timeout=NODE_TIMEOUT)
    stamps = os.path.join(c.root, "stamps.txt")
    try:
        requeueable, kept = start_jobs(c, stamps)
        kept_pid = runs_of(stamps, kept)[0]["pid"]
        c.server.send_signal(signal.SIGSTOP)
        frozen_at = time.time()
        try:
            check_fenced_in_time(stamps, requeueable, frozen_at, "server frozen")
            check("server frozen: the other task runs on", alive(kept_pid) and
                  "stop" not in runs_of(stamps, kept)[0])
            time.sleep(max(0.0, frozen_at + FAULT - time.time()))  # the fault's length
        finally:
            c.server.send_signal(signal.SIGCONT)
        check_after(c, stamps, requeueable, kept, "server frozen")
        # A thawed server knows it was paused: it gives its nodes a full node timeout again
        # instead of calling them unreachable for its own silence.
        events = [e["reason"] for e in c.job(kept)["events"]]
        log = open(os.path.join(c.root, "server.log")).read()
        check("server frozen: the thawed server says it was paused and declared no node "
              "unreachable", "(the server was paused or starved): every node gets a full node "
              "timeout" in log and not any("unreachable" in r for r in events) and
              "unreachable" not in c.cli("nodes").stdout, (events, log[-2000:]))
        show = c.cli("job", "show", str(kept))
        check("server frozen: corral job show answers for the kept job",
              show.returncode == 0 and "running" in show.stdout, show.stdout + show.stderr)
    finally:
        c.stop()


# The namespace test's network: the host's end and the agent's end of one veth pair.
TAG = str(os.getpid() % 100000)
NAMESPACE = "crlfence" + TAG
HOST_LINK = "crlfh" + TAG
SUBNET = f"10.{200 + os.getpid() % 50}.{os.getpid() % 250}"


def sh(*args, check_rc=True):
    r = subprocess.run(args, capture_output=True, text=True)
    if check_rc and r.returncode != 0:
        raise RuntimeError(" ".join(args) + ": " + r.stderr.strip())
    return r


def missing_prerequisite():
    if os.geteuid() != 0:
        return "not root (network namespaces need it)"
    if shutil.which("ip") is None:
        return "iproute2 ('ip') is not installed"
    return None


def setup_network():
    sh("ip", "netns", "add", NAMESPACE)
    sh("ip", "link", "add", HOST_LINK, "type", "veth", "peer", "name", "eth0", "netns", NAMESPACE)
    sh("ip", "addr", "add", SUBNET + ".1/24", "dev", HOST_LINK)
    sh("ip", "link", "set", HOST_LINK, "up")
    sh("ip", "netns", "exec", NAMESPACE, "ip", "addr", "add", SUBNET + ".2/24", "dev", "eth0")
    sh("ip", "netns", "exec", NAMESPACE, "ip", "link", "set", "eth0", "up")
    sh("ip", "netns", "exec", NAMESPACE, "ip", "link", "set", "lo", "up")


def teardown_network():
    sh("ip", "netns", "del", NAMESPACE, check_rc=False)
    sh("ip", "link", "del", HOST_LINK, check_rc=False)


def allocated_milli(c):
    node = [n for n in c.api("GET", "/api/v1/nodes")[1] if n["name"] == "n1"][0]
    return 1000 * node["gpus"] - sum(node["gpu_free_milli"])


def test_agent_cut_off_past_the_node_timeout(root):
    why = missing_prerequisite()
    if why:
        print("skip test_agent_cut_off_past_the_node_timeout: " + why)
        return
    setup_network()
    c = None
    try:
        c = Cluster(os.path.join(root, "cut"), node_timeout=NODE_TIMEOUT, host=SUBNET + ".1")
        stamps = os.path.join(c.root, "stamps.txt")
        c.start_agent("n1", "2xA100-80GB", prefix=("ip", "netns", "exec", NAMESPACE))
        check("agent in its namespace joins", c.wait_nodes(1))
        requeueable = submit(c, spec(stamps, 1))
        kept = submit(c, spec(stamps, 0))
        check("both jobs run", wait_for(
            lambda: c.job(requeueable)["state"] == "running" and
            c.job(kept)["state"] == "running" and len(runs_of(stamps, requeueable)) == 1 and
            len(runs_of(stamps, kept)) == 1, 30), (c.job(requeueable), c.job(kept)))
        sh("ip", "link", "set", HOST_LINK, "down")
        cut_at = time.time()
        try:
            first = check_fenced_in_time(stamps, requeueable, cut_at, "agent cut off")
            # The server, running all along, requeues the fenced job once the node times out:
            # after its task stopped.
            requeued = wait_for(lambda: c.job(requeueable)["state"] == "pending", NODE_TIMEOUT + 5)
            seen_at = time.time()
            check(f"agent cut off: the server requeues the fenced job {seen_at - cut_at:.1f} s "
                  "into the cut, after its task stopped",
                  requeued and first.get("stop", float("inf")) < seen_at, c.job(requeueable))
            # A job's state comes from the store, the nodes and a kept job's reason from the
            # published read view (docs/control-plane.md): the view may lag the store by the
            # requeue's commit, so these wait briefly for what they check.
            show = wait_for(lambda: (lambda r: r if c.job(kept)["state"] == "running" and
                                     "node n1 unreachable since " in r.stdout else None)(
                                         c.cli("job", "show", str(kept))), 5)
            check("agent cut off: the other job is running, 'node n1 unreachable since T' in "
                  "corral job show", show, c.cli("job", "show", str(kept)).stdout)
            check("agent cut off: its GPU stays allocated, the node unreachable, taking no new work",
                  wait_for(lambda: allocated_milli(c) == 1000 and
                           c.job(requeueable)["state"] == "pending" and
                           "ready, unreachable" in c.cli("nodes").stdout, 5),
                  (c.api("GET", "/api/v1/nodes")[1], c.cli("nodes").stdout))
            check("agent cut off: the other task runs on",
                  alive(runs_of(stamps, kept)[0]["pid"]) and "stop" not in runs_of(stamps, kept)[0])
            time.sleep(max(0.0, cut_at + FAULT - time.time()))  # the fault's length
        finally:
            sh("ip", "link", "set", HOST_LINK, "up")
        check_after(c, stamps, requeueable, kept, "agent cut off")
        reasons = [e["reason"] for e in c.job(kept)["events"]]
        check("agent cut off: the kept job's history says the node was reachable again",
              "node n1 reachable again" in reasons, reasons)
    finally:
        if c:
            c.stop()
        teardown_network()


def main():
    e2e_test.run_tests("faults fence", (test_server_frozen_past_the_node_timeout,
                                        test_agent_cut_off_past_the_node_timeout))


if __name__ == "__main__":
    main()
