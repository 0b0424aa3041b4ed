#!/usr/bin/env bash
# Start-up cost of the CLI, whole process (exec to exit), side by side for one or more builds:
# `corral --version`, `corral --help`, and `corral jobs` and `corral submit -- true` against one
# local `corral dev` (started from the first binary, so every client talks to the same server).
# Best and median of RUNS runs (default 100) with hyperfine (Debian package `hyperfine`).
# Usage: bench/cli_start.sh NEW_CORRAL [OLD_CORRAL ...]
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 CORRAL [CORRAL ...]" >&2; exit 2; }
command -v hyperfine >/dev/null || { echo "needs hyperfine (apt-get install hyperfine)" >&2; exit 2; }
runs=${RUNS:-100}
binaries=()
for b in "$@"; do binaries+=("$(realpath "$b")"); done
work=$(mktemp -d)
dev_pid=
cleanup() {
  [ -n "$dev_pid" ] && kill "$dev_pid" 2>/dev/null && wait "$dev_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${binaries[0]}" dev --data-dir "$work/dev" --listen "127.0.0.1:$port" >"$work/dev.log" 2>&1 &
dev_pid=$!
export CORRAL_SERVER=http://127.0.0.1:$port
for _ in $(seq 1 600); do  # until the server answers with the admin token (at most 60 s)
  if [ -s "$work/dev/admin.token" ]; then
    export CORRAL_TOKEN=$(cat "$work/dev/admin.token")
    "${binaries[0]}" jobs >/dev/null 2>&1 && break
  fi
  sleep 0.1
done
"${binaries[0]}" jobs >/dev/null || { cat "$work/dev.log" >&2; exit 1; }

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)"
for b in "${binaries[@]}"; do
  printf '%s: %s shared libraries loaded\n' "$b" "$(ldd "$b" | wc -l)"
done
printf '%-28s %-52s %9s %9s\n' command binary best median
for args in "--version" "--help" "jobs" "submit -- true"; do
  for b in "${binaries[@]}"; do
    # --version did not exist before: time what the old binary does with it (an error message).
    hyperfine -N --style none --warmup 5 --runs "$runs" -i --export-json "$work/h.json" \
      "$b $args" >/dev/null 2>&1
    python3 - "$work/h.json" "$args" "$b" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))["results"][0]
t = sorted(r["times"])
print("%-28s %-52s %7.2f ms %7.2f ms" % ("corral " + sys.argv[2], sys.argv[3], t[0] * 1e3,
                                        statistics.median(t) * 1e3))
PY
  done
done
