#!/usr/bin/env bash
# Benchmarks preemption: the time from a high-priority job's submission to its
# start on a cluster whose every node runs a preemptible low-priority job,
# rbs against Slurm (Debian slurm-wlm) in the same run, driving both through
# their command lines.
#
# The clusters: rbs is `rbs remote serve --preempt-grace 1s` and 8 `rbs remote
# worker` processes (w1..w8, --cpus 1 --job-slots 1); Slurm is slurmctld and 8
# slurmd (slurmd -N n1..n8, CPUs=1 each, on 127.0.0.1, ports 6818-6825;
# bench/slurm/start.sh DIR 8) with PreemptType=preempt/partition_prio,
# PreemptMode=REQUEUE, KillWait=1 and two partitions over all nodes: low
# (PriorityTier=1, PreemptMode=REQUEUE, the default) and high (PriorityTier=2,
# PreemptMode=OFF); the rest is start.sh's (sched/builtin, no throttles). Both
# sides thus stop a victim the same way: SIGTERM, at most 1 s, SIGKILL, and
# it goes back to PENDING. Each round, on each side:
#   1. 8 long low-priority jobs fill the 8 nodes: rbs `job submit
#      --preemptible`, Slurm `sbatch -p low`; each is `sh -c` running `sleep
#      3600` and waiting for it, and on SIGTERM stamps the time and exits 0;
#   2. once all 8 run (each has set its trap), and 0.5 s more, one job
#      needing a whole node (1 CPU) is submitted: rbs `--priority 100 --cpus
#      1`, Slurm `-p high`; it stamps its start and sleeps 1 s;
#   3. everything is cancelled, untimed.
# Measured, alternating which side goes first each round:
#   (a) from `submit` returning until the job's state is RUNNING, polled with
#       `rbs job show --json ID` / `squeue -h -j ID -o %T` every POLL (20 ms)
#       plus the poll's own run time: the resolution is one poll period,
#       which the script prints for each side;
#   (b) from `submit` returning until the job's own start stamp;
#   (c) from calling `submit` until the victim's SIGTERM stamp (the
#       scheduler's decision to preempt, with the submission itself: rbs
#       decides in the round that accepts the job, and the SIGTERM comes
#       about when `submit` returns), and (d) from there to the start stamp:
#       the victim's stop and the start in its place.
# Each round checks that exactly one low job was preempted and is PENDING
# again. Prints medians of ROUNDS rounds and Slurm/rbs (above 1: rbs is
# faster). Needs slurm-wlm (apt-get install -y slurm-wlm) and root. RBS=BINARY
# uses a built rbs instead of building this tree.
#
# Tried and not used: Slurm's GraceTime=1 on the low partition (the analogue
# of --preempt-grace 1s). With it, the preemption SIGTERM goes only to the
# job's steps, not to a batch script that has none, and the script is
# signalled when its grace ends, which slurmctld acts on in its periodic
# time-limit check (every 30 s; seen in its log at debug2): the preemptor
# started 20-26 s after its submission (3 tries). With GraceTime=0 a victim is requeued at once (SIGTERM,
# KillWait=1, SIGKILL), the same sequence as rbs's with a 1 s grace.
#
#   bench/preempt-vs-slurm.sh [ROUNDS]     (default 9)
#
# Figures (rbs at 28ecdbe, a shared 2-core machine, Slurm 22.05 as above;
# `bench/preempt-vs-slurm.sh`: 9 rounds; medians; the whole run took 33 s):
#   (a) submit -> RUNNING (polled)              rbs 0.015 s  Slurm 0.409 s  27.27x
#   (b) submit -> started (its own clock)       rbs 0.017 s  Slurm 0.411 s  24.18x
#   (c) submit called -> the victim's SIGTERM   rbs 0.015 s  Slurm 0.377 s  25.13x
#   (d) the victim's SIGTERM -> started         rbs 0.018 s  Slurm 0.039 s   2.17x
#   the submit call itself                      rbs 0.016 s  Slurm 0.007 s
#   poll period                                 rbs 15.0 ms  Slurm 27.4 ms
# (rounds, (b): rbs 0.013-0.021 s; Slurm 0.387-0.451 s). rbs's job was
# RUNNING at the first poll in every round, so its (a) is the time of one
# `rbs job show`, an upper bound; (b) is the better figure. rbs's victim got
# its SIGTERM within 2 ms of `submit` returning, before or after, so its (c)
# is the submit call itself; Slurm's about 0.37 s after `sbatch` returned.
set -euo pipefail
ROUNDS=${1:-9}
POLL=${POLL:-0.02}
NODES=8
source "$(dirname "$0")/nodes.sh"

# ---- the two clusters ----
start_rbs --preempt-grace 1s

cat > "$work/slurm-extra.conf" <<'CONF'
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
KillWait=1
PartitionName=low Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE
PartitionName=high Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF
CONF
start_slurm "$work/slurm-extra.conf"
mkdir -p "$work/out"

count_rbs() { "$rbs" job list --state "$1" | tail -n +2 | grep -c . || true; }
count_slurm() { squeue -h -t "$([ "$1" = RUNNING ] && echo R || echo PD)" -o %i | grep -c . || true; }

