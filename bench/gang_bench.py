#!/usr/bin/env python3
"""How long a gang takes to be assigned: one or more corral binaries side by side, each run in
turn on the same machine (docs/benchmarks.md, "Typed allocations: a gang in one transaction").

Usage: python3 bench/gang_bench.py CORRAL [CORRAL ...] [--sizes 1,100,600] [--runs 5]

For each binary a fresh `corral dev` (8 fake GPUs, SQLite store); for each gang size, --runs
times: a gang of that many tasks running `true` (cpu_milli 1, no GPU, all on the one node) is
submitted, and a client polls GET /api/v1/jobs/ID every 5 ms: the time from before the POST until
the answer shows the job assigned (no longer pending: its tasks, ids and move to starting are
committed). Then it waits for the job to end before the next. Median and max per size.

Only the Python 3 standard library (and bench/exit_bench.py's harness). Every process is stopped
at the end, also on failure.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from exit_bench import Dev, wait_for  # noqa: E402

DONE = ("succeeded", "failed", "cancelled", "lost")


def assign_times(corral, root, sizes, runs):
    dev = Dev(corral, root)
    try:
        out = {}
        for size in sizes:
            times = []
            for _ in range(runs):
                spec = {"name": f"gang{size}", "command": ["true"], "tasks": size,
                        "resources": {"gpus": 0, "cpu_milli": 1}}
                start = time.monotonic()
                status, job = dev.api.call("POST", "/api/v1/jobs", spec)
                assert status == 201, (status, job)
                state = job["state"]
                while state == "pending":
                    time.sleep(0.005)
                    state = dev.api.call("GET", f"/api/v1/jobs/{job['id']}")[1]["state"]
                times.append((time.monotonic() - start) * 1000)
                assert wait_for(lambda: dev.api.call("GET", f"/api/v1/jobs/{job['id']}")[1]
                                ["state"] in DONE, 300), f"gang of {size} did not end"
            out[size] = times
        return out
    finally:
        dev.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("corral", nargs="+")
    parser.add_argument("--sizes", default="1,100,600")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print("submit -> assigned (ms): median / max over", args.runs, "runs")
    for corral in args.corral:
        root = tempfile.mkdtemp(prefix="corral-gang-bench-")
        try:
            times = assign_times(corral, root, sizes, args.runs)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        row = "  ".join(f"{size} tasks: {statistics.median(t):7.1f} / {max(t):7.1f}"
                        for size, t in times.items())
        print(f"{corral}\n  {row}", flush=True)


if __name__ == "__main__":
    main()
