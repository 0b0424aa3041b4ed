#!/usr/bin/env bash
# Runs the libFuzzer targets (fuzz/, docs/security.md "Fuzzing") built in build-fuzz/ (`make
# fuzz-build`), one after another (one core each: the machine is shared), each for SECONDS on
# its kept seed corpus (fuzz/corpus/TARGET/) with its dictionary. Fails at the first target
# that finds a crash, an uncaught exception, a leak, a sanitizer report, an input slower than
# 10 s or a process over 2 GiB; the input is then in build-fuzz/crashes/ and the report in
# build-fuzz/fuzz-logs/TARGET.log (rerun it: build-fuzz/fuzz/TARGET_fuzzer INPUT).
#
#   scripts/fuzz.sh SECONDS [--merge] [TARGET...]   (TARGET: job_spec_json, ...; default: all)
#
# Without --merge (CI) the kept corpus is only read: what a run finds is left in
# build-fuzz/fuzz-new/TARGET/. With --merge (`make fuzz`) the inputs that reach code the kept
# corpus does not are merged into it (libFuzzer's -merge=1), to be committed.
# Prints one line per target: executions, time, the kept corpus's size before and after; and
# appends it, dated, to build-fuzz/fuzz-history.txt (what docs/security.md's table adds up).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:?usage: scripts/fuzz.sh SECONDS [--merge] [TARGET...]}
shift
merge=0
if [ "${1:-}" = --merge ]; then
  merge=1
  shift
fi
all=(job_spec_json job_spec_yaml agent_protocol trace_openb_nodes trace_openb_pods trace_tiresias
  trace_helios trace_jsonl nodes_jsonl http_api)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

# The dictionary of a target: its own, or the one of its format.
dict_of() {
  case $1 in
    trace_jsonl | nodes_jsonl) echo fuzz/trace_jsonl.dict ;;
    trace_*) echo fuzz/trace_csv.dict ;;
    *) echo "fuzz/$1.dict" ;;
  esac
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
limits=(-rss_limit_mb=2048 -timeout=10)
mkdir -p build-fuzz/crashes build-fuzz/fuzz-logs

for t in "${targets[@]}"; do
  binary=build-fuzz/fuzz/${t}_fuzzer
  kept=fuzz/corpus/$t
  new=build-fuzz/fuzz-new/$t
  log=build-fuzz/fuzz-logs/$t.log
  [ -x "$binary" ] || { echo "fuzz.sh: no $binary (make fuzz-build)" >&2; exit 2; }
  before=$(find "$kept" -type f | wc -l)
  rm -rf "$new"
  mkdir -p "$new"
  # New inputs go to the first folder; the kept corpus is read as seeds.
  if ! "$binary" "$new" "$kept" -dict="$(dict_of "$t")" -max_total_time="$seconds" "${limits[@]}" \
    -artifact_prefix="build-fuzz/crashes/$t-" -print_final_stats=1 >"$log" 2>&1; then
    echo "fuzz.sh: $t FAILED; the end of its report (all of it: $log):" >&2
    grep -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse|INITED)' "$log" | tail -60 >&2
    exit 1
  fi
  if [ $merge -eq 1 ]; then
    # Only inputs that reach new code (edges, not hit counts): a quarter of the files, the same
    # coverage kept.
    "$binary" -merge=1 -use_counters=0 "$kept" "$new" "${limits[@]}" >>"$log" 2>&1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  line=$(printf '%-18s %9s runs in %4s s   corpus %4d -> %4d files' "$t" "${runs:-?}" "$seconds" \
    "$before" "$(find "$kept" -type f | wc -l)")
  echo "$line"
  echo "$(date -u +%FT%TZ) $line" >>build-fuzz/fuzz-history.txt
done
