#!/usr/bin/env bash
# Install and start a single-node SLURM cluster on this (Debian) machine, for tests and CI.
#   sudo bash slurm/start-local-cluster.sh          # install if needed, configure, start, wait until idle
#   bash slurm/start-local-cluster.sh --check       # only report whether a cluster answers (exit 0/1)
#   sudo bash slurm/start-local-cluster.sh --stop   # stop the daemons this script started
#
# What it does (each step is skipped when already done, so running it twice is safe and fast):
#   1. apt-get install slurmctld slurmd slurm-client munge (apt-get update first if the install fails)
#   2. a munge key, and munged started as the munge user
#   3. /etc/slurm/slurm.conf for one node "localhost" (127.0.0.1) with the CPUs of this machine and
#      RealMemory a little below what `slurmd -C` detects; no cgroups (proctrack/linuxproc, task/none),
#      no accounting database (jobcomp/filetxt), a fast backfill scheduler (bf_interval=1)
#   4. slurmctld and slurmd -N localhost, then waits until the node is idle
# It needs root; without root it says so and exits 1 (the SLURM tests are then skipped).
# Logs: /var/log/slurm/{slurmctld,slurmd}.log, job completions in /var/log/slurm/jobcomp.log.
set -euo pipefail

CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
LOG_DIR=/var/log/slurm
PARTITION=${VNR_SLURM_PARTITION:-debug}

log() { echo "[start-local-cluster] $*"; }

cluster_answers() {
  command -v sinfo >/dev/null 2>&1 || return 1
  local state
  state=$(timeout 10 sinfo -h -n localhost -o %T 2>/dev/null | head -n1) || return 1
  case "$state" in
    idle* | mixed* | allocated* | completing*) return 0 ;;
    *) return 1 ;;
  esac
}

stop_daemons() {
  for name in slurmd slurmctld; do
    if pid=$(pgrep -x "$name"); then
      log "stopping $name ($pid)"
      kill $pid || true
    fi
  done
}

case "${1:-}" in
  --check)
    if cluster_answers; then log "a SLURM cluster answers"; exit 0; fi
    log "no SLURM cluster answers"; exit 1 ;;
  --stop)
    stop_daemons; exit 0 ;;
  "" ) ;;
  *) echo "usage: $0 [--check|--stop]" >&2; exit 2 ;;
esac

if cluster_answers; then
  log "SLURM is already running: $(sinfo -h -o '%P %D %T %c CPUs')"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  log "not root: cannot install or start SLURM (run as root, or the SLURM tests are skipped)"
  exit 1
fi

# 1. packages --------------------------------------------------------------------------------------
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 \
   || ! command -v sinfo >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  pkgs=(slurmctld slurmd slurm-client munge)
  log "installing ${pkgs[*]}"
  if ! apt-get install -y -q --no-install-recommends "${pkgs[@]}"; then
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${pkgs[@]}"
  fi
fi

# 2. munge -----------------------------------------------------------------------------------------
mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
if [ ! -s /etc/munge/munge.key ]; then
  log "creating a munge key"
  if command -v mungekey >/dev/null 2>&1; then
    mungekey --create --force --keyfile=/etc/munge/munge.key
  else
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
  fi
fi
chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
chmod 0700 /etc/munge /var/lib/munge /var/log/munge
chmod 0755 /run/munge
chmod 0400 /etc/munge/munge.key
if ! pgrep -x munged >/dev/null 2>&1; then
  log "starting munged"
  rm -f /run/munge/munged.pid
  if command -v runuser >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged
  else
    su -s /bin/sh munge -c /usr/sbin/munged
  fi
fi
for _ in $(seq 1 20); do
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then break; fi
  sleep 0.5
done
munge -n | unmunge >/dev/null || { log "munge does not work (see /var/log/munge/munged.log)"; exit 1; }

# 3. configuration ---------------------------------------------------------------------------------
mkdir -p "$CONF_DIR" "$LOG_DIR" /var/spool/slurmctld /var/spool/slurmd /run/slurm
CPUS=$(nproc)
DETECTED_MB=$(slurmd -C 2>/dev/null | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' | head -n1)
if [ -z "$DETECTED_MB" ]; then DETECTED_MB=$(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo); fi
# a margin below what slurmd detects, or the node is drained for "low RealMemory"
REAL_MB=$(( DETECTED_MB * 90 / 100 ))
NEW_CONF=$(cat <<EOF
# Written by slurm/start-local-cluster.sh: a single-node cluster for tests and CI.
ClusterName=vnr-local
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
JobRequeue=1
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$LOG_DIR/jobcomp.log
JobAcctGatherType=jobacct_gather/none
InactiveLimit=0
KillWait=10
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=60
MaxArraySize=10001
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$REAL_MB State=UNKNOWN
PartitionName=$PARTITION Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
)
if [ ! -f "$CONF" ] || [ "$(cat "$CONF")" != "$NEW_CONF" ]; then
  log "writing $CONF ($CPUS CPUs, RealMemory=${REAL_MB} MB)"
  printf '%s\n' "$NEW_CONF" > "$CONF"
  stop_daemons
  sleep 1
fi
# slurm-client reads the same file; Debian also looks in /etc/slurm-llnl on old releases
if [ -d /etc/slurm-llnl ] && [ ! -e /etc/slurm-llnl/slurm.conf ]; then ln -s "$CONF" /etc/slurm-llnl/slurm.conf; fi

# 4. daemons ---------------------------------------------------------------------------------------
if ! pgrep -x slurmctld >/dev/null 2>&1; then
  log "starting slurmctld"
  slurmctld
fi
for _ in $(seq 1 30); do
  if timeout 5 scontrol ping 2>/dev/null | grep -q UP; then break; fi
  sleep 0.5
done
if ! pgrep -x slurmd >/dev/null 2>&1; then
  log "starting slurmd"
  slurmd -N localhost
fi
for _ in $(seq 1 60); do
  if cluster_answers; then
    log "SLURM is up: $(sinfo -h -o '%P %D %T %c CPUs %m MB')"
    exit 0
  fi
  state=$(timeout 5 sinfo -h -n localhost -o %T 2>/dev/null | head -n1 || true)
  case "$state" in
    down* | drain* | fail*) timeout 5 scontrol update NodeName=localhost State=RESUME 2>/dev/null || true ;;
  esac
  sleep 1
done
log "SLURM did not become ready; last node state: $(timeout 5 sinfo -h -N -o '%N %T %E' 2>&1 || true)"
tail -n 20 "$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmd.log" 2>/dev/null || true
exit 1
