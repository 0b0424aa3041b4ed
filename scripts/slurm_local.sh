#!/usr/bin/env bash
# slurm_local.sh: a throwaway one-node Slurm on this machine, for comparisons with corral
# (bench/throughput_bench.py --parts listing times `squeue` against `corral jobs`).
#
#   scripts/slurm_local.sh start DIR   start munged, slurmctld and slurmd with everything (keys,
#                                      sockets, state, logs, slurm.conf) under DIR (created,
#                                      must be empty or absent); prints `export SLURM_CONF=...`
#                                      and waits until the node is idle
#   scripts/slurm_local.sh stop DIR    stop what `start DIR` started (by its pid files)
#   scripts/slurm_local.sh run CMD...  start in a temporary folder, run CMD with SLURM_CONF
#                                      exported, stop and remove the folder (also on failure or
#                                      Ctrl-C); exits with CMD's status
#
# Needs Debian's slurm-wlm and munge (`apt-get install slurm-wlm munge`) and root (slurmd runs
# jobs as their users). Nothing outside DIR is touched: munged gets its own key and socket
# (slurm.conf's AuthInfo points Slurm at it), the daemons run in the foreground under this
# script's control with free ports, no systemd. One node named after this host, with this
# machine's CPUs and 1 GiB of memory, in partition `bench`; no accounting, no cgroups
# (proctrack/linuxproc, task/none): enough to queue, list and run small jobs.
#
# Environment: SLURM_SBIN (default /usr/sbin), MUNGE_SBIN (default /usr/sbin).
set -euo pipefail

SLURM_SBIN=${SLURM_SBIN:-/usr/sbin}
MUNGE_SBIN=${MUNGE_SBIN:-/usr/sbin}

die() {
  echo "slurm_local: $*" >&2
  exit 1
}

# A free TCP port on 127.0.0.1 (nothing listens on it now).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits up to $2 seconds for command $1 (a string, eval'ed) to succeed.
wait_until() {
  local what=$1 timeout=$2 i
  for ((i = 0; i < timeout * 10; i++)); do
    if eval "$what" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  return 1
}

stop_pidfile() {
  local file=$1 pid i
  [ -f "$file" ] || return 0
  pid=$(cat "$file" 2>/dev/null || true)
  rm -f "$file"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
}

cmd_stop() {
  local dir=$1
  # slurmd before slurmctld, munged last (both daemons authenticate through it).
  stop_pidfile "$dir/slurmd.pid"
  stop_pidfile "$dir/slurmctld.pid"
  stop_pidfile "$dir/munged.pid"
}

cmd_start() {
  local dir=$1
  [ "$(id -u)" -eq 0 ] || die "must run as root (slurmd runs jobs as their users)"
  for bin in "$SLURM_SBIN/slurmctld" "$SLURM_SBIN/slurmd" "$MUNGE_SBIN/munged"; do
    [ -x "$bin" ] || die "$bin not found: apt-get install slurm-wlm munge"
  done
  command -v squeue >/dev/null || die "squeue not on PATH: apt-get install slurm-client"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [ -z "$(ls -A "$dir")" ] || die "$dir is not empty"
  mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
  chmod 700 "$dir/munge"

  # munge: a key of our own, its socket and state in DIR; --force because we are root.
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  "$MUNGE_SBIN/munged" --force --key-file="$dir/munge/munge.key" \
    --socket="$dir/munge/munge.socket" --pid-file="$dir/munged.pid" \
    --log-file="$dir/munged.log" --seed-file="$dir/munge/munge.seed" ||
    die "munged did not start: $(tail -5 "$dir/munged.log" 2>/dev/null)"
  if ! wait_until "[ -S '$dir/munge/munge.socket' ]" 10; then
    cmd_stop "$dir"
    die "munged made no socket: $(tail -5 "$dir/munged.log" 2>/dev/null)"
  fi

  local host cpus ctld_port slurmd_port
  host=$(hostname -s)
  cpus=$(nproc)
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm_local.sh: a throwaway one-node cluster.
ClusterName=corralbench
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
MaxJobCount=200000
MaxArraySize=100001
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1024 State=UNKNOWN
PartitionName=bench Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$dir/slurm.conf"
  # -i: ignore state files (there are none); -D: foreground, so that the pid is ours to stop.
  "$SLURM_SBIN/slurmctld" -D -i -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 &
  echo $! >"$dir/slurmctld.pid"
  "$SLURM_SBIN/slurmd" -D -f "$SLURM_CONF" -N "$host" >"$dir/slurmd.out" 2>&1 &
  echo $! >"$dir/slurmd.pid"
  if ! wait_until "scontrol ping | grep -q UP" 30; then
    cmd_stop "$dir"
    die "slurmctld did not answer: $(tail -5 "$dir/slurmctld.log" "$dir/slurmctld.out" 2>/dev/null)"
  fi
  if ! wait_until "sinfo -h -N -o %t | grep -qx idle" 30; then
    local state
    state=$(sinfo -h -N -o '%t %E' 2>&1 || true)
    cmd_stop "$dir"
    die "the node did not become idle ($state): $(tail -5 "$dir/slurmd.log" "$dir/slurmd.out" 2>/dev/null)"
  fi
  echo "export SLURM_CONF=$SLURM_CONF"
}

RUN_DIR=""
cmd_run() {
  local status
  RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/corral-slurm.XXXXXX")
  # The daemons' pid files live in the folder: stop them before it goes.
  trap 'cmd_stop "$RUN_DIR"; rm -rf "$RUN_DIR"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  cmd_start "$RUN_DIR" >/dev/null
  export SLURM_CONF="$RUN_DIR/slurm.conf"
  echo "slurm_local: slurmctld and slurmd up, SLURM_CONF=$SLURM_CONF" >&2
  set +e
  "$@"
  status=$?
  set -e
  return "$status"
}

case "${1:-}" in
  start) [ $# -eq 2 ] || die "usage: $0 start DIR"; cmd_start "$2" ;;
  stop) [ $# -eq 2 ] || die "usage: $0 stop DIR"; cmd_stop "$2" ;;
  run) shift; [ $# -ge 1 ] || die "usage: $0 run CMD [ARGS...]"; cmd_run "$@" ;;
  *) die "usage: $0 start DIR | stop DIR | run CMD [ARGS...]" ;;
esac
