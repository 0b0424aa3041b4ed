#!/usr/bin/env python3
"""The fault harness (docs/reliability.md): real servers and agents under a steady submission
load, faults injected one after another, invariants checked at the end of each phase.

A run is a list of phases; a phase is one cluster (a store, servers, 3 agents) and a list of
faults. After the last fault the load stops, every fault is healed, and the checker reads the
API and the stamp log:
  - every job a server acknowledged is in the store (else: lost);
  - every job is terminal, or pending with a reason (legitimately waiting), once the cluster
    has had DRAIN_S to finish them;
  - no two runs of one task overlap in time (stamps.py), nor does a run start twice;
and counts the requeues (runs with a generation over 1).

Plans (--plan):
  short  about 3 minutes, in `make test`: a few of each kind;
  full   `make faults` (<= 30 min): every kind, SQLite's 100 server SIGKILLs in a row;
--scale N multiplies every count (FAULTS=N in make); --kinds a,b keeps only those kinds.

Needs PostgreSQL 15 for the PostgreSQL phase; root with `ip netns` and iptables for the
partitions, root for the disk-full fault's small filesystem (tmpfs). What is missing is skipped
with a message, never silently.

Usage: tests/faults/fault_run.py path/to/corral [--plan short|full] [--scale N] [--kinds K,..]
       [--seed S] [--keep]
"""
import argparse
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, Postgres, is_root, netns_missing, sh, wait_for  # noqa: E402
from faults import FAULTS  # noqa: E402
from load import SubmissionLoad  # noqa: E402
from stamps import overlaps, read_runs  # noqa: E402

# The server's timings (docs/control-plane.md, "Fencing"): nodes silent NODE_TIMEOUT_S are
# unreachable; an agent that hears no server for FENCE_AFTER_S stops its requeue-able tasks
# (SIGTERM, KILL_GRACE_S, SIGKILL), which must end before the node timeout with the agents' 5 s
# request timeout to spare: 4 + 2 + 5 < 12. On PostgreSQL a failover (the 3 s lease and a
# 0.5 s poll) must also end before FENCE_AFTER_S.
NODE_TIMEOUT_S = 12
FENCE_AFTER_S = 4
KILL_GRACE_S = 2  # the server's --kill-grace: SIGTERM to SIGKILL
# After the faults: how long the cluster has to finish the acknowledged jobs. The full run's
# queue runs near its 24 GPUs and its long tasks last up to 36 s: a job started late in the
# backlog needs minutes (120 s was too short: 3 long tasks were still running, stamped, at it).
DRAIN_S = 300
# The fault kinds during which a server may lose its lease and exit with status 3 (a frozen
# leader; PostgreSQL down longer than a lease); after any other it is a failure.
LEASE_LOSS_KINDS = {"leader_sigstop", "postgres_restart"}
RECOVER_S = 60  # after a fault: how long the cluster has to be whole again (a long cut: ~30 s)
# How long the load's long tasks run: in the full run, longer than the node timeout, so that
# some still run when a cut-off node is declared lost (and an overlap can show).
LONG_TASK_S = {"short": (6, 12), "full": (1.5 * NODE_TIMEOUT_S, 3 * NODE_TIMEOUT_S)}
CAUSE_SLACK_S = 10  # an overlap whose later run starts this soon after a fault may be its
TERMINAL = {"succeeded", "failed", "cancelled", "lost", "timeout", "oom"}

# Phases: (name, store, servers, shuffle: whether its faults come in a random order,
# [(kind, count)]). PostgreSQL phases run two servers: the leader's faults need a follower.
PLANS = {
    "short": [
        ("sqlite", "sqlite", 1, False, [("disk_full", 1), ("server_sigkill", 8),
                                        ("agent_sigkill", 2)]),
        ("postgres", "postgres", 2, True, [("server_sigkill", 2), ("leader_sigkill", 2),
                                           ("leader_sigstop", 2), ("postgres_restart", 3),
                                           ("partition_both_short", 3),
                                           ("partition_oneway_short", 3), ("disk_full", 2),
                                           ("agent_sigkill", 1), ("partition_both_long", 1),
                                           ("partition_oneway_long", 1)]),
    ],
    "full": [
        ("sqlite-kills", "sqlite", 1, False, [("server_sigkill", 100)]),
        ("sqlite", "sqlite", 1, True, [("agent_sigkill", 10), ("partition_both_short", 5),
                                       ("partition_oneway_short", 5), ("disk_full", 5)]),
        ("postgres", "postgres", 2, True, [("server_sigkill", 10), ("leader_sigkill", 10),
                                           ("leader_sigstop", 10), ("agent_sigkill", 10),
                                           ("postgres_restart", 10), ("partition_both_short", 5),
                                           ("partition_oneway_short", 5), ("disk_full", 5),
                                           ("partition_both_long", 5),
                                           ("partition_oneway_long", 5)]),
    ],
}


