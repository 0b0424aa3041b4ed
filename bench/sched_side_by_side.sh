#!/usr/bin/env bash
# Side by side runs of two sched_bench binaries (docs/benchmarks.md, "Issue 21: a faster core"):
# alternating before/after, RUNS rounds (default 2), so that both see the same machine load.
#   bench/sched_side_by_side.sh BEFORE_SCHED_BENCH AFTER_SCHED_BENCH [RUNS] [FILTER]
# FILTER is a --benchmark_filter regex (default: the six 10,000-node BM_Schedule cases).
# Prints each benchmark line under "== run R before|after"; compare placements per CPU second.
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 4 ]; then
  echo "usage: $0 BEFORE_SCHED_BENCH AFTER_SCHED_BENCH [RUNS] [FILTER]" >&2
  exit 2
fi
before=$1 after=$2 runs=${3:-2}
filter=${4:-'BM_Schedule/(bestfit|fgd|bestfit_diverse|fgd_diverse|bestfit_quotas|fgd_quotas)/10000/'}
for bin in "$before" "$after"; do
  [ -x "$bin" ] || { echo "$0: not an executable: $bin" >&2; exit 2; }
done
case $runs in '' | *[!0-9]*) echo "$0: RUNS must be a positive integer" >&2; exit 2 ;; esac
[ "$runs" -ge 1 ] || { echo "$0: RUNS must be a positive integer" >&2; exit 2; }
for ((r = 1; r <= runs; ++r)); do
  for side in before after; do
    bin=$before
    [ "$side" = after ] && bin=$after
    echo "== run $r $side"
    "$bin" --benchmark_filter="$filter" 2>&1 | { grep BM_ || true; }
  done
done
