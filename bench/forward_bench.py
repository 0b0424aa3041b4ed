#!/usr/bin/env python3
"""What forwarding costs (docs/benchmarks.md, "Forwarding"): two servers on one PostgreSQL; the
same authenticated GET /api/v1/jobs, one request per connection, sent N times straight to the
leader and N times to the follower, which forwards it (tests/ha/ha_cluster.py). Reports the
median and the 99th percentile of each, twice, alternating.

Usage: scripts/with_postgres.sh python3 bench/forward_bench.py build/corral [--requests N]
"""
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ha"))
from ha_cluster import HaCluster, request  # noqa: E402


def main():
    corral = sys.argv[1] if len(sys.argv) > 1 else "build/corral"
    n = int(sys.argv[sys.argv.index("--requests") + 1]) if "--requests" in sys.argv else 300
    c = HaCluster(corral, tempfile.mkdtemp(prefix="corral-forward-bench-"))
    try:
        a, b = c.servers
        for name, url in [("straight to the leader", a.url), ("through the follower", b.url)] * 2:
            times = []
            for _ in range(n):
                start = time.perf_counter()
                status, _, _ = request(url, "GET", "/api/v1/jobs", token=c.token)
                times.append((time.perf_counter() - start) * 1000)
                assert status == 200, status
            times.sort()
            print(f"{name}: median {statistics.median(times):.2f} ms, "
                  f"p99 {times[int(n * 0.99) - 1]:.2f} ms ({n} requests)", flush=True)
    finally:
        c.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