def log(text):
    print(time.strftime("%H:%M:%S ") + text, flush=True)


class Phase:
    """One cluster under load and its faults; `result` holds what the checker found."""

    def __init__(self, args, name, store, servers, shuffle, faults, root, capabilities):
        self.args, self.name, self.store, self.server_count = args, name, store, servers
        self.root = os.path.join(root, name)
        os.makedirs(self.root)
        self.rng = random.Random(f"{args.seed}-{name}")
        self.capabilities = capabilities | ({"servers2"} if servers >= 2 else set())
        self.failovers = []  # (kind, seconds): each leader fault's failover time
        self.lease_losses = 0  # servers that exited with status 3 and were started again
        self.windows = []  # (kind, target, start, end) of every fault, in wall-clock time
        self.node_events = []  # (time, node, state): every change the monitor saw
        self.injected = {}  # kind -> count
        self.failures = []
        kinds = {f.kind: f for f in FAULTS}
        self.plan = []
        for kind, count in faults:
            fault = kinds[kind](self)
            missing = [n for n in fault.needs if n not in self.capabilities]
            if missing:
                why = "; ".join(capabilities_why(n) for n in missing)
                log(f"[{name}] {kind}: skipped ({why})")
                continue
            self.plan += [fault] * count
        if shuffle:
            self.rng.shuffle(self.plan)
        self.mount = None

    def fail(self, text):
        self.failures.append(text)
        log(f"[{self.name}] FAIL {text}")

    def setup_data_root(self):
        data_root = os.path.join(self.root, "data")
        os.makedirs(data_root)
        if "small_disk" in self.capabilities:
            sh("mount", "-t", "tmpfs", "-o", "size=64m,mode=0755", "corral-faults", data_root)
            self.mount = data_root
        return data_root

    def run(self):
        data_root = self.setup_data_root()
        self.cluster = Cluster(self.args.corral, self.root, data_root, self.store,
                               servers=self.server_count, node_timeout=NODE_TIMEOUT_S, kill_grace=KILL_GRACE_S,
                               fence_after=FENCE_AFTER_S,
                               netns="netns" in self.capabilities)
        self.stamp_log = os.path.join(self.root, "stamps.log")
        self.load = None
        try:
            self.cluster.start()
            where = "namespaces" if self.cluster.network else "loopback"
            log(f"[{self.name}] {self.store}, {len(self.cluster.servers)} server(s), "
                f"{len(self.cluster.agents)} agents ({where}), {len(self.plan)} faults")
            self.load = SubmissionLoad(self.cluster, self.stamp_log, LONG_TASK_S[self.args.plan],
                                       seed=self.rng.random())
            self.load.start()
            self.watching = threading.Event()
            watcher = threading.Thread(target=self.watch_nodes, daemon=True)
            watcher.start()
            if not wait_for(lambda: self.load.count() >= 5, 30):
                raise RuntimeError("the load got no submission acknowledged")
            for i, fault in enumerate(self.plan):
                # A random moment, so that faults land at every point of a submission and a run.
                time.sleep(self.rng.uniform(0, 0.5))
                before = self.load.count()
                started = time.monotonic()
                self.load.during = fault.kind
                begin = time.time()
                try:
                    target, what = fault.inject()
                except Exception as e:
                    self.fail(f"{fault.kind}: injection failed: {e}")
                    target, what = "?", "failed"
                end = time.time()
                self.windows.append((fault.kind, target, begin, end))
                fault.injected += 1
                self.injected[fault.kind] = self.injected.get(fault.kind, 0) + 1
                self.recover(fault.kind, end)
                self.load.during = "no fault"
                log(f"[{self.name}] {i + 1}/{len(self.plan)} {fault.kind}: {target} {what}; "
                    f"whole again after {time.monotonic() - started:.1f} s")
                # The load must go on between faults: two more jobs acknowledged.
                if not wait_for(lambda: self.load.count() >= before + 2, RECOVER_S, 0.05):
                    self.fail(f"after {fault.kind}: no submission acknowledged in {RECOVER_S} s")
            self.load.stop()
            self.check()
        except Exception as e:
            self.fail(f"phase crashed: {e!r}\n{traceback.format_exc()}")
        finally:
            if hasattr(self, "watching"):
                self.watching.set()
            if self.load and not self.load.stopping.is_set():
                self.load.stop()
            self.teardown()

    def recover(self, kind, end):
        """Restarts what a fault left dead (a failure: no fault here may kill a process it
        does not target, nor leave dead the one it does; but a server may exit with status 3,
        its lease lost, as documented, and is started again as a supervisor would), then waits
        until every server is healthy, one leads, and every node is ready and heard from since
        the fault ended at `end`."""
        c = self.cluster
        for s in c.servers:
            if not s.alive() and s.proc.returncode != 3:
                self.fail(f"server {s.name} exited with {s.proc.returncode} during {kind} "
                          f"(see {s.log})")
                s.start()
        for a in c.agents:
            if not a.alive():
                self.fail(f"agent {a.name} exited during {kind} (see {a.log})")
                a.start()

        def whole():
            for s in c.servers:  # also one that loses its lease while the others recover
                if not s.alive() and s.proc.returncode == 3:
                    self.lease_losses += 1
                    log(f"[{self.name}] server {s.name} lost its lease during {kind} (exit "
                        "status 3): started again")
                    if kind not in LEASE_LOSS_KINDS:
                        self.fail(f"server {s.name} lost its lease during {kind}, which should "
                                  f"not cost it (see {s.log})")
                    s.start()
            return all(s.healthy() for s in c.servers) and c.leader()

        if not wait_for(whole, RECOVER_S):
            self.fail(f"after {kind}: a server is not healthy, or none leads, after "
                      f"{RECOVER_S} s")
        if not c.wait_nodes_ready(RECOVER_S, heard_since=end):
            self.fail(f"after {kind}: nodes not all ready after {RECOVER_S} s: {c.ready_nodes()}")

    def check(self):
        c = self.cluster
        acknowledged = list(self.load.acknowledged)

        def unfinished():
            jobs = c.all_jobs()
            if jobs is None:
                return None
            return {j: s for j, s in jobs.items() if s["state"] not in TERMINAL}

        drained = wait_for(lambda: unfinished() == {}, DRAIN_S, 0.5)
        jobs = c.all_jobs() or {}
        lost = [j for j in acknowledged if j not in jobs]
        stuck = {j: s for j, s in jobs.items() if s["state"] not in TERMINAL}
        waiting = {j: s for j, s in stuck.items()
                   if s["state"] == "pending" and s.get("pending_reason")}
        now = time.time()
        runs, orphans, malformed = read_runs(self.stamp_log)
        found = overlaps(runs, now)
        requeues = sum(1 for r in runs if r.generation > 1)
        # Why each requeued job was requeued: the reasons of its events back to pending.
        reasons = {}
        for job in sorted({r.job for r in runs if r.generation > 1}):
            status, view, _ = c.api("GET", f"/api/v1/jobs/{job}")
            for e in view.get("events", []) if status == 200 else []:
                if e.get("from") in ("running", "starting") and e.get("to") == "pending":
                    words = e.get("reason", "").split()  # without the numbers, to count alike
                    reason = " ".join(w for w in words if not w[-1:].isdigit())
                    reasons[reason] = reasons.get(reason, 0) + 1
        open_runs = [r for r in runs if r.stop is None]
        states = {}
        for s in jobs.values():
            states[s["state"]] = states.get(s["state"], 0) + 1
        self.result = {
            "acknowledged": len(acknowledged), "lost": len(lost), "overlapping": len(found),
            "requeues": requeues, "runs": len(runs), "open_runs": len(open_runs),
            "orphan_stops": orphans,
            "max_partition_overlap": max([s for a, b, s in found if self.partition_of(a, b)],
                                         default=0.0),
            "nodes_lost": sum(1 for _, _, state in self.node_events if state == "lost"),
            "max_overlap": max([s for _, _, s in found], default=0.0),
            "states": states, "refused": dict(self.load.refused), "requeue_reasons": reasons,
            "waiting": len(waiting), "stuck": len(stuck) - len(waiting),
            "max_failover": max([s for _, s in self.failovers], default=None),
            "failovers": len(self.failovers), "lease_losses": self.lease_losses,
        }
        if lost:
            self.fail(f"{len(lost)} acknowledged jobs lost: {lost[:20]}")
        if not drained and len(stuck) > len(waiting):
            self.fail(f"{len(stuck) - len(waiting)} jobs neither terminal nor waiting after "
                      f"{DRAIN_S} s: " + ", ".join(f"{j} {s['state']}" for j, s in
                                                    list(stuck.items())[:10]))
        for a, b, seconds in found[:20]:
            self.fail(f"job {a.job} task {a.task}: generation {a.generation} on {a.node} and "
                      f"generation {b.generation} on {b.node} overlap {seconds:.2f} s"
                      + "; faults then: " + (", ".join(f"{k} {t}" for k, t in self.causes(a, b))
                                             or "none"))
        if malformed:
            self.fail(f"{len(malformed)} lines of the stamp log are not stamps: {malformed[:5]}")
        if open_runs:
            log(f"[{self.name}] {len(open_runs)} runs have no stop stamp (killed, or still "
                f"running): " + ", ".join(f"{r.job}/{r.task}/{r.generation}"
                                          for r in open_runs[:10]))

    def causes(self, a, b):
        """The faults that may have made two runs overlap: those under way when the later run
        started, or that ended at most CAUSE_SLACK_S before it (a node is lost, and its task
        requeued, some seconds after the fault)."""
        later = max(a.start, b.start)
        return [(kind, target) for kind, target, start, end in self.windows
                if start <= later <= end + CAUSE_SLACK_S]

    def partition_of(self, a, b):
        """Whether the node of one of the two runs was cut off when the later one started."""
        return any(kind.startswith("partition") and target in (a.node, b.node)
                   for kind, target in self.causes(a, b))

    def watch_nodes(self):
        """The node monitor (a thread): records every node state change the API shows."""
        states = {}
        while not self.watching.is_set():
            for n in self.cluster.nodes():
                if states.get(n["name"]) != n.get("state"):
                    states[n["name"]] = n.get("state")
                    self.node_events.append((time.time(), n["name"], n.get("state")))
                    if len(self.node_events) > len(self.cluster.agents):
                        log(f"[{self.name}] node {n['name']}: {n.get('state')}")
            self.watching.wait(0.25)

    def teardown(self):
        c = self.cluster
        try:
            if any(s.alive() for s in c.servers):
                jobs = c.all_jobs() or {}
                for j, s in jobs.items():
                    if s["state"] not in TERMINAL:
                        c.api("POST", f"/api/v1/jobs/{j}/cancel", {})
                wait_for(lambda: not {j for j, s in (c.all_jobs() or {}).items()
                                      if s["state"] not in TERMINAL}, 30, 0.5)
        except Exception as e:
            log(f"[{self.name}] cancelling what was left: {e!r}")
        c.stop()
        kill_leftover_tasks(self.stamp_log)
        if self.mount:
            sh("umount", "-l", self.mount, check=False)


