#!/usr/bin/env bash
# Scripted tests of the `corral` command line: exit codes, error messages naming what is wrong,
# JSON output, determinism and the files --out writes; the client commands against a real
# `corral server` on loopback. Usage: tests/cli_test.sh path/to/corral
set -uo pipefail
corral=$(realpath "${1:?usage: cli_test.sh path/to/corral}")
here=$(cd "$(dirname "$0")" && pwd)
traces=${CORRAL_SHARED_TRACES:-$here/../../shared/traces}
work=$(mktemp -d)
server_pid=
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"' EXIT
failures=0
passed=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { passed=$((passed + 1)); }

# expect_exit CODE PATTERN -- CMD...: runs CMD; checks exit status and that stderr+stdout match.
expect_exit() {
  local want=$1 pattern=$2
  shift 3
  local out status
  out=$("$@" 2>&1)
  status=$?
  if [ "$status" -ne "$want" ]; then
    fail "'$*' exited $status, expected $want: $out"
  elif ! grep -qE -- "$pattern" <<<"$out"; then
    fail "'$*' output does not match /$pattern/: $out"
  else
    ok
  fi
}

# JSON without the measured wall time, keys sorted: what must be identical run to run.
stable_json() { python3 -c 'import json,sys
d=json.load(sys.stdin)
for r in d["results"]: r.pop("wall_ms",None)
print(json.dumps(d,sort_keys=True))'; }

cat >"$work/nodes.jsonl" <<'JSON'
{"name":"a","gpu_model":"V100","gpus":4,"cpu_milli":64000,"memory_mib":262144}
{"name":"b","gpu_model":"V100","gpus":4,"cpu_milli":64000,"memory_mib":262144}
JSON
cat >"$work/jobs.jsonl" <<'JSON'
{"id":0,"submit_time":0,"duration":100,"resources":{"gpus":4}}
{"id":1,"submit_time":10,"duration":50,"resources":{"gpus":4}}
{"id":2,"submit_time":20,"duration":50,"resources":{"gpus":4}}
JSON
printf '{"id":0,"submit_time":0,"duration":1,"resources":{"gpus":2,"gpu_milli":500}}\n' >"$work/bad.jsonl"

# Usage errors exit 2 and name the culprit.
expect_exit 2 "" -- "$corral"
# A mistyped command or flag is named, with the nearest known one; the job's words after "--"
# are never taken for flags.
expect_exit 2 "^corral: unknown command 'sbumit' \(did you mean 'submit'\?\)$" -- "$corral" sbumit
expect_exit 2 "^corral: unknown command 'frobnicate'$" -- "$corral" frobnicate
expect_exit 2 "^corral: unknown command 'crate' for 'corral project' \(did you mean 'create'\?\)$" -- \
  "$corral" project crate x
expect_exit 2 "^corral: unknown flag --limt for 'corral jobs' \(did you mean --limit\?\)$" -- \
  "$corral" jobs --limt 3
expect_exit 2 "^corral: unknown flag --gpu for 'corral submit' \(did you mean --gpus\?\)$" -- \
  "$corral" submit --gpu 2 -- true
expect_exit 2 "^corral: unknown flag --lisen for 'corral server' \(did you mean --listen\?\)$" -- \
  "$corral" server --lisen 127.0.0.1:1
# The placement policy is checked before the server starts; --help names the default.
expect_exit 2 "^--policy: fgdd not in \{.*,fgd,best\}$" -- "$corral" server --policy fgdd
expect_exit 0 "--policy TEXT:\{.*\}=best" -- "$corral" server --help
expect_exit 2 "--limit: 1 required INT missing" -- "$corral" jobs --limit
expect_exit 2 "^corral: --gpus: expected N or MIN-MAX, got 'x'$" -- "$corral" submit --gpus x -- python --lr 3
expect_exit 2 "^corral: unknown command 'evn' \(did you mean 'env'\?\)$" -- "$corral" evn list
expect_exit 2 "^corral: unknown flag --gpu for 'corral submit': the job's own flags go after -- \(corral submit \[FLAGS\] -- COMMAND ARGS\)$" -- \
  "$corral" submit python train.py --gpu 2
expect_exit 2 "subcommand is required" -- "$corral" sim
expect_exit 2 "unknown placement policy 'nope'" -- \
  "$corral" sim fill --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --policy nope
expect_exit 2 "--seeds" -- \
  "$corral" sim fill --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --seeds 9-x
expect_exit 2 "missing.csv" -- \
  "$corral" sim fill --nodes "$work/missing.csv" --pods "$work/jobs.jsonl"
expect_exit 2 "--tune: must be in" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --tune 0
expect_exit 2 "--exact-nodes: must be in \[1, 2\], got 3" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --exact-nodes 3
expect_exit 2 "--exact-time-limit: must be in" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --exact-nodes 1 \
  --exact-time-limit 0
expect_exit 2 "--exact-nodes: must be in \[1, 2\], got 0" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --exact-nodes 0
expect_exit 2 "--exact-time-limit: needs --exact-nodes" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --exact-time-limit 5
expect_exit 2 "--exact-load: needs --exact-nodes" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --exact-load 90
# An empty workload is bad input (exit 2), found before any header is printed.
head -1 "$work/jobs.jsonl" | sed 's/.*/# no jobs/' >"$work/empty.jsonl"
expect_exit 2 "^corral sim: --pods: .*empty.jsonl holds no tasks$" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/empty.jsonl"
expect_exit 2 "^corral sim: --pods: .*empty.jsonl holds no tasks$" -- \
  "$corral" sim fill --nodes "$work/nodes.jsonl" --pods "$work/empty.jsonl"
# A count typed negative is quoted as typed, not as the unsigned number it wraps to.
expect_exit 2 "--exact-nodes: must be in \[1, 2\], got -1" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --exact-nodes -1
expect_exit 2 "^--config-iterations: Value 0 not in range 1 to 1000000" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --config-iterations 0
# --config-at-load takes several loads; a bad one is quoted as typed.
expect_exit 2 "^corral sim: --config-at-load: 'abc': must be numbers in \[1, 1000\]" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --config-at-load 90,abc
expect_exit 2 "^corral sim: --config-at-load: '1001': must be numbers in \[1, 1000\]" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --config-at-load 1001
expect_exit 2 "^corral sim: --config-at-load: '99.5': not a whole %; must be numbers in \[1, 1000\] \(whole %" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --config-at-load 90,99.5
expect_exit 2 "^corral sim: --config-time-limit: must be in \(0, 3600\] seconds" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --config-time-limit 0
# Only the --config-* flags typed are named.
expect_exit 2 "^corral sim: --lp-only: not with --config-at-load$" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --lp-only --config-at-load 100
expect_exit 2 "^corral sim: --lp-only: not with --config-iterations, --config-time-limit$" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --lp-only --config-time-limit 5 \
  --config-iterations 5
expect_exit 2 "^corral sim: --config-at-load: not with --exact-nodes \(the tightness table" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --exact-nodes 1 --config-at-load 100
# --seeds errors quote the part as typed and say whether a range is empty or too long.
expect_exit 2 "^corral sim: --seeds: '-3' is not a seed or a range LO-HI" -- \
  "$corral" sim fill --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --seeds -3
expect_exit 2 "^corral sim: --seeds: '42-' is not a seed or a range LO-HI" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --seeds 42-
expect_exit 2 "^corral sim: --seeds: range '51-42' is empty \(42 < 51\)$" -- \
  "$corral" sim fill --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --seeds 51-42
expect_exit 2 "^corral sim: --seeds: range '0-10001' names more than 10001 seeds$" -- \
  "$corral" sim fill --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --seeds 0-10001
# The cap is on all parts together (a comma list of ranges must not list billions), checked
# before any seed is listed; a seed named twice would run twice.
expect_exit 2 "^corral sim: --seeds: '0-10000,0-10000,0-10000' names more than 10001 seeds in all \('0-10000' goes past it\)$" -- \
  "$corral" sim fill --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --seeds 0-10000,0-10000,0-10000
expect_exit 2 "^corral sim: --seeds: '0-5000,5001-10001' names more than 10001 seeds in all \('5001-10001' goes past it\)$" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --seeds 0-5000,5001-10001
expect_exit 2 "^corral sim: --seeds: seed 3 is named twice \('3' and '1-4'\)$" -- \
  "$corral" sim fill --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --seeds 3,1-4
expect_exit 2 "^corral sim: --seeds: seed 7 is named twice \('7' and '7'\)$" -- \
  "$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --seeds 7,7
expect_exit 2 "^--threads: Value -1 not in range 0 to 4096" -- \
  "$corral" sim fill --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --threads -1
# --best-params: errors name the key; without best among the policies it would be ignored, so
# it is refused.
expect_exit 2 "^corral sim: --best-params: only the best policy has these parameters, and --policy fgd,bestfit does not run it$" -- \
  "$corral" sim fill --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --policy fgd,bestfit \
  --best-params usable_weight=0
expect_exit 2 "^corral sim: --best-params: unknown key 'foo' \(known: .*usable_weight, strand_levels, strand_share, strand_expect\)$" -- \
  "$corral" sim fill --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --policy best \
  --best-params foo=1
expect_exit 2 "^corral sim: --best-params: usable_weight must be in \[0, 100\], got -1$" -- \
  "$corral" sim fill --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --policy best \
  --best-params usable_weight=-1
expect_exit 2 "^corral sim: --best-params: scale is not a number: 'big'$" -- \
  "$corral" sim fill --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --policy all \
  --best-params scale=big
# A research run says which parameters best ran with (all of them), in the table and the JSON.
expect_exit 0 "^fill: .*; best with --best-params demand_exp=.*,usable_weight=0,strand_levels=[^,]*,strand_share=[^,]*,strand_expect=[^,]*$" -- \
  "$corral" sim fill --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --policy best --seeds 1 \
  --best-params usable_weight=0
out=$("$corral" sim fill --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --policy best \
  --seeds 1 --best-params usable_weight=0,scale=1000 -o json)
if python3 -c 'import json,sys
d=json.load(sys.stdin)
assert "usable_weight=0" in d["best_params"] and "scale=1000" in d["best_params"], d
assert d["results"][0]["policy"]=="best", d' <<<"$out"; then ok; else fail "fill --best-params JSON: $out"; fi
# Help names every policy and the defaults: all for fill, fgd for replay (the server's is best),
# and every key --best-params takes.
expect_exit 0 "--policy TEXT=all +Placement policies, .*: random, .*, fgd, best \(best is corral's own and the server's default" -- \
  "$corral" sim fill --help
expect_exit 0 "--best-params TEXT .*demand_exp=.*,scale=.*,levels=.*,used_bonus=.*,cpu_weight=.*,memory_weight=.*,usable_weight=" -- \
  "$corral" sim fill --help
expect_exit 0 "--seeds TEXT=42-51" -- "$corral" sim bound --help
expect_exit 0 "--exact-time-limit FLOAT +Wall-clock seconds per exact solve .*also caps, separately, each configuration LP solve in the tightness table" -- \
  "$corral" sim bound --help
expect_exit 0 "--config-time-limit FLOAT +.*between pricing problems \(one pricing problem may overrun it; the fills that start the master are outside it\)" -- \
  "$corral" sim bound --help
expect_exit 0 "--policy TEXT=fgd +Placement policies" -- "$corral" sim replay --help
expect_exit 0 "--order TEXT=fifo .*srtf or srsf .*remaining times from --estimate" -- \
  "$corral" sim replay --help
expect_exit 0 "--estimate TEXT=oracle +Run-time estimates for qssf, srtf, srsf and backfill" -- \
  "$corral" sim replay --help
expect_exit 0 "--nodes TEXT .*parts share a node that has room for them" -- "$corral" submit --help
expect_exit 2 "argument --jobs: must be in \[1, 64\], got 0" -- \
  python3 "$here/../bench/placement_tune.py" --corral "$corral" --jobs 0
expect_exit 2 "bad.jsonl:1: .*gpu_milli" -- \
  "$corral" sim replay --nodes "$work/nodes.jsonl" --trace "$work/bad.jsonl"
expect_exit 2 "--order" -- \
  "$corral" sim replay --nodes "$work/nodes.jsonl" --trace "$work/jobs.jsonl" --order lifo
expect_exit 2 "scale-nodes" -- \
  "$corral" sim replay --nodes "$work/nodes.jsonl" --trace "$work/jobs.jsonl" --scale-nodes 0
expect_exit 2 "" -- "$corral" sim replay --nodes "$work/nodes.jsonl" --trace "$work/jobs.jsonl" -o xml
expect_exit 2 "node spec part .1xfour." -- \
  "$corral" sim replay --nodes "gen:1xfour" --trace "$work/jobs.jsonl"
# The server refuses fence timings an agent cut off could not keep (docs/control-plane.md,
# "Fencing"), naming the flags, before it opens anything.
expect_exit 2 "--fence-after 10 s \+ --kill-grace 10 s \+ the agents' request timeout 5 s = 25 s must be less than --node-timeout 20 s" -- \
  "$corral" server --store "sqlite:$work/fence.db" --data-dir "$work/fence" --node-timeout 20
expect_exit 2 "--fence-after must be at least 3 s" -- \
  "$corral" server --store "sqlite:$work/fence.db" --data-dir "$work/fence" --fence-after 2
expect_exit 2 "--node-give-up 20 s must be at least --node-timeout 30 s" -- \
  "$corral" server --store "sqlite:$work/fence.db" --data-dir "$work/fence" --node-give-up 20

# Replay: hand-computed result on two 4-GPU nodes: jobs 0 and 1 start at once; job 2 waits for
# job 1 (ends at 60) and ends at 110.
out=$("$corral" sim replay --nodes "$work/nodes.jsonl" --trace "$work/jobs.jsonl" --policy bestfit -o json)
if python3 -c 'import json,sys
r=json.load(sys.stdin)["results"][0]
assert r["completed"]==3 and r["makespan_s"]==110, r
assert abs(r["queue_s"]["mean"]-40/3)<1e-3 and r["jct_s"]["mean"]==80, r' <<<"$out"; then ok; else fail "replay JSON: $out"; fi

# --no-frag measures no fragmentation: the table says n/a and the JSON null, not 0; measured, it
# is a number.
out=$("$corral" sim replay --nodes "$work/nodes.jsonl" --trace "$work/jobs.jsonl" --policy bestfit --no-frag)
if grep -qE '^bestfit +3 +3 .* n/a +0 *$' <<<"$out"; then ok; else fail "replay --no-frag table: $out"; fi
out=$("$corral" sim replay --nodes "$work/nodes.jsonl" --trace "$work/jobs.jsonl" --policy bestfit --no-frag -o json)
python3 -c 'import json,sys; r=json.load(sys.stdin)["results"][0]; assert r["frag_pct_mean"] is None, r' \
  <<<"$out" && ok || fail "replay --no-frag JSON: $out"
out=$("$corral" sim replay --nodes "$work/nodes.jsonl" --trace "$work/jobs.jsonl" --policy bestfit -o json)
python3 -c 'import json,sys; r=json.load(sys.stdin)["results"][0]; assert isinstance(r["frag_pct_mean"], float), r' \
  <<<"$out" && ok || fail "replay frag JSON: $out"

# Bound: tuned to 130% of 8 GPUs, two of the three 4-GPU tasks remain (100% arrived), and both
# fit: nothing need stay unallocated at 100%.
out=$("$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --seeds 1)
if grep -qE '^mean +[0-9.]+ +0\.00 ' <<<"$out"; then ok; else fail "sim bound: $out"; fi
# Tightness on both nodes: the exact optimum holds both tasks too (0.00 unallocated, no gap), and
# so does the configuration LP's bound.
out=$("$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --seeds 1 \
  --exact-nodes 2 --exact-time-limit 10)
if grep -qE '^mean of 1 solved of 1: lp 0\.00, config 0\.00, exact 0\.00, .*lp_gap 0\.00' <<<"$out"; then ok
else fail "sim bound --exact-nodes: $out"; fi

# By default the configuration LP's bound is solved at 100% and its table comes first, saying per
# seed, in words, where it was solved, its bound there and whether it converged; the LP's table
# follows.
out=$("$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --seeds 1)
if grep -qE "^The configuration LP's bound \(column generation, at most 400 master solves a solve" <<<"$out" &&
  grep -qE '^  seed 1, 100% \(step [0-9]+, arrived [0-9.]+%\): converged, bound [0-9.]+%, [0-9]+ master solves$' <<<"$out" &&
  grep -qE '^The LP bound \(dual feasible functions; what --lp-only prints' <<<"$out"
then ok; else fail "sim bound default: $out"; fi
# Both bounds are computed together: their one time is shown once, in the upper table.
if [ "$(grep -cE '^seed .* ms' <<<"$out")" = 1 ] && grep -qE '^seed .* ms \(both\)$' <<<"$out" &&
  [ "$(grep -cE '^mean ' <<<"$out")" = 2 ] && grep -qE '^mean( +[0-9.]+){4}$' <<<"$out"
then ok; else fail "sim bound shows the time twice: $out"; fi
out=$("$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --seeds 1 --lp-only)
if grep -qE '^The LP bound \(dual feasible functions\) only' <<<"$out" &&
  ! grep -q "configuration" <<<"$out"; then ok; else fail "sim bound --lp-only: $out"; fi
# Several loads, one line per checkpoint (here both loads end at the last step: one solve, for
# the larger); a time limit hit at once stops the solve, not converged, with a sound bound (at
# most what arrived is held). The limit prints in fixed notation, as typed.
out=$("$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --seeds 1 \
  --config-at-load 130,100 --config-time-limit 0.000001)
if [ "$(grep -c '^  seed' <<<"$out")" = 1 ] &&
  grep -qE "^The configuration LP's bound \(column generation, at most 400 master solves and 0\.000001 s a solve;" <<<"$out" &&
  grep -qE '^  seed 1, 130% \(step 2, arrived 100\.00%\): not converged \(time limit\), sound bound = 0\.00%, 0 master solves$' <<<"$out"
then ok; else fail "sim bound --config-at-load 130,100 --config-time-limit: $out"; fi
out=$("$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --seeds 1,2 -o json)
python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["mode"] == "bound" and len(j["results"]) == 2, j
s = j["results"][0]["solves"]
assert len(s) == 1 and s[0]["load"] == 100 and s[0]["status"] == "converged" and s[0]["converged"], s
# 1-based, as the text line: two tasks of 4 GPUs have arrived at 100% of the 8 GPUs.
assert s[0]["step"] == 2 and s[0]["arrived_pct"] == 100, s
assert j["solves"] == 2 and j["converged"] == 2, j
assert j["mean"]["unallocated_gpu_pct"]["100"] >= j["mean"]["lp_unallocated_gpu_pct"]["100"], j
' <<<"$out" && ok || fail "sim bound -o json: $out"
# --lp-only: no configuration LP, so no configuration numbers, per seed or mean.
out=$("$corral" sim bound --nodes "$work/nodes.jsonl" --pods "$work/jobs.jsonl" --seeds 1,2 --lp-only -o json)
python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["mean"]["unallocated_gpu_pct"] is None and j["mean"]["lp_unallocated_gpu_pct"]["100"] >= 0, j
assert all(r["unallocated_gpu_pct"] is None and r["solves"] == [] for r in j["results"]), j
assert j["solves"] == 0 and j["converged"] == 0, j
' <<<"$out" && ok || fail "sim bound --lp-only -o json: $out"

# A trace is read as bytes: a Helios vc that is not UTF-8 is written as U+FFFD in the JSON report,
# not an internal error.
printf 'job_id,user,vc,gpu_num,cpu_num,node_num,submit_time,duration\nj1,alice,lab\377,1,4,1,0,60\n' \
  >"$work/latin1.csv"
out=$("$corral" sim replay --nodes gen:1x4xV100 --trace "$work/latin1.csv" --format helios -o json)
python3 -c 'import json,sys; r=json.load(sys.stdin)["results"][0]; assert r["completed"]==1, r
assert [p["project"] for p in r["projects"]]==["lab\ufffd"], r["projects"]' <<<"$out" &&
  ok || fail "replay of a trace that is not UTF-8: $out"

# Replay with sharing: project b (quota 4 GPUs) takes node a back from project a's borrowed job,
# which restarts from scratch at 60 (or resumes with --resume).
cat >"$work/two.jsonl" <<'JSON'
{"id":1,"project":"a","submit_time":0,"duration":100,"resources":{"gpus":4}}
{"id":2,"project":"b","submit_time":10,"duration":50,"resources":{"gpus":4}}
JSON
printf 'projects:\n  b: {gpus: 4}\n' >"$work/sharing.yaml"
out=$("$corral" sim replay --nodes gen:1x4xV100 --trace "$work/two.jsonl" --sharing "$work/sharing.yaml" \
  --order fairshare --blocking backfill --estimate predicted -o json)
if python3 -c 'import json,sys
d=json.load(sys.stdin); r=d["results"][0]
assert d["config"]["order"]=="fairshare" and d["config"]["blocking"]=="backfill", d["config"]
assert d["config"]["estimate"]=="predicted" and d["config"]["resume"] is False, d["config"]
assert r["preemptions"]==1 and r["lost_gpu_s"]==40 and r["makespan_s"]==160, r
assert [p["project"] for p in r["projects"]]==["a","b"] and r["projects"][1]["entitlement_90_s"]==0, r' <<<"$out"
then ok; else fail "replay --sharing JSON: $out"; fi
out=$("$corral" sim replay --nodes gen:1x4xV100 --trace "$work/two.jsonl" --sharing "$work/sharing.yaml" \
  --resume -o json)
python3 -c 'import json,sys; r=json.load(sys.stdin)["results"][0]; assert r["makespan_s"]==150 and r["lost_gpu_s"]==0, r' \
  <<<"$out" && ok || fail "replay --resume: $out"
"$corral" sim replay --nodes gen:1x4xV100 --trace "$work/two.jsonl" --sharing "$work/sharing.yaml" \
  --out "$work/shared" >/dev/null
[ -f "$work/shared/replay_fgd_projects.csv" ] && [ -f "$work/shared/replay_fgd_projects.svg" ] &&
  head -1 "$work/shared/replay_fgd_projects.csv" | grep -q '^time_s,project,gpu_alloc_pct,entitled_pct$' &&
  ok || fail "replay --out did not write the per-project timeline"
# Fairness is judged only under contention: two projects that never wanted more than the cluster
# has say "no contention"; one project preempted by a shorter job says "n/a (one project)", not
# Jain's index 0.000, which would read as maximally unfair.
out=$("$corral" sim replay --nodes gen:2x4xV100 --trace "$work/two.jsonl" --policy bestfit)
if grep -q 'fairness under contention: no contention' <<<"$out" && ! grep -q "Jain's index" <<<"$out"
then ok; else fail "replay without contention: $out"; fi
cat >"$work/one.jsonl" <<'JSON'
{"id":1,"project":"a","submit_time":0,"duration":100,"resources":{"gpus":4}}
{"id":2,"project":"a","submit_time":10,"duration":10,"resources":{"gpus":4}}
JSON
out=$("$corral" sim replay --nodes gen:1x4xV100 --trace "$work/one.jsonl" --policy bestfit \
  --order srtf --resume)
if grep -qE '^bestfit .* 1 *$' <<<"$out" && grep -q 'fairness under contention: n/a (one project)' <<<"$out" &&
  ! grep -q "Jain's index" <<<"$out"
then ok; else fail "replay of one project with a preemption: $out"; fi
# The fill table says what its columns mean.
out=$("$corral" sim fill --nodes gen:2x4xV100 --pods "$work/jobs.jsonl" --policy bestfit --seeds 1)
grep -q "frag@100%: free GPU capacity the typical tasks cannot use" <<<"$out" && ok ||
  fail "fill table legend: $out"
printf 'projects:\n  b: {gpus: 4, wieght: 2}\n' >"$work/typo.yaml"
expect_exit 2 "typo.yaml: field 'projects.b.wieght': unknown" -- \
  "$corral" sim replay --nodes gen:1x4xV100 --trace "$work/two.jsonl" --sharing "$work/typo.yaml"
printf 'fair_share: {half_life_s: 0}\n' >"$work/zero.yaml"
expect_exit 2 "field 'fair_share.half_life_s'" -- \
  "$corral" sim replay --nodes gen:1x4xV100 --trace "$work/two.jsonl" --sharing "$work/zero.yaml"
expect_exit 2 "cannot read .*missing.yaml" -- \
  "$corral" sim replay --nodes gen:1x4xV100 --trace "$work/two.jsonl" --sharing "$work/missing.yaml"
expect_exit 2 "--blocking: unknown blocking mode 'eager'" -- \
  "$corral" sim replay --nodes gen:1x4xV100 --trace "$work/two.jsonl" --blocking eager
expect_exit 2 "--strict contradicts --blocking backfill" -- \
  "$corral" sim replay --nodes gen:1x4xV100 --trace "$work/two.jsonl" --strict --blocking backfill
expect_exit 2 "--estimate: unknown estimate source 'magic'" -- \
  "$corral" sim replay --nodes gen:1x4xV100 --trace "$work/two.jsonl" --estimate magic
expect_exit 2 "--las-thresholds: '10'" -- \
  "$corral" sim replay --nodes gen:1x4xV100 --trace "$work/two.jsonl" --order las --las-thresholds 100,10
expect_exit 2 "pass-interval" -- \
  "$corral" sim replay --nodes gen:1x4xV100 --trace "$work/two.jsonl" --pass-interval -5
expect_exit 2 "--order srsf needs --resume" -- \
  "$corral" sim replay --nodes gen:1x4xV100 --trace "$work/two.jsonl" --order srsf

# Checkpoints and elastic jobs (docs/elastic.md). Job 1 is preempted at 10, 10 s after its last
# checkpoint (at its start): with a 5 s grace to checkpoint it loses 5 s × 4 GPUs, not 10 s,
# and resumes at 60 with 90 s left.
out=$("$corral" sim replay --nodes gen:1x4xV100 --trace "$work/two.jsonl" --sharing "$work/sharing.yaml" \
  --checkpoint-interval 20 --checkpoint-grace 5 --victims least-lost-work -o json)
python3 -c 'import json,sys; d=json.load(sys.stdin); r=d["results"][0]
assert d["config"]["victims"]=="least-lost-work" and d["config"]["checkpoint_grace_s"]==5, d["config"]
assert r["lost_gpu_s"]==20 and r["makespan_s"]==150, r' <<<"$out" && ok || fail "replay --checkpoint-grace: $out"
# A sweep: every (alpha, share) pair is a result, and --out plots them.
out=$("$corral" sim replay --nodes gen:1x4xV100 --trace "$work/two.jsonl" --elastic-share 0,1 \
  --elastic-alpha 0.5,1 --out "$work/sweep" -o json)
python3 -c 'import json,sys; rs=json.load(sys.stdin)["results"]
assert [(r["elastic"]["alpha"], r["elastic"]["share"]) for r in rs]==[(0.5,0),(0.5,1),(1,0),(1,1)], rs
assert rs[0]["elastic"]["jobs"]==0 and rs[1]["elastic"]["jobs"]==2, rs' <<<"$out" &&
  [ -f "$work/sweep/elastic_jct.svg" ] && [ -f "$work/sweep/elastic_alloc.svg" ] &&
  ok || fail "replay elastic sweep: $out"
expect_exit 2 "--elastic-share: '1.5': must be numbers in \[0, 1\]" -- \
  "$corral" sim replay --nodes gen:1x4xV100 --trace "$work/two.jsonl" --elastic-share 0.5,1.5
expect_exit 2 "--victims: unknown victim order 'newest'" -- \
  "$corral" sim replay --nodes gen:1x4xV100 --trace "$work/two.jsonl" --victims newest
expect_exit 2 "resize-cost" -- \
  "$corral" sim replay --nodes gen:1x4xV100 --trace "$work/two.jsonl" --resize-cost -1

# Generated workloads round-trip through replay; same seed, same bytes.
"$corral" sim gen --jobs 300 --seed 5 --out "$work/g1.jsonl" 2>/dev/null
"$corral" sim gen --jobs 300 --seed 5 --out "$work/g2.jsonl" 2>/dev/null
cmp -s "$work/g1.jsonl" "$work/g2.jsonl" && ok || fail "gen is not deterministic"
a=$("$corral" sim replay --nodes gen:8x8xA100 --trace "$work/g1.jsonl" --policy all -o json | stable_json)
b=$("$corral" sim replay --nodes gen:8x8xA100 --trace "$work/g1.jsonl" --policy all -o json | stable_json)
[ -n "$a" ] && [ "$a" = "$b" ] && ok || fail "replay JSON differs between two runs"

# Predict: in jobs.jsonl nothing has ended when a job arrives (ends at 100, 60, 70), so each gets
# the default 3600 s: relative errors 35, 71 and 71, MdAPE 7100%.
out=$("$corral" sim predict --trace "$work/jobs.jsonl" -o json)
if python3 -c 'import json,sys
r=json.load(sys.stdin)
assert r["mode"]=="predict" and r["jobs"]==3 and r["scored"]==3, r
assert r["mdape_pct"]==7100 and r["within_2x_pct"]==0 and r["mean_confidence"]==0, r
assert [b["basis"] for b in r["by_basis"]]==["default"], r' <<<"$out"; then ok; else fail "predict JSON: $out"; fi
expect_exit 2 "--window" -- "$corral" sim predict --trace "$work/jobs.jsonl" --window 0
expect_exit 2 "missing.jsonl" -- "$corral" sim predict --trace "$work/missing.jsonl"
expect_exit 2 "templates_per_user" -- \
  "$corral" sim gen --jobs 10 --templates-per-user 99 --out "$work/bad_templates.jsonl"
# Recurring templates are learnable: most predictions land within 2x.
"$corral" sim gen --jobs 2000 --seed 3 --templates-per-user 3 --out "$work/t.jsonl" 2>/dev/null
"$corral" sim predict --trace "$work/t.jsonl" -o json |
  python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["within_2x_pct"] > 60, r' &&
  ok || fail "predict on a templated workload"

# Fill: determinism across runs and thread counts, and the files --out writes.
a=$("$corral" sim fill --nodes gen:6x8xA100,6x4xT4 --pods "$work/g1.jsonl" --seeds 1-3 --threads 1 -o json | stable_json)
b=$("$corral" sim fill --nodes gen:6x8xA100,6x4xT4 --pods "$work/g1.jsonl" --seeds 1-3 --threads 2 -o json | stable_json)
[ -n "$a" ] && [ "$a" = "$b" ] && ok || fail "fill JSON differs between runs"
"$corral" sim fill --nodes gen:6x8xA100 --pods "$work/g1.jsonl" --policy fgd,bestfit --seeds 7 \
  --out "$work/fill" >/dev/null
[ -f "$work/fill/fill_fgd_7.csv" ] && [ -f "$work/fill/fill_unallocated.svg" ] && ok ||
  fail "fill --out did not write its CSVs and plot"
"$corral" sim replay --nodes gen:4x8xA100 --trace "$work/g1.jsonl" --out "$work/replay" >/dev/null
[ -f "$work/replay/replay_fgd.csv" ] && [ -f "$work/replay/replay_alloc.svg" ] && ok ||
  fail "replay --out did not write its CSV and plot"

if [ -f "$traces/openb_pod_list_default.csv" ]; then
  out=$("$corral" sim fill --nodes "$traces/openb_node_list_gpu_node.csv" \
    --pods "$traces/openb_pod_list_default.csv" --policy fgd --seeds 42 -o json)
  python3 -c 'import json,sys
d=json.load(sys.stdin); v=d["results"][0]["unallocated_gpu_pct"]["100"]
assert 3.5 < v < 6.0, v' <<<"$out" && ok || fail "openb fill fgd seed 42: $out"
  "$corral" sim replay --nodes gen:16x4xV100 --trace "$traces/tiresias_60_job.csv" -o json |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["results"][0]; assert r["completed"]==60, r' &&
    ok || fail "tiresias replay"
  "$corral" sim predict --trace "$traces/tiresias_60_job.csv" -o json |
    python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["jobs"]==60 and r["by_basis"][0]["basis"]=="user+name", r' &&
    ok || fail "tiresias predict"
else
  echo "SKIP: $traces is absent; openb and Tiresias CLI checks skipped"
fi

# The agent's task identity flags: a user map only with --run-as-submitter, which excludes
# --task-user; a bad map names its line. (They fail before the agent dials the server.)
agent_flags=(agent --server http://127.0.0.1:9 --join-token t --fake-gpus 1xT4
  --work-dir "$work/agent")
printf 'alice a.smith\ncarol\n' >"$work/users.map"
expect_exit 2 "task-user-map needs --run-as-submitter" -- \
  "$corral" "${agent_flags[@]}" --task-user nobody --task-user-map "$work/users.map"
expect_exit 2 "--task-user excludes --run-as-submitter" -- \
  "$corral" "${agent_flags[@]}" --run-as-submitter --task-user nobody
expect_exit 2 "--min-task-uid requires --run-as-submitter" -- \
  "$corral" "${agent_flags[@]}" --task-user nobody --min-task-uid 2000
if [ "$(id -u)" = 0 ]; then
  expect_exit 2 "users.map: line 2: expected 'CORRAL_USER UNIX_USER', got 'carol'" -- \
    "$corral" "${agent_flags[@]}" --run-as-submitter --task-user-map "$work/users.map"
  expect_exit 2 "give --task-user or --run-as-submitter" -- "$corral" "${agent_flags[@]}"
  # The map says who becomes whom: root's and writable by no one else; its users exist and are
  # in the uid range, or the agent does not start.
  printf 'alice corral-no-such-user\n' >"$work/users.map"
  chmod 0666 "$work/users.map"
  expect_exit 2 "users.map: must be owned by root and writable by no one else" -- \
    "$corral" "${agent_flags[@]}" --run-as-submitter --task-user-map "$work/users.map"
  chmod 0644 "$work/users.map"
  expect_exit 2 "task user 'corral-no-such-user': no such user" -- \
    "$corral" "${agent_flags[@]}" --run-as-submitter --task-user-map "$work/users.map"
  printf 'alice daemon\n' >"$work/users.map"
  expect_exit 2 "'alice' is mapped to uid 1, outside --min-task-uid 1000 .. --max-task-uid 60000" -- \
    "$corral" "${agent_flags[@]}" --run-as-submitter --task-user-map "$work/users.map"
fi

# Client commands against a real server (SQLite, no agents): `-o json` prints the server's
# answer, paging of `corral jobs`, revocation.
# expect_json CHECK -- CMD...: runs CMD (must exit 0) and evaluates the Python expression CHECK
# on its stdout parsed as JSON (bound to `j`).
expect_json() {
  local check=$1
  shift 2
  local out
  if ! out=$("$@" 2>&1); then
    fail "'$*' failed: $out"
  elif python3 -c "import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if ($check) else 1)" \
    "$out" 2>/dev/null; then
    ok
  else
    fail "'$*' printed no JSON matching ($check): $out"
  fi
}
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The CLI checks a job spec as the server would (protocol::ParseJobSpec) before it sends it: a
# bad one is refused naming the field (exit 2) without a request, so a server where nothing
# listens is never reached; a good one is sent and finds nothing there (exit 1).
nowhere=(env CORRAL_SERVER="http://127.0.0.1:$(free_port)" CORRAL_TOKEN=none CORRAL_RETRY_TIMEOUT=0.5)
expect_exit 1 "cannot reach the server .*tried http://127.0.0.1:[0-9]+ .*Is the server running there\? \(address from CORRAL_SERVER; change it, or run 'corral login --server URL --token T'\)$" -- \
  "${nowhere[@]}" "$corral" submit -- true
# An unreachable server stops a cancel of several jobs at the first: one error, the rest not asked.
expect_exit 1 "^corral: cancel: 3 of 3 not cancelled: cannot reach the server .*; not asked: 2 more$" -- \
  "${nowhere[@]}" "$corral" cancel 1 2 3
mkdir -p "$work/xdg/corral"
printf '{"server": "%s", "token": "none"}' "$(sed 's/.*CORRAL_SERVER=\([^ ]*\).*/\1/' <<<"${nowhere[*]}")" \
  >"$work/xdg/corral/config"
expect_exit 1 "Is the server running there\? \(address from $work/xdg/corral/config; change it, or run 'corral login --server URL --token T'\)$" -- \
  env -u CORRAL_SERVER -u CORRAL_TOKEN XDG_CONFIG_HOME="$work/xdg" CORRAL_RETRY_TIMEOUT=0.5 "$corral" jobs
expect_exit 2 "^corral: field 'resources.gpus': must be between 0 and 1024, got -3$" -- \
  "${nowhere[@]}" "$corral" submit --gpus -3 -- true
# Elastic jobs (docs/control-plane.md, "Elastic jobs"): a size flag takes MIN-MAX; what makes no
# sense is refused naming the flag or the field, before any request.
expect_exit 2 "^corral: --gpus: 8-2: MIN must not exceed MAX$" -- \
  "${nowhere[@]}" "$corral" submit --gpus 8-2 -- true
expect_exit 2 "^corral: --nodes: expected N or MIN-MAX, got '1-x'$" -- \
  "${nowhere[@]}" "$corral" submit --nodes 1-x -- true
expect_exit 2 "^corral: --gpu-step: needs a range of GPUs \(--gpus MIN-MAX\)$" -- \
  "${nowhere[@]}" "$corral" submit --gpus 4 --gpu-step 2 -- true
expect_exit 2 "^corral: --nodes: a job grows by GPUs or by nodes, not both$" -- \
  "${nowhere[@]}" "$corral" submit --gpus 2-8 --nodes 1-2 -- true
expect_exit 2 "^corral: field 'tasks': must be 1 for a range of GPUs" -- \
  "${nowhere[@]}" "$corral" submit --gpus 2-8 --tasks 2 -- true
expect_exit 2 "^corral: field 'resources.gpu_milli': an elastic job uses whole GPUs, not a share$" -- \
  "${nowhere[@]}" "$corral" submit --nodes 1-2 --gpus 1 --gpu-milli 500 -- true
# Time limits as people type them (seconds, units, Slurm's clock forms); anything else names
# the flag and the forms, before any request.
for bad in -5 nonsense 2h30 1:60 1h1h; do
  expect_exit 2 "^corral: --time-limit: expected seconds or a duration like 90m, 2h30m, 1d, 1:30:00 or 2-00:00:00, got '$bad'$" -- \
    "${nowhere[@]}" "$corral" submit --time-limit "$bad" -- true
done
# A server older than submit folders refuses the field the CLI adds on its own: the CLI submits
# again without it and says where the job will run. (A fake server: 400 for a body with
# submit_dir, as an older corral answers; 201 otherwise.)
older_port=$(free_port)
python3 - "$older_port" "$work/older.log" <<'PY' &
import http.server, json, sys
port, log = int(sys.argv[1]), sys.argv[2]
class Older(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        open(log, "a").write(json.dumps(body) + "\n")
        if "submit_dir" in body:
            out, status, kind = {"type": "about:blank", "title": "Bad Request", "status": 400,
                                 "detail": "field 'submit_dir': unknown field"}, 400, "application/problem+json"
        else:
            out, status, kind = {"id": 5, "state": "pending", "project": "default", "user": "admin",
                                 "reason": "submitted"}, 201, "application/json"
        data = json.dumps(out).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Older).serve_forever()
PY
older_pid=$!
for _ in $(seq 50); do python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $older_port), 0.1)" 2>/dev/null && break; sleep 0.1; done
expect_exit 0 "older than submit folders: the job runs in a scratch folder unless --workdir names one" -- \
  env CORRAL_SERVER="http://127.0.0.1:$older_port" CORRAL_TOKEN=t "$corral" submit -- true
kill "$older_pid"; wait "$older_pid" 2>/dev/null
expect_json 'len(j) == 2 and "submit_dir" in j[0] and "submit_dir" not in j[1]' -- \
  python3 -c 'import json,sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1])]))' "$work/older.log"
printf 'comand: ["true"]\n' >"$work/typo_spec.yaml"
expect_exit 2 "^corral: field 'comand': unknown field \(unknown to this corral [0-9.]+; .*pass --no-check" -- \
  "${nowhere[@]}" "$corral" submit -f "$work/typo_spec.yaml"
# --no-check: sent as it is (the server decides), so it goes as far as the missing server.
expect_exit 1 "cannot reach the server" -- \
  "${nowhere[@]}" "$corral" submit --no-check -f "$work/typo_spec.yaml"
printf '{"command": ["true"], "resources": {"gpus": 1, "gpu_milli": 1500}}' >"$work/share.json"
expect_exit 2 "^corral: field 'resources.gpu_milli': must be between 0 and 1000, got 1500$" -- \
  "${nowhere[@]}" "$corral" submit -f "$work/share.json"
expect_exit 2 "^corral: field 'env.CORRAL_SESSION_PORT': is set by corral in every task$" -- \
  "${nowhere[@]}" "$corral" session start --env CORRAL_SESSION_PORT=80 -- true
# Checked before the client's configuration is read: no server configured at all.
unconfigured=(env -u CORRAL_SERVER -u CORRAL_TOKEN HOME="$work/nobody" XDG_CONFIG_HOME="$work/nobody")
expect_exit 2 "^corral: field 'env.CORRAL_SESSION_PORT': is set by corral in every task$" -- \
  "${unconfigured[@]}" "$corral" session start --env CORRAL_SESSION_PORT=80 -- true
expect_exit 2 "^corral: field 'resources.gpus': must be between 0 and 1024, got -3$" -- \
  "${unconfigured[@]}" "$corral" submit --gpus -3 -- true

port=$(free_port)
session_port=$(free_port)  # the session gateway's (docs/sessions.md)
"$corral" server --listen "127.0.0.1:$port" --session-listen "127.0.0.1:$session_port" \
  --store "sqlite:$work/corral.db" --data-dir "$work/server" >/dev/null 2>"$work/server.log" &
server_pid=$!
export CORRAL_SERVER="http://127.0.0.1:$port" HOME="$work" XDG_CONFIG_HOME="$work/config"
for _ in $(seq 100); do
  kill -0 "$server_pid" 2>/dev/null || break  # it exited: the checks below fail and name why
  [ -s "$work/server/admin.token" ] &&
    CORRAL_TOKEN=$(cat "$work/server/admin.token") CORRAL_RETRY_TIMEOUT=0.5 "$corral" whoami \
      >/dev/null 2>&1 && break
  sleep 0.1
done
# A server that exited at start fails the run here, with its log, instead of every check below
# waiting out the client's retries.
kill -0 "$server_pid" 2>/dev/null || { echo "FAIL: the server exited at start: $(cat "$work/server.log")"; exit 1; }
export CORRAL_TOKEN=$(cat "$work/server/admin.token" 2>/dev/null)
expect_json 'j["user"] == "admin" and j["admin"]' -- \
  "$corral" login --server "$CORRAL_SERVER" --token "$CORRAL_TOKEN" -o json
expect_json 'j == {"name": "vision", "description": "cv"}' -- \
  "$corral" project create vision --description cv -o json
# With --no-check the server checks the spec, and names the field the same way.
expect_exit 2 "field 'comand': unknown field" -- "$corral" submit --no-check -f "$work/typo_spec.yaml"
expect_json 'j["name"] == "carol" and j["token"].startswith("crl_")' -- \
  "$corral" user create carol -o json
expect_json 'j == {"project": "vision", "user": "carol"}' -- \
  "$corral" project add-member vision carol -o json
# Names follow their kind's rule (docs/security.md, "Names"): the server names the field and it.
expect_exit 2 "field 'name': a user name must be 1 to 32 lowercase" -- "$corral" user create Carol
expect_exit 2 "field 'name': a project name must be .*got '\.\./x'" -- "$corral" project create ../x
expect_exit 2 "field 'name': a job name must be" -- "$corral" submit --name 'a b' -- true
expect_exit 3 "project 'robotics' does not exist" -- "$corral" project add-member robotics carol
expect_exit 3 "node 'gpu-1' not found" -- "$corral" node cordon gpu-1 -o json
for i in 1 2 3; do "$corral" submit --gpus 64 -o json -- true >"$work/job$i.json"; done
ids=$(python3 -c 'import json,sys
print(" ".join(str(json.load(open(f))["id"]) for f in sys.argv[1:]))' "$work"/job{1,2,3}.json)
read -r id1 id2 id3 <<<"$ids"
expect_exit 0 "^$id3 " -- "$corral" jobs --limit 2
expect_exit 0 "More jobs: corral jobs --limit 2 --cursor [A-Za-z0-9_-]+\$" -- "$corral" jobs --limit 2
cursor=$("$corral" jobs --limit 2 | sed -n 's/^More jobs: .* --cursor //p')
out=$("$corral" jobs --limit 2 --cursor "$cursor")
if grep -q "^$id1 " <<<"$out" && ! grep -q "^$id2 " <<<"$out" && ! grep -q "More jobs" <<<"$out"
then ok; else fail "the last page of 'corral jobs' (by its cursor): $out"; fi
out=$("$corral" jobs --limit 2 --before "$id2")  # deprecated, still pages
if grep -q "^$id1 " <<<"$out" && ! grep -q "More jobs" <<<"$out"; then ok; else
  fail "the last page of 'corral jobs --before': $out"; fi
# --user implies --all and keeps the other filters.
expect_json "[x['id'] for x in j] == [$id3]" -- \
  "$corral" jobs --user admin --state pending --limit 1 -o json
expect_json "[x['id'] for x in j] == [$id3, $id2, $id1]" -- "$corral" jobs -o json
expect_exit 2 "field 'limit'" -- "$corral" jobs --limit 0
# The time limit's forms reach the job as seconds.
for form in 90:90 0:00:02:2 2h30m:9000 1-00:00:01:86401; do
  limit=${form%:*}
  "$corral" submit --gpus 64 --time-limit "$limit" -o json -- true >"$work/limit.json"
  limit_id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$work/limit.json")
  expect_json "j['spec']['time_limit_s'] == ${form##*:}" -- "$corral" job show "$limit_id" -o json
  "$corral" cancel "$limit_id" >/dev/null
done
# job show says the limit and the predicted run, never beyond the limit.
limit_id=$("$corral" submit --gpus 64 --time-limit 0:30:00 -o json -- true |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
expect_exit 0 "^  time limit: 30m$" -- "$corral" job show "$limit_id"
expect_exit 0 "^  predicted run: 30m \(its time limit: the prediction was longer\)$" -- \
  "$corral" job show "$limit_id"
"$corral" cancel "$limit_id" >/dev/null
expect_json 'j == {"status": "cancelling"}' -- "$corral" cancel "$id1" -o json
expect_exit 0 "^cancelling job $id2\$" -- "$corral" cancel "$id2"
# Several ids: each is asked; the refused ones are named and the exit code is the first refusal's.
for i in 4 5; do "$corral" submit --gpus 64 -o json -- true >"$work/job$i.json"; done
read -r id4 id5 <<<"$(python3 -c 'import json,sys
print(" ".join(str(json.load(open(f))["id"]) for f in sys.argv[1:]))' "$work"/job{4,5}.json)"
expect_exit 5 "^corral: cancel: 2 of 3 not cancelled: job $id2 already ended \(cancelled\); job 999999 not found\$" -- \
  "$corral" cancel "$id4" "$id2" 999999
expect_json "j['state'] == 'cancelled'" -- "$corral" job show "$id4" -o json
expect_json "[x['id'] for x in j] == [$id5, $id3] and all(x['status'] == 'cancelling' for x in j)" -- \
  "$corral" cancel "$id5" "$id3" -o json
for id in "$id5" "$id3"; do expect_json "j['state'] == 'cancelled'" -- "$corral" job show "$id" -o json; done
token_json=$("$corral" token create ci -o json)
token_id=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["id"])' "$token_json")
token=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["token"])' "$token_json")
expect_exit 0 "^admin\$" -- env CORRAL_TOKEN="$token" "$corral" whoami
expect_json "j == {'revoked': $token_id}" -- "$corral" token revoke "$token_id" -o json
expect_exit 4 "unknown or revoked token" -- env CORRAL_TOKEN="$token" "$corral" whoami
expect_exit 0 "^revoked token $token_id\$" -- "$corral" token revoke "$token_id"
# Tokens may expire (--expires, a duration); token list shows when.
expect_json 'isinstance(j["expires_at"], int) and j["token"].startswith("crl_")' -- \
  "$corral" token create short --expires 30d -o json
expect_exit 2 "--expires: expected a duration like 90s, 30m, 2h or 1d, got '30x'" -- \
  "$corral" token create bad --expires 30x
expect_exit 2 "--expires: must be at least 1s" -- "$corral" token create bad --expires 0
expect_exit 0 "^[0-9]+ +short +[0-9-]+ [0-9:]+ +[0-9-]+ [0-9:]+ +false" -- "$corral" token list
expect_exit 0 "EXPIRES_AT" -- "$corral" tokens
# Submit limits (admin): only the flags given change; "none" clears one; 429 is exit 6.
expect_json 'j == {"user": "carol", "submit_limits": {"max_pending_jobs": 0, "max_submits_per_minute": 5}}' -- \
  "$corral" user set-limits carol --max-pending-jobs 0 --max-submits-per-minute 5 -o json
expect_exit 0 "^set the submit limits of user carol: no limit on pending jobs, at most 5 submissions per minute$" -- \
  "$corral" user set-limits carol --max-pending-jobs none
expect_exit 0 "^carol +false +5" -- "$corral" users
expect_exit 2 "--max-pending-jobs: expected a number in 0..1000000000 or 'none', got '-1'" -- \
  "$corral" user set-limits carol --max-pending-jobs -1
expect_exit 3 "user 'nobody' not found" -- "$corral" user set-limits nobody --max-pending-jobs 1
expect_json 'j["submit_limits"]["max_submits_per_minute"] == 1' -- \
  "$corral" project set-limits vision --max-submits-per-minute 1 -o json
expect_exit 0 "^vision +0 +1 +1 " -- "$corral" projects
"$corral" project add-member vision admin >/dev/null
"$corral" submit --project vision --gpus 64 -- true >/dev/null
expect_exit 6 "project 'vision' may submit at most 1 job a minute .*\(try again in [0-9]+ s\)" -- \
  "$corral" submit --project vision --gpus 64 -- true

# Job arrays: Slurm's --array, listed and cancelled together; a sweep file; errors name the part.
out=$("$corral" submit --array 0-3%2 --gpus 64 -- true 2>&1)
array=0
if [[ $out =~ ^submitted\ array\ ([0-9]+):\ jobs\ ([0-9]+)\.\.([0-9]+)$ ]] &&
  [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] &&
  [ $((BASH_REMATCH[3] - BASH_REMATCH[2])) -eq 3 ]; then
  ok
  array=${BASH_REMATCH[1]}
else
  fail "submit --array: $out"
fi
expect_json "[x['array_index'] for x in j] == [3, 2, 1, 0] and {x['array_id'] for x in j} == {$array}" -- \
  "$corral" jobs --array "$array" -o json
expect_exit 0 "^$array +${array}_0 " -- "$corral" jobs --array "$array"
expect_exit 0 "^Job $((array + 1)), element 1 of array $array  state: " -- "$corral" job show $((array + 1))
expect_exit 2 "--array: part 'x-3': 'x' is not an index" -- "$corral" submit --array 0-5,x-3 -- true
expect_exit 2 "--array: the running limit '%0'" -- "$corral" submit --array 0-5%0 -- true
printf 'grid:\n  lr: [0.1, 0.01]\n  batch: [32, 64]\nmax_running: 1\n' >"$work/sweep.yaml"
expect_exit 2 "--array and --sweep: give one of them" -- \
  "$corral" submit --array 0-1 --sweep "$work/sweep.yaml" -- true
sweep=$("$corral" submit --sweep "$work/sweep.yaml" --gpus 64 -o json -- true)
second=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["ids"][1])' "$sweep" 2>/dev/null)
expect_json 'j["spec"]["env"] == {"batch": "32", "lr": "0.01"} and j["array_index"] == 1' -- \
  "$corral" job show "${second:-0}" -o json
printf 'runs:\n  - {learning-rate: 1}\n' >"$work/bad_sweep.yaml"
expect_exit 2 "bad_sweep.yaml: parameter 'learning-rate': not a valid environment variable" -- \
  "$corral" submit --sweep "$work/bad_sweep.yaml" -- true
expect_exit 0 "^cancelling array $array: 4 jobs\$" -- "$corral" cancel --array "$array"
expect_exit 5 "array $array already ended" -- "$corral" cancel --array "$array"
expect_exit 3 "array $id3 not found" -- "$corral" cancel --array "$id3"
expect_exit 2 "give job ids, --array ARRAY_ID, or filters \(--user, --project, --state, --name\): one of them" -- "$corral" cancel
expect_exit 2 "give job ids, --array ARRAY_ID, or filters" -- "$corral" cancel 1 --user alice
expect_exit 2 "unknown job state .pendng." -- "$corral" cancel --state pendng

# An elastic job is pending at MIN; its view shows the range, no size yet, and no resizes.
elastic_id=$("$corral" submit --gpus 64-128 --gpu-step 32 -o json -- true |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' 2>/dev/null)
expect_json 'j["elastic"] == {"unit": "gpus", "min": 64, "max": 128, "step": 32} and j["resizes"] == 0 and j["spec"]["resources"]["gpus"] == 64' -- \
  "$corral" job show "${elastic_id:-0}" -o json
expect_exit 0 "^  Elastic: 64-128 GPUs in steps of 32 \(0 resizes\)$" -- "$corral" job show "${elastic_id:-0}"
printf '#!/bin/sh\n#SBATCH --nodes=2-4 --gpus-per-node=64\ntrue\n' >"$work/elastic.sh"
gang_id=$("$corral" batch -o json "$work/elastic.sh" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' 2>/dev/null)
expect_json 'j["elastic"]["unit"] == "nodes" and j["elastic"]["max"] == 4 and j["spec"]["tasks"] == 2' -- \
  "$corral" job show "${gang_id:-0}" -o json
expect_exit 0 "^  Elastic: 2-4 nodes \(0 resizes\)$" -- "$corral" job show "${gang_id:-0}"
"$corral" cancel "${elastic_id:-0}" "${gang_id:-0}" >/dev/null

# CPU slots: --cpus is whole CPUs per process (a part asks N x --procs-per-node), --cpu-milli per
# part, one of them; a job without GPUs asks 1 CPU per process unless it says otherwise, and the
# submitter is told (on stderr; stdout stays one line); `job show` gives the effective request.
expect_exit 2 "--cpus excludes --cpu-milli" -- "$corral" submit --cpus 2 --cpu-milli 500 -- true
expect_exit 2 "field 'resources.cpus': give resources.cpus \(whole CPUs per process\) or resources.cpu_milli" -- \
  "$corral" submit -f <(printf 'command: ["true"]\nresources: {cpus: 1, cpu_milli: 500}\n')
expect_exit 2 "field 'resources.cpus': must be" -- "$corral" submit --cpus 0 -- true
cpus_id=$("$corral" submit --cpus 2 --procs-per-node 3 --gpus 64 -o json -- true |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' 2>/dev/null)
expect_json 'j["spec"]["resources"]["cpu_milli"] == 6000 and "cpus" not in j["spec"]["resources"] and j["reason"] == "submitted"' -- \
  "$corral" job show "${cpus_id:-0}" -o json
# A flag overrides the spec file's other CPU field.
override_id=$("$corral" submit --cpus 1 -o json \
  -f <(printf 'command: ["true"]\nresources: {cpu_milli: 500}\n') |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' 2>/dev/null)
expect_json 'j["spec"]["resources"]["cpu_milli"] == 1000' -- "$corral" job show "${override_id:-0}" -o json
"$corral" submit -- true >"$work/cpu_default.out" 2>"$work/cpu_default.err"
if grep -qE '^submitted job [0-9]+ to project default$' "$work/cpu_default.out" &&
  grep -qxF 'corral submit: with defaults: resources.cpu_milli 1000 (1 CPU per process, as the job asks no GPU)' \
    "$work/cpu_default.err"; then ok; else
  fail "submit of a CPU-only job: $(cat "$work/cpu_default.out" "$work/cpu_default.err")"; fi
default_id=$(grep -oE '[0-9]+' "$work/cpu_default.out" | head -1)
expect_exit 0 "resources per task: gpus 0  gpu_milli 0  cpu_milli 1000  memory_mib 0" -- \
  "$corral" job show "${default_id:-0}"
expect_exit 0 "submitted with defaults: resources.cpu_milli 1000" -- "$corral" job show "${default_id:-0}"
expect_exit 2 "--default-cpus-per-gpu: Value -1 not in range" -- \
  "$corral" server --store "sqlite:$work/x.db" --data-dir "$work/x" --default-cpus-per-gpu -1
expect_exit 2 "--cpus: Value 0 not in range" -- "$corral" "${agent_flags[@]}" --cpus 0

# Environments: names are checked before they go into a URL; `env` is an alias.
expect_exit 2 "must be 1 to 63 lowercase letters" -- "$corral" environment share '../jobs' --project p
expect_exit 2 "where an environment name must be" -- "$corral" env show 'a/b@1'
expect_exit 0 "^pytorch " -- "$corral" environment list
expect_exit 3 "environment 'nothere' not found" -- "$corral" env show nothere

# Sessions (no agent here: they stay pending): the answer carries the URL and the token; errors
# name the flag; a session that is not yours is not found.
expect_exit 2 "give --environment NAME, or a command after --" -- "$corral" session start
expect_exit 2 "--idle-timeout: expected a duration" -- "$corral" session start --idle-timeout 5x -- true
expect_exit 2 "--idle-timeout: at least 1m" -- "$corral" session start --idle-timeout 30s -- true
expect_exit 2 "--wait-timeout: expected a duration" -- "$corral" session start --wait-timeout 5x -- true
# --env is NAME=VALUE as for corral submit; the environment is --environment.
expect_exit 2 "--env: expected NAME=VALUE, got 'jupyter' \(an environment to run in is --environment NAME\)" -- \
  "$corral" session start --env jupyter
expect_exit 2 "field 'tasks': must be 1 for a session" -- \
  "$corral" submit --tasks 2 -f <(printf 'session: {}\ncommand: ["true"]\n')
# --wait gives up after --wait-timeout (exit 1), leaving the session as it is.
out=$("$corral" session start --gpus 64 --wait --wait-timeout 1s -- true 2>&1)
status=$?
if [ "$status" -eq 1 ] &&
  grep -qE "session [0-9]+ not ready after --wait-timeout 1 s \(pending.*\); it was left as it is" <<<"$out"
then ok; else fail "session start --wait --wait-timeout 1s exited $status: $out"; fi
waited=$(grep -oE "session [0-9]+ not ready" <<<"$out" | grep -oE "[0-9]+")
[ -n "$waited" ] && "$corral" session stop "$waited" >/dev/null
session_json=$("$corral" session start --gpus 64 --idle-timeout 2h --env THEME=dark -o json -- true)
session=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["id"])' "$session_json" 2>/dev/null)
session=${session:-0}
if python3 -c 'import json,sys,re
s=json.loads(sys.argv[1]); url=sys.argv[2]
assert s["state"]=="pending" and s["idle_timeout_s"]==7200, s
assert s["url"]==url+"/sessions/%d/" % s["id"] and s["direct_url"] is None, s
assert re.fullmatch("[0-9a-f]{64}", s["token"]), s' "$session_json" "http://127.0.0.1:$session_port" \
  2>/dev/null
then ok; else fail "session start -o json: $session_json"; fi
expect_exit 0 "^$session +pending " -- "$corral" session list
expect_json "'token' not in j['spec']['session'] and j['spec']['session'] == {'idle_timeout_s': 7200} and j['spec']['env'] == {'THEME': 'dark'}" -- \
  "$corral" job show "$session" -o json
carol=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["token"])' \
  "$("$corral" user create dave -o json)")
expect_exit 3 "session $session not found" -- env CORRAL_TOKEN="$carol" "$corral" session show "$session"
expect_exit 3 "session $id1 not found" -- "$corral" session show "$id1"
expect_exit 0 "^stopping session $session\$" -- "$corral" session stop "$session"
expect_exit 5 "session $session already ended \\(cancelled\\)" -- "$corral" session stop "$session"
expect_json "j['state'] == 'cancelled' and 'token' in j and j['port'] is None" -- \
  "$corral" session show "$session" -o json

# Two executables (docs/decisions.md, "Two executables"): the client loads no TLS, HTTP library or
# SQLite; it lists the daemon commands and hands them to corral-daemon next to it, and says where
# it looked when that is missing.
if ldd "$corral" | grep -qE 'libssl|libcrypto|httplib|sqlite'; then
  fail "$corral links $(ldd "$corral" | grep -oE 'lib(ssl|crypto|cpp-httplib|sqlite3)[^ ]*' | tr '\n' ' ')"
else ok; fi
expect_exit 0 "server +Run the controller" -- "$corral" --help
expect_exit 0 "^Run the controller" -- "$corral" server --help
mkdir -p "$work/lonely" && cp "$corral" "$work/lonely/corral"
expect_exit 1 "'server' runs in corral-daemon, which cannot be started from $work/lonely/corral-daemon" -- \
  "$work/lonely/corral" server --help

# https: the server's certificate and name are verified against CORRAL_CA_CERT (libssl loaded
# only now), else the system's store, which does not know this one.
tls_port=$(free_port)
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost -keyout "$work/tls.key" -out "$work/tls.pem" 2>/dev/null
# Its own free session port: the default (the API's port + 1) may be taken on a busy machine, and
# then the server exits at start.
"$corral" server --listen "127.0.0.1:$tls_port" --session-listen "127.0.0.1:$(free_port)" \
  --store "sqlite:$work/tls.db" --data-dir "$work/tls" \
  --tls-cert "$work/tls.pem" --tls-key "$work/tls.key" >/dev/null 2>"$work/tls.log" &
tls_pid=$!
tls=(env CORRAL_SERVER="https://localhost:$tls_port" CORRAL_CA_CERT="$work/tls.pem")
for _ in $(seq 100); do
  kill -0 "$tls_pid" 2>/dev/null || break  # it exited: the checks below fail and name why
  [ -s "$work/tls/admin.token" ] &&
    "${tls[@]}" CORRAL_TOKEN="$(cat "$work/tls/admin.token")" CORRAL_RETRY_TIMEOUT=0.5 \
      "$corral" whoami >/dev/null 2>&1 && break
  sleep 0.1
done
kill -0 "$tls_pid" 2>/dev/null || fail "the https server exited at start: $(cat "$work/tls.log")"
tls+=(CORRAL_TOKEN="$(cat "$work/tls/admin.token" 2>/dev/null)" CORRAL_RETRY_TIMEOUT=0.5)
expect_exit 0 "^admin\$" -- "${tls[@]}" "$corral" whoami
expect_exit 0 "" -- "${tls[@]}" "$corral" jobs --limit 1000
expect_exit 1 "certificate is not trusted \(self-signed certificate\)" -- \
  "${tls[@]}" CORRAL_CA_CERT= "$corral" whoami
expect_exit 1 "certificate is not trusted \(IP address mismatch\)" -- \
  "${tls[@]}" CORRAL_SERVER="https://127.0.0.1:$tls_port" "$corral" whoami
expect_exit 1 "cannot load the CA certificates of $work/missing.pem" -- \
  "${tls[@]}" CORRAL_CA_CERT="$work/missing.pem" "$corral" whoami
kill "$tls_pid" 2>/dev/null; wait "$tls_pid" 2>/dev/null

echo "cli_test: $passed passed, $failures failed"
[ "$failures" -eq 0 ]