# One round on one side: prints "a b c d submit polls period" (seconds; a poll
# count; milliseconds).
preempt_round() {
  local sys=$1 r=$2 k cmd id t0 t1 t2 n=0 deadline ids=() started term pend
  local dir=$work/out/$sys-$r
  mkdir -p "$dir"
  for k in $(seq "$NODES"); do
    cmd="trap 'date +%s.%N > $dir/term.$k; exit 0' TERM; sleep 3600 & : > $dir/ready.$k; wait"
    if [ "$sys" = rbs ]; then
      ids+=($("$rbs" job submit --parsable --preemptible -- sh -c "$cmd"))
    else
      ids+=($(sbatch --parsable -p low -o /dev/null -e /dev/null --wrap "$cmd"))
    fi
  done
  for _ in $(seq 600); do
    [ "$("count_$sys" RUNNING)" -ge "$NODES" ] && [ "$(ls "$dir" | grep -c '^ready\.')" -ge "$NODES" ] && break; sleep 0.05
  done
  [ "$(ls "$dir" | grep -c '^ready\.')" -ge "$NODES" ] || { echo "$sys: the $NODES low jobs did not all start" >&2; exit 1; }
  sleep 0.5
  if [ "$sys" = rbs ]; then
    t0=$EPOCHREALTIME
    id=$("$rbs" job submit --parsable --priority 100 --cpus 1 -- sh -c "date +%s.%N > $dir/start; sleep 1")
    t1=$EPOCHREALTIME
    deadline=$(( ${t1%.*} + 120 ))
    until [[ $("$rbs" job show --json "$id") == *'"state": "RUNNING"'* ]]; do
      n=$((n + 1)); sleep "$POLL"
      [ "${EPOCHREALTIME%.*}" -lt "$deadline" ] || { echo "rbs job $id did not start" >&2; "$rbs" job show "$id" >&2; exit 1; }
    done
  else
    t0=$EPOCHREALTIME
    id=$(sbatch --parsable -p high -o "$dir/high.out" -e "$dir/high.out" --wrap "date +%s.%N > $dir/start; sleep 1")
    t1=$EPOCHREALTIME
    deadline=$(( ${t1%.*} + 120 ))
    until [ "$(squeue -h -j "$id" -o %T)" = RUNNING ]; do
      n=$((n + 1)); sleep "$POLL"
      [ "${EPOCHREALTIME%.*}" -lt "$deadline" ] || { echo "Slurm job $id did not start" >&2; squeue >&2; exit 1; }
    done
  fi
  t2=$EPOCHREALTIME
  for _ in $(seq 600); do [ -s "$dir/start" ] && break; sleep 0.05; done
  [ -s "$dir/start" ] || { echo "$sys job $id: no start stamp" >&2; exit 1; }
  started=$(cat "$dir/start")
  [ "$(ls "$dir" | grep -c '^term\.')" = 1 ] || { echo "$sys: $(ls "$dir" | grep -c '^term\.') low jobs got SIGTERM, not 1" >&2; exit 1; }
  term=$(cat "$dir"/term.*)
  pend=$("count_$sys" PENDING)
  [ "$pend" = 1 ] || { echo "$sys: $pend jobs pending after the preemption, not 1 (the victim)" >&2; exit 1; }
  # Untimed: cancel everything, wait until idle.
  if [ "$sys" = rbs ]; then
    "$rbs" job cancel "${ids[@]}" "$id" >/dev/null 2>&1 || true
    for _ in $(seq 600); do [ -z "$("$rbs" job list --state PENDING,RUNNING | tail -n +2)" ] && break; sleep 0.05; done
  else
    scancel --quiet "${ids[@]}" "$id" 2>/dev/null || true
    for _ in $(seq 600); do [ -z "$(squeue -h -o %i)" ] && break; sleep 0.05; done
  fi
  echo "$(sub "$t2" "$t1") $(sub "$started" "$t1") $(sub "$term" "$t0") $(sub "$started" "$term") $(sub "$t1" "$t0") $n $(sub "$t2" "$t1" | awk -v n="$n" '{printf "%.1f", 1000 * $1 / (n + 1)}')"
}

echo "$NODES nodes of 1 CPU, each running a preemptible low-priority job; then one job of higher priority needing a node"
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order="rbs slurm"; else order="slurm rbs"; fi
  for sys in $order; do
    preempt_round "$sys" "$r" > "$work/round"
    read -r a b c d sb n per < "$work/round"
    echo "$a" >> "$work/a_$sys"; echo "$b" >> "$work/b_$sys"; echo "$c" >> "$work/c_$sys"
    echo "$d" >> "$work/d_$sys"; echo "$sb" >> "$work/s_$sys"; echo "$per" >> "$work/poll_$sys"
    printf '  round %d %-5s: submit %s s; then RUNNING after %s s (%d polls, %s ms each), started after %s s; SIGTERM %s s after the submit call, start %s s after it\n' \
      "$r" "$sys" "$sb" "$a" "$n" "$per" "$b" "$c" "$d"
  done
done

echo
echo "a preemptor on $NODES nodes full of preemptible jobs; median of $ROUNDS rounds (seconds)"
printf '%-46s %8s %8s %10s\n' "measurement" "rbs" "Slurm" "Slurm/rbs"
row "(a) submit -> RUNNING (polled)" a
row "(b) submit -> started (its own clock)" b
row "(c) submit called -> the victim's SIGTERM" c
row "(d) the victim's SIGTERM -> started" d
row "    the submit call itself" s -
row "    poll period (ms): the resolution of (a)" poll -
