#!/usr/bin/env python3
"""Agents never touch what is not theirs: several clusters, and several agents of one cluster,
on one host, with real processes on loopback.

Cluster A is `corral server` with two agents (n1, n2); cluster B is a `corral dev` (server and
agent "dev" in one process). Both get the same jobs in the same order, so the same allocation
ids run in both at once; each job waits for its own release file, and the test ends them one
at a time, alternating between the clusters, checking after each end that the other cluster's
job of the same allocation id still runs. Every job must succeed with its own output. (Before
cluster ids, both agents put allocation k in cgroup corral/k-1, and the end of one SIGKILLed
the other: "killed by signal 9".)

With --old-corral PATH (a build of the last corral before cluster ids), also: a `corral dev`
of that build runs a job, is stopped, and the new build's `corral dev` on the same data dir
(store and agent work dir) adopts the running task, which then succeeds.

Polls with deadlines; never sleeps to wait for time to pass.

Usage: tests/isolation_test.py path/to/corral [--old-corral PATH] [--only TEST_NAME]
"""
import os
import pwd
import subprocess
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_test  # noqa: E402  (its Cluster, check, wait_for; it reads the same argv)
from e2e_test import CORRAL, Cluster, check, free_port, submit, wait_for  # noqa: E402

OLD_CORRAL = (os.path.abspath(sys.argv[sys.argv.index("--old-corral") + 1])
              if "--old-corral" in sys.argv else None)


class Dev:
    """A `corral dev` of `binary` on its own data dir and port, answering like Cluster."""

    def __init__(self, root, binary=CORRAL, gpus="4xA100-80GB"):
        self.root = root
        os.makedirs(root, exist_ok=True)
        self.data = os.path.join(root, "data")
        self.binary = binary
        self.gpus = gpus
        self.proc = None
        self.start()

    def start(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [self.binary, "dev", "--data-dir", self.data, "--listen", f"127.0.0.1:{self.port}",
             "--fake-gpus", self.gpus, "--web-dir", "", "--metrics-interval", "0"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.root, "dev.log"), "a"))
        token = os.path.join(self.data, "admin.token")
        up = wait_for(lambda: os.path.exists(token) and self.node_ready(), 30)
        assert up, "corral dev did not come up: " + open(os.path.join(self.root, "dev.log")).read()

    def node_ready(self):
        try:
            self.token = open(os.path.join(self.data, "admin.token")).read().strip()
            status, nodes = self.api("GET", "/api/v1/nodes")
            return status == 200 and any(n["state"] == "ready" for n in nodes)
        except Exception:
            return False

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    # Cluster's API helpers, on this server.
    api = Cluster.api
    job = Cluster.job
    wait_state = Cluster.wait_state


def log_of(cluster, job_id):
    req = urllib.request.Request(cluster.url + f"/api/v1/jobs/{job_id}/logs")
    req.add_header("Authorization", "Bearer " + cluster.token)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read().decode(errors="replace")
    except urllib.error.HTTPError:
        return ""


def gated_job(cluster, gates, tag):
    """A 1-GPU job that prints start-TAG, waits for the file gates/TAG, prints done-TAG."""
    gate = os.path.join(gates, tag)
    return submit(cluster, {
        "name": tag, "command": ["sh", "-c", f'echo "start-{tag}"; '
                                 f'while [ ! -e "{gate}" ]; do sleep 0.05; done; '
                                 f'echo "done-{tag}"'],
        "resources": {"gpus": 1}})


def allocations(cluster, job_id):
    return sorted(t["allocation_id"] for t in cluster.job(job_id).get("tasks", []))


