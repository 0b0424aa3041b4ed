#!/usr/bin/env bash
# Macro benchmarks of the simulator, timed end to end (process start to exit, trace parsing
# included) with GNU time, which also reports peak memory. Usage:
#   bench/macro.sh [path/to/corral]        (default build/corral)
# Needs ../shared/traces for the fill benchmarks; the 1M-job replay runs on a generated trace.
set -euo pipefail
corral=${1:-build/corral}
traces=${CORRAL_SHARED_TRACES:-$(dirname "$0")/../../shared/traces}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

measure() {  # measure LABEL CMD...: prints wall seconds and peak RSS of CMD
  local label=$1
  shift
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" >"$work/out" 2>"$work/err" || {
    cat "$work/err" >&2
    return 1
  }
  read -r secs kib <"$work/time"
  printf '%-58s %8.2f s %8d MiB\n' "$label" "$secs" $((kib / 1024))
}

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%d GiB", $2/1048576}' /proc/meminfo), $(uname -m)"
if [ -f "$traces/openb_pod_list_default.csv" ]; then
  nodes=$traces/openb_node_list_gpu_node.csv
  pods=$traces/openb_pod_list_default.csv
  measure "fill fgd, 1 seed, 1 thread (openb default)" \
    "$corral" sim fill --nodes "$nodes" --pods "$pods" --policy fgd --seeds 42 --threads 1
  measure "fill bestfit, 1 seed, 1 thread" \
    "$corral" sim fill --nodes "$nodes" --pods "$pods" --policy bestfit --seeds 42 --threads 1
  measure "fill all 7 policies x 10 seeds, all cores" \
    "$corral" sim fill --nodes "$nodes" --pods "$pods" --policy all --seeds 42-51
  cp "$work/out" "$work/fill_table"
  measure "fill all 7 policies x 10 seeds, 1 thread" \
    "$corral" sim fill --nodes "$nodes" --pods "$pods" --policy all --seeds 42-51 --threads 1
  # The 6,203 GPU pods that have a scheduled_time (bench/openb_gpu_jobs.py), replayed
  # in strict FIFO order with bestfit on 7 nodes of 8 V100s (issue 21: <= 25 ms).
  python3 "$(dirname "$0")/openb_gpu_jobs.py" "$pods" "$work/openb_gpu_jobs.csv"
  measure "replay 6,203 openb GPU pods, 7x8 V100, bestfit, strict" \
    "$corral" sim replay --nodes gen:7x8xV100 --trace "$work/openb_gpu_jobs.csv" --policy bestfit \
    --strict
else
  echo "fill benchmarks skipped: $traces is absent"
fi

"$corral" sim gen --jobs 1000000 --seed 1 --interarrival 0.15 --out "$work/jobs.jsonl" 2>/dev/null
measure "replay 1,000,000 jobs on 10,000 nodes (fgd)" \
  "$corral" sim replay --nodes gen:10000x8xA100-80GB --trace "$work/jobs.jsonl" --policy fgd
cat "$work/out"
measure "replay 1,000,000 jobs on 10,000 nodes (fgd, --no-frag)" \
  "$corral" sim replay --nodes gen:10000x8xA100-80GB --trace "$work/jobs.jsonl" --policy fgd \
  --no-frag
[ -f "$work/fill_table" ] && cat "$work/fill_table"
exit 0
