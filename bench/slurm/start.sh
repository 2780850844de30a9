#!/usr/bin/env bash
# Starts a single-host Slurm (Debian slurm-wlm: munged + slurmctld + slurmd) on
# 127.0.0.1 with its fastest settings (builtin FIFO scheduler, no scheduling
# throttles, no accounting), all state under $1. Prints the SLURM_CONF to use.
# The node advertises 64 CPUs so that many 1-CPU jobs run at once, like the rbs
# worker the benchmark compares it with.
#
#   bench/slurm/start.sh DIR [NODES [EXTRA]]
#
# NODES (default 0: the single 64-CPU node above, named after this host) starts
# that many slurmd instead, nodes n1..nNODES of 1 CPU each, all on 127.0.0.1
# with ports 6818.. (slurmd -N NAME; one NodeName line per node, each with its
# Port). EXTRA is a file of slurm.conf lines added at the end; a key it sets
# replaces every line of that key above (e.g. PartitionName= lines replace the
# default partition, SchedulerType= the scheduler). Partitions can name their
# nodes Nodes=ALL.
set -euo pipefail
run=${1:?state directory}
nodes=${2:-0}
extra=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$run"
mkdir -p "$run"/{etc,munge,log,ctld,spool,pid,work}
chmod 0755 "$run" "$run/munge"
host=$(hostname -s)
py=$(command -v python3)

dd if=/dev/urandom of="$run/munge/munge.key" bs=1 count=1024 status=none
chmod 0400 "$run/munge/munge.key"
setsid nohup "$py" "$here/reaper.py" /usr/sbin/munged --force --foreground \
  --key-file="$run/munge/munge.key" --socket="$run/munge/munge.socket.2" \
  --pid-file="$run/pid/munged.pid" --log-file="$run/log/munged.log" \
  --seed-file="$run/munge/munged.seed" --num-threads=10 >"$run/log/munged.out" 2>&1 &
echo $! > "$run/pid/reaper-munged.pid"
for _ in $(seq 50); do [ -S "$run/munge/munge.socket.2" ] && break; sleep 0.1; done

cat > "$run/etc/slurm.conf" <<CONF
ClusterName=rbsbench
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$run/munge/munge.socket.2
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$run/ctld
SlurmdSpoolDir=$run/spool/%n
SlurmctldPidFile=$run/pid/slurmctld.pid
SlurmdPidFile=$run/pid/slurmd$([ "$nodes" = 0 ] || echo '-%n').pid
SlurmctldLogFile=$run/log/slurmctld.log
SlurmdLogFile=$run/log/slurmd$([ "$nodes" = 0 ] || echo '-%n').log
PlugStackConfig=$run/etc/plugstack.conf
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SlurmdParameters=config_overrides
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=256
MaxJobCount=100000
$(if [ "$nodes" = 0 ]; then
  echo "NodeName=$host NodeAddr=127.0.0.1 CPUs=64 RealMemory=22000 State=UNKNOWN"
  echo "PartitionName=batch Nodes=$host Default=YES MaxTime=INFINITE State=UP"
else
  for i in $(seq "$nodes"); do
    echo "NodeName=n$i NodeHostname=$host NodeAddr=127.0.0.1 Port=$((6817 + i)) CPUs=1 RealMemory=2000 State=UNKNOWN"
  done
  echo "PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
fi)
SlurmctldDebug=error
SlurmdDebug=error
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=2
SchedulerType=sched/builtin
SchedulerParameters=default_queue_depth=1000,sched_min_interval=0,batch_sched_delay=0
CONF
if [ -n "$extra" ]; then
  keys=$(sed -n 's/^[[:space:]]*\([A-Za-z]*\)=.*/\1/p' "$extra" | sort -u)
  for k in $keys; do sed -i "/^$k=/d" "$run/etc/slurm.conf"; done
  cat "$extra" >> "$run/etc/slurm.conf"
fi
: > "$run/etc/plugstack.conf"
export SLURM_CONF=$run/etc/slurm.conf
ulimit -n 65536 2>/dev/null || true
setsid nohup "$py" "$here/reaper.py" /usr/sbin/slurmctld -D -i -f "$SLURM_CONF" >"$run/log/slurmctld.out" 2>&1 &
echo $! > "$run/pid/reaper-slurmctld.pid"
for _ in $(seq 100); do scontrol ping >/dev/null 2>&1 && break; sleep 0.1; done
if [ "$nodes" = 0 ]; then
  setsid nohup "$py" "$here/reaper.py" /usr/sbin/slurmd -D -f "$SLURM_CONF" >"$run/log/slurmd.out" 2>&1 &
  echo $! > "$run/pid/reaper-slurmd.pid"
else
  for i in $(seq "$nodes"); do
    setsid nohup "$py" "$here/reaper.py" /usr/sbin/slurmd -D -N "n$i" -f "$SLURM_CONF" >"$run/log/slurmd-n$i.out" 2>&1 &
    echo $! > "$run/pid/reaper-slurmd-n$i.pid"
  done
fi
want=$([ "$nodes" = 0 ] && echo 1 || echo "$nodes")
for _ in $(seq 150); do
  [ "$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u | grep -c ' idle$')" -ge "$want" ] && break
  sleep 0.2
done
echo "$SLURM_CONF"