def test_two_clusters_and_two_agents_on_one_host(root):
    a = Cluster(os.path.join(root, "cluster-a"))
    b = None
    try:
        a.start_agent("n1", "2xA100-80GB")
        a.start_agent("n2", "2xA100-80GB")
        check("cluster A: two agents join", a.wait_nodes(2))
        b = Dev(os.path.join(root, "cluster-b"))
        gates = os.path.join(root, "gates")
        os.makedirs(gates)
        count = 4  # fills cluster A's four GPUs: both of its agents run jobs
        jobs = {"A": [], "B": []}
        for i in range(1, count + 1):
            for name, cluster in (("A", a), ("B", b)):
                jobs[name].append(gated_job(cluster, gates, f"{name}{i}"))
        clusters = {"A": a, "B": b}
        running = all(clusters[n].wait_state(j, ("running",), 30)
                      for n in jobs for j in jobs[n])
        check("all jobs of both clusters run", running,
              {n: [clusters[n].job(j)["state"] for j in jobs[n]] for n in jobs})
        # The same allocation ids in both clusters at once: what used to collide.
        ids = {n: sorted(x for j in jobs[n] for x in allocations(clusters[n], j)) for n in jobs}
        check("both clusters run the same allocation ids", ids["A"] == ids["B"], ids)
        nodes = sorted({t["node"] for j in jobs["A"] for t in a.job(j)["tasks"]})
        check("cluster A's jobs run on both of its agents", nodes == ["n1", "n2"], nodes)
        started = wait_for(lambda: all(f"start-{n}{i + 1}" in log_of(clusters[n], j)
                                       for n in jobs for i, j in enumerate(jobs[n])), 30)
        check("every job started (its output came back)", started)
        # The collision was in the cgroups: each agent's tasks must sit in its own namespace.
        namespaces = {"A": [(os.path.join(a.root, "agent-" + n), n) for n in ("n1", "n2")],
                      "B": [(os.path.join(b.data, "agent"), "dev")]}
        roots = [r for r in ("/sys/fs/cgroup/memory/corral", "/sys/fs/cgroup/corral")
                 if os.path.isdir(r)]
        if not roots:
            print("SKIP the cgroup namespace checks: no corral cgroups on this host (not root, "
                  "or no memory controller); the tasks' ends are still checked", flush=True)
        else:
            found = {}
            for name, agents in namespaces.items():
                for work, node in agents:
                    ids = os.listdir(os.path.join(work, "clusters"))
                    found[f"{name}/{node}"] = sorted(
                        d for cluster in ids
                        for d in os.listdir(os.path.join(roots[0], cluster, node))
                        if os.path.isdir(os.path.join(roots[0], cluster, node, d)))
            cluster_ids = {name: os.listdir(os.path.join(agents[0][0], "clusters"))
                           for name, agents in namespaces.items()}
            check("each cluster's agents have their own cluster id",
                  len(cluster_ids["A"]) == 1 and len(cluster_ids["B"]) == 1 and
                  cluster_ids["A"] != cluster_ids["B"], cluster_ids)
            check("each agent's running tasks are in its own cgroup namespace "
                  "(corral/<cluster>/<node>/<alloc>-<gen>)",
                  sum(len(v) for v in found.values()) == 2 * count and len(found["B/dev"]) == count,
                  found)

        # End them one at a time, alternating which cluster goes first, by allocation id.
        by_alloc = {n: {allocations(clusters[n], j)[0]: (i + 1, j) for i, j in enumerate(jobs[n])}
                    for n in jobs}
        for turn, alloc in enumerate(sorted(by_alloc["A"])):
            first, second = ("A", "B") if turn % 2 == 0 else ("B", "A")
            index, job = by_alloc[first][alloc]
            open(os.path.join(gates, f"{first}{index}"), "w").close()
            ended = clusters[first].wait_state(job, ("succeeded", "failed", "lost"), 30)
            check(f"allocation {alloc}: cluster {first}'s job ends and succeeds",
                  ended and clusters[first].job(job)["state"] == "succeeded",
                  clusters[first].job(job))
            other_index, other = by_alloc[second][alloc]
            # The other cluster's job of the same allocation id must live on: the end above
            # (and its clean-up) was on another host object entirely. Checked for a while, as
            # a kill would arrive with the other agent's next report.
            alive = not wait_for(
                lambda: clusters[second].job(other)["state"] != "running", 3)
            check(f"allocation {alloc}: cluster {second}'s job still runs", alive,
                  clusters[second].job(other))
        for n in jobs:
            for i in range(1, count + 1):
                open(os.path.join(gates, f"{n}{i}"), "w").close()
        for n in jobs:
            for i, j in enumerate(jobs[n]):
                tag = f"{n}{i + 1}"
                ok = clusters[n].wait_state(j, ("succeeded", "failed", "lost"), 30)
                job = clusters[n].job(j)
                check(f"job {tag} succeeds", ok and job["state"] == "succeeded", job)
                out = wait_for(lambda: log_of(clusters[n], j) == f"start-{tag}\ndone-{tag}\n", 10)
                check(f"job {tag} has its own output", out, log_of(clusters[n], j))
        # A second agent on a work dir already in use is refused at once, naming the holder.
        work = os.path.join(a.root, "agent-n1")
        second = subprocess.run(
            [CORRAL, "agent", "--server", a.url, "--join-token", "x", "--name", "n3",
             "--fake-gpus", "1xT4", "--work-dir", work, "--task-user",
             pwd.getpwuid(os.getuid()).pw_name], capture_output=True, text=True, timeout=30)
        check("a second agent on one work dir is refused",
              second.returncode != 0 and "in use by another agent" in second.stderr,
              (second.returncode, second.stderr))
    finally:
        a.stop()
        if b:
            b.stop()


def test_upgrade_adopts_tasks_of_the_old_layout(root):
    """The last corral before cluster ids runs a job in `corral dev`; after the upgrade, the new
    `corral dev` on the same data dir adopts the running task and it succeeds."""
    gates = os.path.join(root, "upgrade-gates")
    os.makedirs(gates)
    old = Dev(os.path.join(root, "upgrade"), binary=OLD_CORRAL)
    new = None
    try:
        job = gated_job(old, gates, "U1")
        check("old corral dev runs the job",
              old.wait_state(job, ("running",), 30) and
              wait_for(lambda: "start-U1" in log_of(old, job), 30), old.job(job))
        old.stop()  # tasks outlive their agent
        new = Dev(os.path.join(root, "upgrade"))
        check("new corral dev adopts the running task",
              new.job(job)["state"] == "running" and
              not wait_for(lambda: new.job(job)["state"] != "running", 3), new.job(job))
        open(os.path.join(gates, "U1"), "w").close()
        done = new.wait_state(job, ("succeeded", "failed", "lost"), 30)
        check("the adopted task succeeds after the upgrade",
              done and new.job(job)["state"] == "succeeded", new.job(job))
        check("with its whole output", wait_for(
            lambda: log_of(new, job) == "start-U1\ndone-U1\n", 10), log_of(new, job))
        fresh = gated_job(new, gates, "U2")
        open(os.path.join(gates, "U2"), "w").close()
        check("a new job runs after the upgrade",
              new.wait_state(fresh, ("succeeded",), 30), new.job(fresh))
    finally:
        old.stop()
        if new:
            new.stop()


def main():
    tests = [test_two_clusters_and_two_agents_on_one_host]
    if OLD_CORRAL:
        tests.append(test_upgrade_adopts_tasks_of_the_old_layout)
    # Readable by the task users the test runs tasks as.
    e2e_test.run_tests("isolation", tests, root_mode=0o755)


if __name__ == "__main__":
    main()
