#!/usr/bin/env bash
# Stops the Slurm started by start.sh in state directory $1 (its one slurmd or
# its NODES slurmd).
run=${1:?state directory}
export SLURM_CONF=$run/etc/slurm.conf
# (Without its slurm.conf, squeue would look for a cluster in DNS and hang.)
if [ -f "$SLURM_CONF" ] && [ -f "$run/pid/slurmctld.pid" ]; then
  ids=$(timeout 10 squeue -h -o %i 2>/dev/null)
  [ -z "$ids" ] || timeout 10 scancel --quiet $ids 2>/dev/null
  # Let the jobs end while their slurmd still runs (a slurmstepd left behind
  # outlives its reaper).
  for _ in $(seq 100); do [ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.1; done
fi
stop() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
}
for f in "$run"/pid/slurmd*.pid "$run"/pid/reaper-slurmd*.pid; do stop "$f"; done
for f in slurmctld reaper-slurmctld munged reaper-munged; do stop "$run/pid/$f.pid"; done
exit 0
