#!/usr/bin/env python3
"""Failover time of `corral server` on one PostgreSQL (docs/benchmarks.md, "Failover"): two
servers with default lease settings (3 s lease, renewed every 500 ms), one agent with fake GPUs,
and a steady submission load (a client submitting every 50 ms, trying both servers). Kills the
leader with SIGKILL N times (default 10), restarting it as a follower after each takeover, and
for each kill measures the time from the kill to the first submission accepted by `corral submit`
given both URLs (CORRAL_SERVER=URL1,URL2: the CLI finds the leader itself, docs/control-plane.md,
"Several servers"). The agent is given both URLs too. Reports every time, the median and the maximum, and
checks that every acknowledged submission is in the store at the end.

Usage: scripts/with_postgres.sh python3 bench/failover_bench.py build/corral [--kills N]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ha"))
from ha_cluster import HaCluster, request, wait_for  # noqa: E402


def main():
    corral = sys.argv[1] if len(sys.argv) > 1 else "build/corral"
    kills = int(sys.argv[sys.argv.index("--kills") + 1]) if "--kills" in sys.argv else 10
    if not os.environ.get("CORRAL_TEST_POSTGRES_URL"):
        print("failover_bench: run it under scripts/with_postgres.sh")
        return 2
    root = tempfile.mkdtemp(prefix="corral-failover-bench-")
    c = HaCluster(corral, root)
    spec = {"name": "load", "command": ["true"], "resources": {"gpus": 0, "cpu_milli": 0}}
    acknowledged = []
    stop = threading.Event()

    def load():
        # The steady load: one submission every 50 ms, each through whichever server accepts.
        while not stop.is_set():
            job, _ = c.submit_anywhere(spec, deadline_s=30)
            if job is not None:
                acknowledged.append(job)
            stop.wait(0.05)

    try:
        c.start_agent(server=c.server_list())
        cli_env = dict(os.environ, CORRAL_SERVER=c.server_list(), CORRAL_TOKEN=c.token,
                       HOME=root)
        loader = threading.Thread(target=load, daemon=True)
        loader.start()
        times = []
        led = []  # seconds from each kill until a follower's /healthz says it leads
        for i in range(kills):
            leader = c.leader()
            assert leader is not None, c.logs()
            others = [s for s in c.servers if s is not leader]
            wait_for(lambda: all(s.role() == "follower" for s in others), 30)
            # Under load: 20 submissions acknowledged since the previous takeover.
            base = len(acknowledged)
            wait_for(lambda: len(acknowledged) >= base + 20, 60)
            leader.kill9()
            killed = time.monotonic()
            # The takeover itself, as seen by polling the others' /healthz every 20 ms.
            threading.Thread(target=lambda: led.append(wait_for(
                lambda: any(s.role() == "leader" for s in others), 60) and
                time.monotonic() - killed), daemon=True).start()
            # The first submission accepted through the CLI, given both URLs: it finds the
            # leader itself (CORRAL_RETRY_TIMEOUT, default 10 s); called again if it gives up.
            while True:
                out = subprocess.run(
                    [c.corral, "submit", "--name", "after-kill", "--gpus", "0", "--cpu-milli",
                     "1", "-o", "json", "--", "true"],
                    env=cli_env, capture_output=True, text=True, timeout=60)
                if out.returncode == 0:
                    break
                assert time.monotonic() - killed < 60, out.stderr + c.logs()
            took = time.monotonic() - killed
            acknowledged.append(json.loads(out.stdout)["id"])
            times.append(took)
            wait_for(lambda: len(led) > i, 60)
            print(f"kill {i + 1}: a follower leads after {led[i]:.2f} s; first submission "
                  f"accepted {took:.2f} s after the SIGKILL", flush=True)
            leader.start()  # back as a follower
        stop.set()
        loader.join(60)
        leader = c.leader()
        missing = [j for j in acknowledged
                   if request(leader.url, "GET", f"/api/v1/jobs/{j}", token=c.token)[0] != 200]
        print(f"takeover (a follower leads) over {kills} kills: median "
              f"{statistics.median(led):.2f} s, max {max(led):.2f} s")
        print(f"failover (kill to the first submission accepted) over {kills} kills: median "
              f"{statistics.median(times):.2f} s, max {max(times):.2f} s; "
              f"{len(acknowledged)} submissions acknowledged, {len(missing)} missing")
        return 0 if not missing else 1
    finally:
        stop.set()
        c.stop()


if __name__ == "__main__":
    sys.exit(main())
