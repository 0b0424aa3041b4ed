#!/usr/bin/env bash
# Runs the libFuzzer targets (fuzz/, docs/security.md "Fuzzing") built in build-fuzz/ (`make
# fuzz-build`), JOBS at a time (default 1; each target uses one core), each for SECONDS on its
# kept seed corpus (fuzz/corpus/TARGET/) with its dictionary. Fails when a target finds a crash,
# an uncaught exception, a leak, a sanitizer report, an input slower than 10 s or a process over
# 2 GiB (the targets already running finish; no new one starts); the input is then in
# build-fuzz/crashes/ and the report in build-fuzz/fuzz-logs/TARGET.log (rerun it:
# build-fuzz/fuzz/TARGET_fuzzer INPUT).
#
#   scripts/fuzz.sh SECONDS [--merge] [TARGET...]   (TARGET: job_spec_json, ...; default: all)
#   JOBS=2 scripts/fuzz.sh 10                          (`make fuzz-ci`: two at a time)
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

jobs=${JOBS:-1}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: JOBS must be a positive integer, not '$jobs'" >&2; exit 2; }
for t in "${targets[@]}"; do
  [ -x "build-fuzz/fuzz/${t}_fuzzer" ] || { echo "fuzz.sh: no build-fuzz/fuzz/${t}_fuzzer (make fuzz-build)" >&2; exit 2; }
done

# fuzz_one TARGET: fuzzes TARGET (and merges, with --merge); its summary line goes to
# build-fuzz/fuzz-logs/TARGET.line. Fails when the fuzzer did.
fuzz_one() {
  local t=$1
  local binary=build-fuzz/fuzz/${t}_fuzzer kept=fuzz/corpus/$t new=build-fuzz/fuzz-new/$t
  local log=build-fuzz/fuzz-logs/$t.log before runs
  before=$(find "$kept" -type f | wc -l)
  rm -rf "$new"
  mkdir -p "$new"
  # New inputs go to the first folder; the kept corpus is read as seeds.
  "$binary" "$new" "$kept" -dict="$(dict_of "$t")" -max_total_time="$seconds" "${limits[@]}" \
    -artifact_prefix="build-fuzz/crashes/$t-" -print_final_stats=1 >"$log" 2>&1 || return 1
  if [ $merge -eq 1 ]; then
    # Only inputs that reach new code (edges, not hit counts): a quarter of the files, the same
    # coverage kept.
    "$binary" -merge=1 -use_counters=0 "$kept" "$new" "${limits[@]}" >>"$log" 2>&1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  printf '%-18s %9s runs in %4s s   corpus %4d -> %4d files\n' "$t" "${runs:-?}" "$seconds" \
    "$before" "$(find "$kept" -type f | wc -l)" >"build-fuzz/fuzz-logs/$t.line"
}

# report TARGET STATUS: prints TARGET's line (and appends it, dated, to the history), or the end
# of its report when it failed.
report() {
  local t=$1 status=$2 log=build-fuzz/fuzz-logs/$1.log
  if [ "$status" -ne 0 ]; then
    echo "fuzz.sh: $t FAILED; the end of its report (all of it: $log):" >&2
    # grep fails when every line is progress (or there is none): not an error of the script's.
    { grep -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse|INITED)' "$log" || true; } | tail -60 >&2
    return
  fi
  cat "build-fuzz/fuzz-logs/$t.line"
  echo "$(date -u +%FT%TZ) $(cat "build-fuzz/fuzz-logs/$t.line")" >>build-fuzz/fuzz-history.txt
}

# Up to $jobs targets at once; each one's result is printed when it ends.
declare -A target_of=()
failed=0
wait_one() {
  local pid status=0
  wait -n -p pid "${!target_of[@]}" || status=$?
  report "${target_of[$pid]}" "$status"
  [ "$status" -eq 0 ] || failed=1
  unset "target_of[$pid]"
}
for t in "${targets[@]}"; do
  while [ ${#target_of[@]} -ge "$jobs" ]; do wait_one; done
  [ $failed -eq 0 ] || break
  fuzz_one "$t" &
  target_of[$!]=$t
done
while [ ${#target_of[@]} -gt 0 ]; do wait_one; done
exit $failed
