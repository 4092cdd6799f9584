#!/usr/bin/env bash
# A Slurm cluster of one machine, for the Slurm executor's tests and for trying it out: munge,
# slurmctld and two slurmd nodes (n1, n2) on 127.0.0.1, each daemon on a port of its own, all
# state in one folder. Debian's packages: slurm-wlm and munge (scripts/bootstrap.sh --test).
#
#   scripts/slurm_local.sh start DIR   start it (seconds); prints the
#                                      SLURM_CONF to export for sbatch, srun, squeue, scancel
#   scripts/slurm_local.sh stop DIR    stop every daemon it started, by the pid files in DIR
#
# Each job gets whole nodes (OverSubscribe=EXCLUSIVE), as a job asking for all of a node's GPUs
# does, so two jobs at once run on n1 and n2. Runs as root (SlurmUser=root): a throwaway
# cluster, never a shared one. KillWait is Slurm's default (30 s): a cancelled job's far side
# gets that long after SIGTERM to stop its server and send back what it measured, which can
# take more than a few seconds on a busy two-core host.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { sed -n '2,10p' "$0"; exit 2; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop() {
  local f pid pids=()
  for f in "$dir"/slurmd-n1.pid "$dir"/slurmd-n2.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
    pid=$(cat "$f" 2>/dev/null) || continue  # a daemon removes its own pid file as it exits
    pids+=("$pid")
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -f "$dir"/slurmd-n1.pid "$dir"/slurmd-n2.pid "$dir"/slurmctld.pid "$dir"/munged.pid
}

start() {
  mkdir -p "$dir/state" "$dir/spool-n1" "$dir/spool-n2" "$dir/munge"
  dir=$(cd "$dir" && pwd)
  chmod 700 "$dir/munge"
  [ -f "$dir/munge/munge.key" ] || dd if=/dev/urandom bs=1 count=1024 of="$dir/munge/munge.key" 2>/dev/null
  chmod 400 "$dir/munge/munge.key"
  munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed"
  local ctl n1 n2 cpus
  ctl=$(free_port); n1=$(free_port); n2=$(free_port)
  cpus=$(nproc)
  cat > "$dir/slurm.conf" <<EOF
ClusterName=reportgen
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctl
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=60
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$n1 CPUs=$cpus State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$n2 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE
EOF
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -f "$SLURM_CONF" -i
  slurmd -f "$SLURM_CONF" -N n1
  slurmd -f "$SLURM_CONF" -N n2
  local t0=$SECONDS
  until [ "$(sinfo -h -o '%t' 2>/dev/null | sort -u | tr -d ' \n')" = "idle" ]; do
    if [ $((SECONDS - t0)) -gt 120 ]; then
      echo "slurm_local: the nodes did not come up in 120 s; see $dir/*.log" >&2
      sinfo >&2 || true
      exit 1
    fi
    sleep 1
  done
  echo "SLURM_CONF=$SLURM_CONF"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) sed -n '2,10p' "$0"; exit 2 ;;
esac
