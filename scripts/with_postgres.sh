#!/usr/bin/env bash
# with_postgres.sh CMD [ARGS...]: runs CMD with a throwaway PostgreSQL 15 server.
#
# Starts Debian's PostgreSQL (/usr/lib/postgresql/15/bin; package `postgresql`, installed by
# scripts/bootstrap.sh) in a fresh temporary folder, listening on a free port on 127.0.0.1 with
# trust authentication, creates the database corral_test, exports
#   CORRAL_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:PORT/corral_test
# runs CMD, then stops the server and removes the folder (also on failure or Ctrl-C). Exits with
# CMD's status. As root the server runs as the `postgres` user (PostgreSQL refuses root); as
# another user it runs as that user.
#
# Example: scripts/with_postgres.sh build/src/store/store_test
# Environment: PG_BIN (default /usr/lib/postgresql/15/bin), WITH_POSTGRES_KEEP_LOG=1 prints the
# server log at the end.
set -euo pipefail

if [ $# -eq 0 ]; then
  echo "usage: $0 CMD [ARGS...]" >&2
  exit 2
fi

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
if [ ! -x "$PG_BIN/initdb" ]; then
  echo "with_postgres: $PG_BIN/initdb not found; install PostgreSQL 15 (scripts/bootstrap.sh)" >&2
  exit 2
fi

as_pg=()
if [ "$(id -u)" -eq 0 ]; then
  as_pg=(runuser -u postgres --)
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/corral-pg.XXXXXX")
data="$dir/data"
started=0

cleanup() {
  local status=$?
  if [ "$started" -eq 1 ]; then
    "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 ||
      "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  if [ "${WITH_POSTGRES_KEEP_LOG:-0}" = 1 ] && [ -f "$dir/server.log" ]; then
    cat "$dir/server.log" >&2
  fi
  rm -rf "$dir"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ ${#as_pg[@]} -gt 0 ]; then
  chown postgres: "$dir"
fi

if ! "${as_pg[@]}" "$PG_BIN/initdb" -D "$data" -U postgres -A trust -E UTF8 --no-locale \
  >"$dir/initdb.log" 2>&1; then
  echo "with_postgres: initdb failed:" >&2
  cat "$dir/initdb.log" >&2
  exit 1
fi

# A free port: pick a random one nothing listens on; retry when another process wins the race.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for attempt in 1 2 3 4 5 6 7 8; do
  port=$((20000 + RANDOM % 40000))
  port_in_use "$port" && continue
  if "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 30 \
    -o "-p $port -c listen_addresses=127.0.0.1 -k $dir" start >/dev/null 2>&1; then
    started=1
    break
  fi
  # Report the first failure that is not a lost port race.
  if ! grep -q "could not bind" "$dir/server.log" 2>/dev/null; then
    echo "with_postgres: PostgreSQL did not start:" >&2
    cat "$dir/server.log" >&2 || true
    exit 1
  fi
done
if [ "$started" -ne 1 ]; then
  echo "with_postgres: no free port found for PostgreSQL" >&2
  exit 1
fi

"$PG_BIN/createdb" -h 127.0.0.1 -p "$port" -U postgres corral_test

export CORRAL_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/corral_test"
# For tests that stop and start the server: pg_ctl -D "$CORRAL_TEST_POSTGRES_DATA" start -o
# "$CORRAL_TEST_POSTGRES_OPTIONS" (as the user that runs it: `postgres` when the caller is root).
export CORRAL_TEST_POSTGRES_DATA="$data"
export CORRAL_TEST_POSTGRES_OPTIONS="-p $port -c listen_addresses=127.0.0.1 -k $dir"
echo "with_postgres: PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$port" >&2

set +e
"$@"
status=$?
set -e
exit "$status"
