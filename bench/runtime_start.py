#!/usr/bin/env python3
"""How long a one-task job takes from submission to its end on the process runtime and on the
container runtime (podman), side by side on one agent: `python3 bench/runtime_start.py
build/corral [--runs N]`. Needs root, podman, runc and busybox (scripts/bootstrap.sh); the
container side uses the same busybox image and CDI spec as tests/e2e_test.py."""
import os
import statistics
import sys
import tempfile
import time

CORRAL = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else "build/corral"
RUNS = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 10
sys.argv = [sys.argv[0], CORRAL]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import e2e_test as e2e  # noqa: E402  (the test harness: Cluster, container_setup)


def run_once(cluster, spec):
    start = time.monotonic()
    job = e2e.submit(cluster, spec)
    assert cluster.wait_state(job, ("succeeded", "failed"), 60), cluster.job(job)
    assert cluster.job(job)["state"] == "succeeded", cluster.job(job)
    return time.monotonic() - start


def main():
    root = tempfile.mkdtemp(prefix="corral-bench-")
    cluster = e2e.Cluster(os.path.join(root, "c"))
    setup, why = e2e.container_setup(cluster.root)
    if setup is None:
        cluster.stop()
        sys.exit("runtime_start: cannot run containers here: " + why)
    env, kind, cleanup = setup
    try:
        cluster.start_agent("n", "2xT4", extra=("--container-engine", e2e.shutil.which("podman"),
                                               "--cdi-kind", kind), env=env)
        assert cluster.wait_nodes(1)
        status, _ = cluster.api("POST", "/api/v1/environments",
                                {"name": "boxed", "image": "corral-e2e/busybox:1"})
        assert status == 201, status
        specs = {"process": {"command": ["echo", "ok"], "resources": {"gpus": 1}},
                 "container": {"command": ["echo", "ok"], "resources": {"gpus": 1},
                               "environment": "boxed"}}
        times = {name: [] for name in specs}
        for _ in range(RUNS):  # alternating, so that drift hits both alike
            for name, spec in specs.items():
                times[name].append(run_once(cluster, spec))
        for name, values in times.items():
            print(f"{name:9s} submit-to-end median {statistics.median(values) * 1000:6.0f} ms, "
                  f"min {min(values) * 1000:6.0f} ms, max {max(values) * 1000:6.0f} ms "
                  f"({len(values)} runs)")
        ratio = statistics.median(times["container"]) / statistics.median(times["process"])
        print(f"container / process (medians): {ratio:.2f}")
    finally:
        cluster.stop()
        cleanup()


if __name__ == "__main__":
    main()
