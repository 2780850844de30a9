#!/usr/bin/env bash
# Stops the Slurm started by start.sh in state directory $1.
run=${1:?state directory}
export SLURM_CONF=$run/etc/slurm.conf
scancel --full --quiet 2>/dev/null
for f in slurmd slurmctld reaper-slurmd reaper-slurmctld munged reaper-munged; do
  pid=$(cat "$run/pid/$f.pid" 2>/dev/null) || continue
  kill -TERM "$pid" 2>/dev/null || continue
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
done
exit 0
