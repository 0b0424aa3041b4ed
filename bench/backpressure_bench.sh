#!/usr/bin/env bash
# Back-pressure (docs/control-plane.md, "Back-pressure"): wrk against one idle `corral server`
# (SQLite) per setting of --max-requests-in-flight, side by side, so that the guard's cost when
# the server is not saturated, and what it does when it is, read off one table. Each row: a fresh
# server, `wrk -t2 -cCONNS -dDURATION` on PATH with the admin token, requests/s, latency
# p50/p99/max, non-2xx answers (the guard's 503s) and socket errors/timeouts.
# Usage: bench/backpressure_bench.sh CORRAL [CAP ...]   (CAP 0: no guard; default: 0 64)
# Environment: CONNS (64), DURATION (10s), PATHS ("/api/v1/jobs /api/v1/whoami"), ROUNDS (1: each
# setting once per round, the settings interleaved, so that a noisy machine hits both alike).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 CORRAL [CAP ...]" >&2; exit 2; }
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 2; }
corral=$(realpath "$1")
shift
caps=("$@")
[ ${#caps[@]} -gt 0 ] || caps=(0 64)
conns=${CONNS:-64}
duration=${DURATION:-10s}
paths=${PATHS:-/api/v1/jobs /api/v1/whoami}
rounds=${ROUNDS:-1}
work=$(mktemp -d)
server_pid=
stop_server() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  server_pid=
}
trap 'stop_server; rm -rf "$work"' EXIT
# wrk's own summary, with every percentile asked for and the non-2xx count.
cat >"$work/report.lua" <<'LUA'
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %.0f %.2f %.2f %.2f %d %d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000, e.status,
    e.connect + e.read + e.write + e.timeout))
end
LUA

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); wrk -t2 -c$conns -d$duration"
printf '%-8s %-16s %10s %9s %9s %9s %8s %7s\n' cap path "req/s" "p50 ms" "p99 ms" "max ms" non-2xx errors
for round in $(seq 1 "$rounds"); do
  for cap in "${caps[@]}"; do
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    rm -rf "$work/data" "$work/corral.db"*
    "$corral" server --listen "127.0.0.1:$port" --store "sqlite:$work/corral.db" \
      --data-dir "$work/data" --max-requests-in-flight "$cap" >"$work/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 200); do
      curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && [ -s "$work/data/admin.token" ] && break
      sleep 0.1
    done
    token=$(cat "$work/data/admin.token")
    for path in $paths; do
      line=$(wrk -t2 -c"$conns" -d"$duration" --timeout 5s -s "$work/report.lua" \
        -H "Authorization: Bearer $token" "http://127.0.0.1:$port$path" | grep '^RESULT')
      read -r _ rps p50 p99 max non2xx errors <<<"$line"
      printf '%-8s %-16s %10s %9s %9s %9s %8s %7s\n' "$cap" "$path" "$rps" "$p50" "$p99" "$max" \
        "$non2xx" "$errors"
    done
    stop_server
  done
done
