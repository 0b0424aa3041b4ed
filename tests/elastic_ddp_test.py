#!/usr/bin/env python3
"""Elastic training end to end (issue 20): examples/elastic_ddp.py, real PyTorch DDP (gloo, CPU),
as one `--nodes 1-2 --launcher torchrun` job across two agents in two network namespaces (the
network of tests/distributed_test.py).

  1. A blocker job holds node b's GPUs; the elastic job starts on node a alone (world size 1).
  2. The blocker ends: the job grows to both nodes (a new generation, world size 2).
  3. A rigid job asks for a whole node: the job shrinks back to one node (world size 1) and the
     rigid job starts, with nothing preempted.
  4. The elastic job is cancelled; it saves on the stop request like at each resize.
Then the script's progress file (rank 0 writes it in the job's checkpoint folder) must show one
training run: each generation resumes at the step the last one saved (steps continuous), and the
loss keeps falling to the end. The job's record must show the two resizes with their reasons.

Needs root (namespaces), iproute2 and /usr/bin/python3 with torch; skips with a message
otherwise. Usage: tests/elastic_ddp_test.py path/to/corral
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import distributed_test as net  # noqa: E402  (the bridge, the namespaces, the prerequisites)
import e2e_test as e2e  # noqa: E402  (the Cluster harness and check())
from e2e_test import check, submit, wait_for  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "examples", "elastic_ddp.py")
CLIENT = os.path.join(REPO, "clients", "python")  # corral.job, for the script
RESIZE_INTERVAL = "3s"  # growth waits this long after the last resize or the start
STEP_TIME = "0.02"  # seconds a step takes at least: the run spans every phase below


def progress(folder):
    """The script's progress records (rank 0's progress.jsonl), [] while there are none."""
    path = os.path.join(folder, "progress.jsonl")
    if not os.path.exists(path):
        return []
    records = []
    for line in open(path):
        if line.endswith("\n"):  # a line being written is read next time
            records.append(json.loads(line))
    return records


def starts(records):
    return [r for r in records if r["event"] == "start"]


def reports_of(records, generation):
    return [r for r in records if r["event"] == "report" and r["generation"] == generation]


def running_generation(folder, world, after, reports=3):
    """The generation after `after` that started at world size `world` and has made `reports`
    reports, or None."""
    records = progress(folder)
    for s in starts(records):
        if s["generation"] > after and s["world_size"] == world and \
                len(reports_of(records, s["generation"])) >= reports:
            return s["generation"]
    return None


def node_of(c, job):
    tasks = [t for t in c.job(job).get("tasks", []) if t.get("state") == "running"]
    return tasks[0]["node"] if len(tasks) == 1 else None


def check_training(records):
    """One training run across the generations: continuous steps, falling loss."""
    gens = starts(records)
    check("three generations: world sizes 1, 2, 1",
          [g["world_size"] for g in gens] == [1, 2, 1], gens)
    saved = {}  # generation -> the step its stop checkpoint saved
    generation = None
    for r in records:
        if r["event"] == "start":
            generation = r["generation"]
        elif r["event"] == "checkpoint" and r["reason"] == "stop":
            saved[generation] = r["step"]
    for before, after in zip(gens, gens[1:]):
        check(f"generation {after['generation']} resumes at the step generation "
              f"{before['generation']} saved on its stop request",
              after["step"] > 0 and after["step"] == saved.get(before["generation"]),
              (before, after, saved))
    steps = [r["step"] for r in records if r["event"] == "report"]
    check("reported steps only go up across generations",
          all(a < b for a, b in zip(steps, steps[1:])), steps)
    last = [reports_of(records, g["generation"]) for g in gens]
    if all(last):
        check("each generation's first loss is near the last one's end (resumed: a fresh start "
              "is a thousand times higher)",
              all(b[0]["loss"] <= a[-1]["loss"] * 1.5 for a, b in zip(last, last[1:])),
              [(x[0]["loss"], x[-1]["loss"]) for x in last])
        final = last[-1]
        check("the loss still falls in the last generation",
              final[-1]["loss"] < final[0]["loss"], [(r["step"], r["loss"]) for r in final])
        check("the loss at the end is below every earlier generation's",
              final[-1]["loss"] < min(r["loss"] for x in last[:-1] for r in x),
              [(x[0]["loss"], x[-1]["loss"]) for x in last])


def check_standalone(root):
    """The script without corral: torchrun on this machine, 2 ranks, the stop file written by
    the test once it trains; then 1 rank, which resumes where the 2 saved, to the end."""
    folder = os.path.join(root, "standalone")
    os.makedirs(folder)
    stop = os.path.join(root, "stop")
    env = dict(os.environ, CORRAL_JOB_ID="1", CORRAL_STOP_FILE=stop, CORRAL_CHECKPOINT_DIR=folder,
               PYTHONPATH=CLIENT, OMP_NUM_THREADS="1")
    env.pop("CORRAL_JOB_TOKEN", None)  # no server: nothing is reported
    torchrun = ["torchrun", *net.TORCHRUN_OWN, "--nnodes", "1", "--master_port", str(e2e.free_port())]

    def train(procs, generation, *extra):
        return subprocess.Popen([*torchrun, "--nproc_per_node", str(procs), SCRIPT,
                                 "--step-time", STEP_TIME, "--report-every", "0.2", *extra],
                                env=dict(env, CORRAL_GENERATION=str(generation)),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    first = train(2, 1)
    trained = wait_for(lambda: len(reports_of(progress(folder), 1)) >= 3, 60)
    with open(stop + ".tmp", "w") as f:
        json.dump({"reason": "resize", "grace_s": 30, "deadline": time.time() + 30}, f)
    os.replace(stop + ".tmp", stop)
    out = first.communicate(timeout=60)[0]
    check("standalone: 2 ranks train, then stop and exit 0 on the stop file",
          trained and first.returncode == 0, out[-2000:])
    os.remove(stop)
    saved = [r["step"] for r in progress(folder) if r["event"] == "checkpoint"]
    second = train(1, 2, "--steps", str((saved or [0])[-1] + 100))
    out = second.communicate(timeout=60)[0]
    records = progress(folder)
    gens = starts(records)
    check("standalone: 1 rank resumes at the saved step and trains to --steps",
          second.returncode == 0 and [g["world_size"] for g in gens] == [2, 1] and saved and
          gens[1]["step"] == saved[-1] and records[-1]["event"] == "checkpoint" and
          records[-1]["step"] == saved[-1] + 100,
          (out[-2000:], gens, saved, records[-1:]))


def run(root):
    checkpoints = os.path.join(root, "checkpoints")
    os.makedirs(checkpoints, mode=0o755)
    c = e2e.Cluster(os.path.join(root, "elastic"), host=net.SUBNET + ".1",
                    server_args=["--checkpoint-root", checkpoints,
                                 "--resize-interval", RESIZE_INTERVAL])
    try:
        for name, (ns, address) in net.NAMESPACES.items():
            c.start_agent(name, "2xT4", prefix=("ip", "netns", "exec", ns),
                          extra=("--address", address))
        check("two agents in two namespaces join", c.wait_nodes(2))

        blocker = submit(c, {"name": "blocker", "command": ["sleep", "600"],
                             "resources": {"gpus": 2}})
        check("the blocker runs", c.wait_state(blocker, ("running",), 30), c.job(blocker))
        busy = wait_for(lambda: node_of(c, blocker), 10)

        env = {"GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1", "PYTHONPATH": CLIENT}
        job = submit(c, {
            "name": "elastic-ddp", "tasks": 1, "launcher": "torchrun", "procs_per_node": 1,
            "elastic": {"unit": "nodes", "min": 1, "max": 2}, "resources": {"gpus": 2},
            "time_limit_s": 900, "env": env,
            "command": [*net.TORCHRUN_OWN, SCRIPT, "--steps", "1000000", "--step-time",
                        STEP_TIME, "--report-every", "1", "--checkpoint-every", "200"]})
        folder = os.path.join(checkpoints, str(job))
        first = wait_for(lambda: running_generation(folder, 1, 0), 60)
        view = c.job(job)
        check("the elastic job starts on the free node alone (world size 1)",
              first is not None and node_of(c, job) not in (None, busy),
              (view.get("state"), view.get("tasks"), progress(folder), busy))
        check("the job view shows its range and size now",
              (view.get("elastic") or {}).get("now") == 1 and view["elastic"].get("min") == 1 and
              view["elastic"].get("max") == 2 and view["elastic"].get("unit") == "nodes",
              view.get("elastic"))
        if first is None:
            return

        c.api("POST", f"/api/v1/jobs/{blocker}/cancel", {})
        grown = wait_for(lambda: running_generation(folder, 2, first), 90)
        view = c.job(job)
        check("the blocker gone, the job grows to both nodes (world size 2)",
              grown is not None and (view.get("elastic") or {}).get("now") == 2 and
              view.get("state") == "running",
              (view.get("state"), view.get("elastic"), view.get("events"), view.get("tasks"),
               starts(progress(folder))))
        if grown is None:
            return

        rigid = submit(c, {"name": "needs-a-node", "command": ["sleep", "600"],
                           "resources": {"gpus": 2}})
        shrunk = wait_for(lambda: running_generation(folder, 1, grown), 90)
        view, other = c.job(job), c.job(rigid)
        check("a rigid job needing a node: the elastic job shrinks to one node (world size 1)",
              shrunk is not None and (view.get("elastic") or {}).get("now") == 1,
              (view.get("elastic"), view.get("events"), starts(progress(folder))))
        check("the rigid job runs, nothing preempted",
              c.wait_state(rigid, ("running",), 30) and view.get("state") == "running" and
              c.job(rigid).get("restarts", 0) == 0,
              (other.get("state"), view.get("state"), view.get("restarts"), view.get("events")))
        check("the job made two resizes, counted", view.get("resizes") == 2, view.get("resizes"))
        reasons = [e.get("reason", "") for e in view.get("events", [])]
        check("its events say each resize and why",
              any("resized from 1 to 2 nodes" in r for r in reasons) and
              any("resized from 2 to 1 node" in r for r in reasons), reasons)

        c.api("POST", f"/api/v1/jobs/{job}/cancel", {})
        check("the cancelled job ends (after saving)",
              c.wait_state(job, ("cancelled",), 60), c.job(job).get("state"))
        status, metrics = c.api("GET", f"/api/v1/jobs/{job}/metrics")
        check("the script's loss and step reports reach the job's metrics",
              status == 200 and len(metrics.get("series", {}).get("loss", [])) >= 5 and
              "step" in metrics.get("series", {}), (status, metrics))
        check_training(progress(folder))
    finally:
        c.stop()


def check_docs_copy():
    """docs/elastic.md shows the example whole (from `import argparse` on): it must be the file."""
    code = open(SCRIPT).read()
    docs = open(os.path.join(REPO, "docs", "elastic.md")).read()
    check("docs/elastic.md's copy of examples/elastic_ddp.py is the file as it is",
          code[code.index("import argparse"):] in docs)


def main():
    check_docs_copy()

    def scenarios(root):
        check_standalone(root)
        run(root)
    return net.run_in_network("elastic DDP test", scenarios)


if __name__ == "__main__":
    sys.exit(main())
