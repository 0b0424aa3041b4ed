#!/usr/bin/env python3
"""Distributed training end to end: real PyTorch DDP (Debian's python3-torch, gloo backend, CPU)
across two agents that live in two network namespaces with their own addresses, as two hosts.

The test creates a bridge and two namespaces (10.213.0.2 and 10.213.0.3; the server listens on
the bridge, 10.213.0.1), starts one agent in each with `--address`, and submits 2-node jobs:
  - torchrun, 2 processes per node: one torchrun per node starts the 4 ranks;
  - launcher none, 2 processes per node: corral starts one process per rank itself (env://);
  - a failing rank: the other part is stopped, the job restarts once and then succeeds, and the
    first run's exit reasons stay in the job's record.
Every rank trains a tiny model on its own data for a few steps; all ranks must end with
identical weights (DDP averaged their gradients), which they could not without the rendezvous.

Needs root (namespaces), iproute2 and /usr/bin/python3 with torch; skips with a message
otherwise. Usage: tests/distributed_test.py path/to/corral
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_test as e2e  # noqa: E402  (the Cluster harness and check())
from e2e_test import check, submit, wait_for  # noqa: E402

PYTHON = "/usr/bin/python3"  # Debian's interpreter, the one python3-torch installs into
# torchrun options may precede the script. Debian 12's torch 1.13 on Python 3.11 crashes in
# torchrun with the default --redirects/--tee of 0 (an IntFlag change): corral's torchrun
# launcher passes 2 (stderr) unless the job gives its own, as the CLI run below does.
TORCHRUN_OWN = ["--redirects=2", "--tee=2"]
SUBNET = "10.213.0"
TAG = str(os.getpid() % 100000)
BRIDGE = "crlbr" + TAG
NAMESPACES = {"a": ("crl-a-" + TAG, SUBNET + ".2"), "b": ("crl-b-" + TAG, SUBNET + ".3")}

TRAIN = r'''
import os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)              # different initial weights: DDP must broadcast rank 0's
model = torch.nn.Linear(8, 2)
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
data = torch.Generator().manual_seed(100 + rank)  # different data: gradients must be averaged
for _ in range(5):
    x, y = torch.randn(16, 8, generator=data), torch.randn(16, 2, generator=data)
    loss = ((ddp(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
weights = [round(v, 6) for p in model.parameters() for v in p.detach().flatten().tolist()]
with open(os.path.join(sys.argv[1], "rank%d.json" % rank), "w") as f:
    import json
    json.dump({"weights": weights, "world": world, "node": os.environ["CORRAL_NODE_NAME"],
               "local_rank": int(os.environ["LOCAL_RANK"]),
               "master": os.environ["MASTER_ADDR"]}, f)
dist.destroy_process_group()
'''

# Rank 1 of the first run exits 3 (a marker file tells runs apart); everyone else succeeds.
# Rank 0 must still be running when rank 1 fails, so that corral has to stop it: rank 1 fails
# only once rank 0 has said it is up, and rank 0 says so only after it found no marker. (Without
# that order, a rank 0 started late sees rank 1's marker, takes itself for the second run and
# exits 0 before corral hears of the failure: its first-run state is then "succeeded", rightly.)
FLAKY = r'''
import os, sys, time
out = sys.argv[1]
marker = os.path.join(out, "failed-once")
rank0_up = os.path.join(out, "rank0-up")
if not os.path.exists(marker):  # the first run
    if os.environ["RANK"] == "0":
        open(rank0_up, "w").close()
        time.sleep(300)  # waits to be stopped by corral when rank 1 fails
        sys.exit(4)
    deadline = time.monotonic() + 60
    while not os.path.exists(rank0_up) and time.monotonic() < deadline:
        time.sleep(0.01)
    open(marker, "w").close()
    sys.exit(3)
open(os.path.join(out, "ok-rank" + os.environ["RANK"]), "w").close()
'''


def sh(*args, check_rc=True):
    r = subprocess.run(args, capture_output=True, text=True)
    if check_rc and r.returncode != 0:
        raise RuntimeError(" ".join(args) + ": " + r.stderr.strip())
    return r


def setup_network():
    sh("ip", "link", "add", BRIDGE, "type", "bridge")
    sh("ip", "addr", "add", SUBNET + ".1/24", "dev", BRIDGE)
    sh("ip", "link", "set", BRIDGE, "up")
    for name, (ns, address) in NAMESPACES.items():
        veth = "crl" + name + TAG
        sh("ip", "netns", "add", ns)
        # The inner end is eth0 in both namespaces, so one GLOO_SOCKET_IFNAME fits every rank.
        sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "link", "set", veth, "master", BRIDGE, "up")
        sh("ip", "netns", "exec", ns, "ip", "addr", "add", address + "/24", "dev", "eth0")
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")


def teardown_network():
    for name, (ns, _) in NAMESPACES.items():
        sh("ip", "netns", "del", ns, check_rc=False)
        sh("ip", "link", "del", "crl" + name + TAG, check_rc=False)
    sh("ip", "link", "del", BRIDGE, check_rc=False)


def missing_prerequisite():
    if os.geteuid() != 0:
        return "not root (network namespaces need it)"
    if shutil.which("ip") is None:
        return "iproute2 ('ip') is not installed"
    if subprocess.run([PYTHON, "-c", "import torch.distributed"], capture_output=True).returncode:
        return PYTHON + " has no torch (apt-get install python3-torch; scripts/bootstrap.sh does)"
    return None


def ranks_of(out_dir):
    ranks = {}
    for f in os.listdir(out_dir):
        if f.startswith("rank") and f.endswith(".json"):
            ranks[int(f[4:-5])] = json.load(open(os.path.join(out_dir, f)))
    return ranks


def check_ddp_run(c, label, spec, out_dir, expect_ranks):
    job = submit(c, spec)
    done = c.wait_state(job, ("succeeded", "failed", "cancelled"), 120)
    state = c.job(job).get("state")
    logs = c.cli("logs", str(job)).stdout + c.cli("logs", str(job), "--task", "1").stdout
    check(f"{label}: the 2-node DDP job succeeds", done and state == "succeeded",
          (state, c.job(job).get("events"), logs[-3000:]))
    ranks = ranks_of(out_dir)
    check(f"{label}: all {expect_ranks} ranks reported", sorted(ranks) == list(range(expect_ranks)),
          sorted(ranks))
    if not ranks:
        return
    weights = {json.dumps(r["weights"]) for r in ranks.values()}
    check(f"{label}: every rank ends with identical weights", len(weights) == 1, weights)
    check(f"{label}: world size {expect_ranks} everywhere",
          all(r["world"] == expect_ranks for r in ranks.values()), ranks)
    check(f"{label}: ranks ran on both nodes (namespaces)",
          {r["node"] for r in ranks.values()} == {"a", "b"}, ranks)
    master = {r["master"] for r in ranks.values()}
    node0 = ranks.get(0, {}).get("node")
    check(f"{label}: one MASTER_ADDR, the address of rank 0's node",
          node0 in NAMESPACES and master == {NAMESPACES[node0][1]}, (master, node0))
    check(f"{label}: local ranks 0..1 on each node",
          sorted(r["local_rank"] for r in ranks.values()) == [0, 0, 1, 1], ranks)


def run(root):
    c = e2e.Cluster(os.path.join(root, "dist"), host=SUBNET + ".1")
    try:
        for name, (ns, address) in NAMESPACES.items():
            c.start_agent(name, "2xT4", prefix=("ip", "netns", "exec", ns),
                          extra=("--address", address))
        check("two agents in two namespaces join", c.wait_nodes(2))
        script = os.path.join(root, "train.py")
        open(script, "w").write(TRAIN)
        env = {"GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}

        out = os.path.join(root, "torchrun-out")
        os.makedirs(out)
        check_ddp_run(c, "torchrun", {
            "name": "ddp-torchrun", "command": [script, out], "tasks": 2,
            "launcher": "torchrun",
            "procs_per_node": 2, "env": env, "resources": {"gpus": 2}}, out, 4)

        out = os.path.join(root, "none-out")
        os.makedirs(out)
        check_ddp_run(c, "one process per GPU", {
            "name": "ddp-env", "command": [PYTHON, script, out], "tasks": 2, "launcher": "none",
            "procs_per_node": 2, "env": env, "resources": {"gpus": 2}}, out, 4)

        # CLI spelling of the same: --nodes/--gpus-per-node/--procs-per-node/--launcher.
        out = os.path.join(root, "cli-out")
        os.makedirs(out)
        r = c.cli("submit", "--nodes", "2", "--gpus-per-node", "1", "--procs-per-node", "1",
                  "--launcher", "torchrun", "--env", "GLOO_SOCKET_IFNAME=eth0", "-o", "json",
                  "--", *TORCHRUN_OWN, script, out)
        job = json.loads(r.stdout)["id"] if r.returncode == 0 else None
        check("corral submit --nodes 2 --launcher torchrun", job is not None, r.stderr)
        if job:
            ok = c.wait_state(job, ("succeeded",), 120)
            ranks = ranks_of(out)
            check("CLI job: 2 ranks, identical weights", ok and sorted(ranks) == [0, 1] and
                  len({json.dumps(x["weights"]) for x in ranks.values()}) == 1,
                  (c.job(job).get("events"), ranks))

        out = os.path.join(root, "flaky-out")
        os.makedirs(out)
        flaky = os.path.join(root, "flaky.py")
        open(flaky, "w").write(FLAKY)
        job = submit(c, {"name": "flaky", "command": [PYTHON, flaky, out], "tasks": 2,
                         "launcher": "none", "max_restarts": 1, "resources": {"gpus": 1}})
        ok = c.wait_state(job, ("succeeded", "failed"), 120)
        record = c.job(job)
        check("a failing rank restarts the whole job, which then succeeds",
              ok and record["state"] == "succeeded" and record["restarts"] == 1,
              (record.get("state"), record.get("events")))
        first = {t["index"]: t for t in record["tasks"] if t["generation"] == 1}
        check("the first run's exit reasons are kept: rank 1 exit 3, rank 0 stopped",
              first.get(1, {}).get("exit_code") == 3 and first.get(0, {}).get("state") == "killed",
              record["tasks"])
        check("the failing run's reason names the rank",
              any("task 1 exited with code 3" in e["reason"] for e in record["events"]),
              record["events"])
        check("both ranks of the second run succeeded",
              os.path.exists(os.path.join(out, "ok-rank0")) and
              os.path.exists(os.path.join(out, "ok-rank1")), os.listdir(out))

        job = submit(c, {"name": "fails", "command": ["sh", "-c", '[ "$RANK" = 1 ] && exit 5; sleep 60'],
                         "tasks": 2, "max_restarts": 0, "resources": {"gpus": 1}})
        ok = c.wait_state(job, ("failed", "succeeded"), 60)
        record = c.job(job)
        check("without restarts left, a failing rank fails the job and stops the other",
              ok and record["state"] == "failed" and
              any("task 1 exited with code 5" in e["reason"] for e in record["events"]) and
              {t["state"] for t in record["tasks"] if t["index"] == 0} == {"killed"},
              (record.get("state"), record.get("events"), record.get("tasks")))

        status, body = c.api("POST", "/api/v1/jobs", {
            "command": ["train.py"], "tasks": 2, "launcher": "torchrun", "shell": True})
        check("torchrun with shell: true is refused, naming the field",
              status == 400 and "shell" in json.dumps(body), (status, body))
        status, body = c.api("POST", "/api/v1/jobs", {"command": ["x"], "tasks": 2,
                                                      "env": {"RANK": "3"}})
        check("a gang's env may not set RANK (corral sets it), naming the field",
              status == 400 and "env.RANK" in json.dumps(body), (status, body))
        status, body = c.api("POST", "/api/v1/jobs", {"command": ["x"], "launcher": "slurm"})
        check("an unknown launcher is refused, listing the known ones",
              status == 400 and "torchrun" in json.dumps(body), (status, body))
    finally:
        c.stop()


def run_in_network(label, run):
    """Runs `run(root)` (root: a fresh folder) with the bridge and the two namespaces up, and
    takes them down after; skips, saying why, where they cannot be made. The exit status: 1 when
    a check failed (before this call too), else 0."""
    why = missing_prerequisite()
    if why:
        print(f"SKIP {label}: {why}")
        return 1 if e2e.FAILURES else 0
    root = tempfile.mkdtemp(prefix="corral-dist-")
    os.chmod(root, 0o755)
    try:
        teardown_network()  # leftovers of an interrupted run with the same pid tag
        try:
            setup_network()
        except RuntimeError as err:  # e.g. a container without CAP_NET_ADMIN
            print(f"SKIP {label}: cannot create network namespaces: {err}")
            return 1 if e2e.FAILURES else 0
        run(root)
    finally:
        teardown_network()
        if not e2e.FAILURES:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\n{len(e2e.PASSED)} checks passed, {len(e2e.FAILURES)} failed")
    return 1 if e2e.FAILURES else 0


if __name__ == "__main__":
    sys.exit(run_in_network("distributed tests", run))