def kill_leftover_tasks(stamp_log):
    """Tasks outlive their agents by design: SIGKILL every process whose command line names
    this phase's stamp log (load tasks only; by pid)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        except OSError:
            continue
        if stamp_log in cmdline:
            try:
                os.kill(int(pid), 9)
            except OSError:
                pass


def capabilities_why(name):
    return {"netns": "agents are on loopback: " + str(netns_missing()),
            "postgres": str(Postgres.missing()),
            "small_disk": "not root: no small filesystem for the data folder",
            "servers2": "the phase runs one server"}[name]


def capabilities():
    have = set()
    if netns_missing() is None:
        have.add("netns")
    if Postgres.missing() is None:
        have.add("postgres")
    if is_root() and shutil.which("mount"):
        have.add("small_disk")
    return have


def main():
    # A TERM (a timeout, Ctrl-C's cousin) unwinds like an exception: every phase's teardown
    # still stops its processes, namespaces and filesystem.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("corral")
    p.add_argument("--plan", choices=sorted(PLANS), default="short")
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--kinds", default="")
    p.add_argument("--seed", default="1")
    p.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = p.parse_args()
    args.corral = os.path.abspath(args.corral)
    have = capabilities()
    kinds = set(filter(None, args.kinds.split(",")))
    known = {f.kind for f in FAULTS}
    if kinds - known:
        sys.exit(f"unknown fault kinds: {sorted(kinds - known)} (known: {sorted(known)})")
    root = tempfile.mkdtemp(prefix="corral-faults-")
    os.chmod(root, 0o755)
    log(f"fault harness: plan {args.plan}, scale {args.scale}, seed {args.seed}, in {root}; "
        f"node timeout {NODE_TIMEOUT_S} s, kill grace {KILL_GRACE_S} s")
    phases = []
    started = time.monotonic()
    for name, store, servers, shuffle, faults in PLANS[args.plan]:
        faults = [(k, max(1, round(n * args.scale))) for k, n in faults if not kinds or k in kinds]
        if not faults:
            continue
        if store == "postgres" and "postgres" not in have:
            log(f"[{name}] skipped: {capabilities_why('postgres')}")
            continue
        phase = Phase(args, name, store, servers, shuffle, faults, root, have)
        phases.append(phase)
        phase.run()
    failed = report(phases, time.monotonic() - started)
    if failed or args.keep:
        print("scratch folder (logs, stamps) kept in", root)
    else:
        shutil.rmtree(root, ignore_errors=True)
    sys.exit(1 if failed else 0)


def report(phases, seconds):
    print("\n== fault harness summary")
    total = {}
    failed = False
    for ph in phases:
        r = getattr(ph, "result", None)
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(ph.injected.items()))
        print(f"[{ph.name}] faults injected: {sum(ph.injected.values())} ({kinds})")
        if r:
            print(f"[{ph.name}] jobs acknowledged {r['acknowledged']}, lost {r['lost']}, "
                  f"overlapping runs {r['overlapping']}, requeues {r['requeues']}, "
                  f"max partition overlap {r['max_partition_overlap']:.2f} s "
                  f"(max overlap {r['max_overlap']:.2f} s); runs {r['runs']} "
                  f"({r['open_runs']} without a stop stamp, {r['orphan_stops']} stops without a "
                  f"start); nodes lost {r['nodes_lost']}; waiting {r['waiting']}, "
                  f"stuck {r['stuck']}; states {r['states']}; not acknowledged {r['refused']}; "
                  f"requeued because {r['requeue_reasons']}")
            if r["failovers"]:
                print(f"[{ph.name}] failovers {r['failovers']}, max {r['max_failover']:.2f} s "
                      "(leader fault to the next submission sent after it acknowledged)")
            print(f"[{ph.name}] servers that exited with their lease lost (status 3) "
                  f"{r['lease_losses']}")
            for k in ("acknowledged", "lost", "overlapping", "requeues"):
                total[k] = total.get(k, 0) + r[k]
            if r["max_failover"] is not None:
                total["max_failover"] = max(total.get("max_failover", 0), r["max_failover"])
            total["max_partition_overlap"] = max(total.get("max_partition_overlap", 0),
                                                 r["max_partition_overlap"])
        for k, n in ph.injected.items():
            total.setdefault("kinds", {})[k] = total.setdefault("kinds", {}).get(k, 0) + n
        if ph.failures:
            failed = True
            print(f"[{ph.name}] {len(ph.failures)} failures:")
            for f in ph.failures:
                print("   " + f.splitlines()[0])
    kinds = total.get("kinds", {})
    print(f"TOTAL: faults injected {sum(kinds.values())} ("
          + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) + "); "
          f"jobs acknowledged {total.get('acknowledged', 0)}, lost {total.get('lost', 0)}, "
          f"overlapping runs {total.get('overlapping', 0)}, requeues {total.get('requeues', 0)}, "
          f"max partition overlap {total.get('max_partition_overlap', 0):.2f} s, "
          f"max failover {total.get('max_failover', 0):.2f} s; {seconds:.0f} s; {'FAILED' if failed else 'passed'}")
    return failed or not phases


if __name__ == "__main__":
    main()
