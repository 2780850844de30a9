#!/usr/bin/env bash
# Benchmarks placing a gang on a busy cluster: the time from a 4-node job's
# submission to its start on 4 nodes while 8 nodes of 1 CPU each are kept busy
# by a stream of short jobs, rbs against Slurm (Debian slurm-wlm) in the same
# run, driving both through their command lines.
#
# The clusters: rbs is `rbs remote serve` and 8 `rbs remote worker` processes
# (w1..w8, --cpus 1 --job-slots 1); Slurm is slurmctld and 8 slurmd (slurmd -N
# n1..n8, CPUs=1 each, all on 127.0.0.1, ports 6818-6825; bench/slurm/start.sh
# DIR 8). Each round, on each side:
#   1. JOBS short jobs are submitted (default 64, one CLI call each): `sleep D`
#      with D cycling 0.3, 0.4, 0.5, 0.6, 0.7 s (so that they end out of step),
#      each with a 1-minute time limit (rbs --time 1m, sbatch -t 1), priority
#      0 (Slurm: its default, FIFO);
#   2. once all 8 nodes run one, a further 1-1.5 s (the same each round on
#      both sides) lets the stream settle; the queue is then far from empty
#      (each round prints how many were still queued);
#   3. the gang is submitted, of the highest priority: rbs `job submit --nodes
#      4 --priority 100`, Slurm `sbatch -N 4 --priority=TOP` (as root; the
#      short jobs' priorities are 0 in rbs and Slurm's falling FIFO values);
#      its command stamps the time on each of its 4 nodes (rbs: each rank;
#      Slurm: `srun` in the batch script, one task per node), then sleeps 1 s;
#   4. the remaining short jobs are cancelled, untimed.
# Measured, alternating which side goes first each round:
#   (a) from `submit` returning until the job's state is RUNNING, polled with
#       `rbs job show --json ID` / `squeue -h -j ID -o %T` every POLL (20 ms)
#       plus the poll's own run time: the resolution is one poll period, which
#       the script prints for each side;
#   (b) from `submit` returning until the last of the 4 nodes' stamps (the
#       command running on all 4; for Slurm this includes srun's step launch);
#   (c), (d): (a) and (b) less the round's floor, the least any scheduler that
#       does not preempt could do: when 4 nodes would have been free had
#       nothing started after the submission. The short jobs stamp their own
#       start and end; those running (by the scheduler's list, taken just
#       before the submission) end at their end stamps, idle nodes are free at
#       once. The floor differs between the sides as their streams differ.
# The schedulers: rbs schedules in priority order with EASY backfill (the top
# job that cannot start reserves the workers that free first by the time
# limits, and nothing that would delay it starts there). Slurm runs
# sched/backfill (bf_interval=1, bf_resolution=1, with start.sh's
# no-throttle settings; priority/basic), which by its documentation starts a
# lower-priority job only where it does not delay the expected start of a
# higher one; under it the gang waited for nodes (see (c)).
# SLURM_SCHED=builtin runs start.sh's sched/builtin instead: with it Slurm
# 22.05 went on starting the 1-node jobs, 8 at a time, while the gang waited
# with pending reason Priority (with --priority=TOP, and with --nice=-1000
# alike) until the queue had drained: (a) 6.7 s, median of a 3-round run,
# against rbs's 0.27 s; so that is not the comparison made.
# Prints medians of ROUNDS rounds and Slurm/rbs (above 1: rbs is faster).
# Needs slurm-wlm (apt-get install -y slurm-wlm) and root. RBS=BINARY uses a
# built rbs instead of building this tree.
#
#   bench/gang-vs-slurm.sh [ROUNDS] [JOBS]     (default 9 64)
#
# Figures (rbs at 28ecdbe, a shared 2-core machine, Slurm 22.05 sched/backfill
# as above; `bench/gang-vs-slurm.sh`: 9 rounds of 64 short jobs; medians; the
# whole run took 61 s):
#   (a) submit -> RUNNING (polled)                rbs 0.222 s  Slurm 0.827 s  3.73x
#   (b) submit -> command started on all 4 nodes  rbs 0.241 s  Slurm 0.902 s  3.74x
#   (c) (a) less the floor                        rbs 0.031 s  Slurm 0.461 s  14.87x
#   (d) (b) less the floor                        rbs 0.029 s  Slurm 0.559 s  19.28x
#   the floor                                     rbs 0.170 s  Slurm 0.322 s
#   poll period                                   rbs 33.8 ms  Slurm 30.0 ms
# (rounds, (a): rbs 0.20, 0.31, 0.17, 0.21, 0.27, 0.33, 0.22, 0.20, 0.24 s;
# Slurm 0.83, 0.41, 0.99, 0.78, 0.63, 0.94, 0.83, 0.58, 0.92 s). At the gang's
# submission 22-32 short jobs were still queued on rbs, 40-48 on Slurm: Slurm
# ran fewer in the same time, so its nodes spent more of it idle between
# jobs, and the floors differ. rbs's (c) and (d) are about one
# poll period, the resolution; in two rounds of 9 it started 0.20-0.22 s
# after its floor (0.31 s against 0.09 s, 0.33 s against 0.12 s). The floor
# takes whichever 4 nodes free first; rbs's reservation holds particular
# workers, those whose jobs end first by their time limits (here: the jobs
# started first), and the jobs started first are not always the first to end.
set -euo pipefail
ROUNDS=${1:-9}
JOBS=${2:-64}
POLL=${POLL:-0.02}
NODES=8
GANG=4
source "$(dirname "$0")/nodes.sh"

# ---- the two clusters ----
start_rbs

sched=${SLURM_SCHED:-backfill}
if [ "$sched" = backfill ]; then
  cat > "$work/slurm-extra.conf" <<'CONF'
SchedulerType=sched/backfill
SchedulerParameters=default_queue_depth=1000,sched_min_interval=0,batch_sched_delay=0,bf_interval=1,bf_resolution=1
CONF
else
  : > "$work/slurm-extra.conf"
fi
start_slurm "$work/slurm-extra.conf"
mkdir -p "$work/out"

ids_running_rbs() { "$rbs" job list --state RUNNING | awk 'NR > 1 {print $1}'; }
ids_running_slurm() { squeue -h -t R -o %i; }
running_rbs() { ids_running_rbs | grep -c . || true; }
pending_rbs() { "$rbs" job list --state PENDING | tail -n +2 | grep -c . || true; }
running_slurm() { squeue -h -t R -o %i | grep -c . || true; }
pending_slurm() { squeue -h -t PD -o %i | grep -c . || true; }

# One round on one side: prints "a b polls queued" (seconds, seconds, count, count).
gang_round() {
  local sys=$1 r=$2 settle=$3 k d cmd id t1 t2 n=0 deadline s ids=() last floor
  local dir=$work/out/$sys-$r
  local -A idx=()
  mkdir -p "$dir"
  for k in $(seq 0 $((JOBS - 1))); do
    d=0.$((3 + k % 5))
    cmd="date +%s.%N > $dir/j$k; sleep $d; date +%s.%N >> $dir/j$k"
    if [ "$sys" = rbs ]; then
      ids+=($("$rbs" job submit --parsable --time 1m -- sh -c "$cmd"))
    else
      ids+=($(sbatch --parsable -t 1 -o /dev/null -e /dev/null --wrap "$cmd"))
    fi
    idx[${ids[-1]}]=$k
  done
  for _ in $(seq 600); do [ "$("running_$sys")" -ge "$NODES" ] && break; sleep 0.05; done
  sleep "$settle"
  local queued busy
  queued=$("pending_$sys")
  busy=$("ids_running_$sys")
  if [ "$sys" = rbs ]; then
    id=$("$rbs" job submit --parsable --nodes "$GANG" --priority 100 --time 1m -- \
      sh -c "date +%s.%N > $dir/stamp.\$RBS_NODE_RANK; sleep 1")
    t1=$EPOCHREALTIME
    deadline=$(( ${t1%.*} + 120 ))
    until [[ $("$rbs" job show --json "$id") == *'"state": "RUNNING"'* ]]; do
      n=$((n + 1)); sleep "$POLL"
      [ "${EPOCHREALTIME%.*}" -lt "$deadline" ] || { echo "rbs gang $id did not start" >&2; "$rbs" job show "$id" >&2; exit 1; }
    done
    t2=$EPOCHREALTIME
    s=$("$rbs" job show --json "$id" | tr -d ' \n' | sed -n 's/.*"workers":\[\([^]]*\)\].*/\1/p' | tr ',' '\n' | sort -u | grep -c .)
  else
    id=$(sbatch --parsable -N "$GANG" --priority=TOP -t 1 -o "$dir/gang.out" -e "$dir/gang.out" \
      --wrap "srun sh -c 'date +%s.%N > $dir/stamp.\$SLURM_PROCID'; sleep 1")
    t1=$EPOCHREALTIME
    deadline=$(( ${t1%.*} + 120 ))
    until [ "$(squeue -h -j "$id" -o %T)" = RUNNING ]; do
      n=$((n + 1)); sleep "$POLL"
      [ "${EPOCHREALTIME%.*}" -lt "$deadline" ] || { echo "Slurm gang $id did not start" >&2; squeue >&2; exit 1; }
    done
    t2=$EPOCHREALTIME
    s=$(squeue -h -j "$id" -o %D)
  fi
  [ "$s" = "$GANG" ] || { echo "$sys gang $id runs on $s nodes, not $GANG" >&2; exit 1; }
  for _ in $(seq 600); do [ "$(ls "$dir" | grep -c '^stamp\.')" -ge "$GANG" ] && break; sleep 0.05; done
  [ "$(ls "$dir" | grep -c '^stamp\.')" -ge "$GANG" ] || { echo "$sys gang $id: not all $GANG nodes started" >&2; cat "$dir/gang.out" >&2 2>/dev/null; exit 1; }
  last=$(cat "$dir"/stamp.* | sort -n | tail -1)
  # The floor: when GANG nodes would have been free had nothing started after
  # the submission: the short jobs that the scheduler ran just before it
  # (listed then, untimed) end by their own clocks (end stamp; none: they ran
  # until cancelled), and nodes idle then count as free at once.
  floor=$(for b in $busy; do
      k=${idx[$b]:-none}
      { sed -n 2p "$dir/j$k" 2>/dev/null || true; } | awk -v t="$t1" '{e = $1} END {printf "%.3f\n", e == "" ? 999 : (e > t ? e - t : 0)}'
    done | sort -n | awk -v n="$NODES" -v g="$GANG" '{v[NR]=$1} END{idle=n-NR; print (g <= idle ? "0.000" : v[g-idle])}')
  # Untimed: cancel the rest of the stream and the gang, wait until idle.
  if [ "$sys" = rbs ]; then
    "$rbs" job cancel "${ids[@]}" "$id" >/dev/null 2>&1 || true
    for _ in $(seq 600); do [ -z "$("$rbs" job list --state PENDING,RUNNING | tail -n +2)" ] && break; sleep 0.05; done
  else
    scancel --quiet "${ids[@]}" "$id" 2>/dev/null || true
    for _ in $(seq 600); do [ -z "$(squeue -h -o %i)" ] && break; sleep 0.05; done
  fi
  echo "$(sub "$t2" "$t1") $(sub "$last" "$t1") $n $queued $(sub "$t2" "$t1" | awk -v n="$n" '{printf "%.1f", 1000 * $1 / (n + 1)}') $floor"
}

echo "$NODES nodes of 1 CPU; $JOBS short jobs (0.3-0.7 s) per round, then a $GANG-node gang of top priority; Slurm sched/$sched"
for r in $(seq "$ROUNDS"); do
  settle=$(awk -v r="$r" 'BEGIN{printf "%.2f", 1 + (r * 0.17) - int(r * 0.17 / 0.5) * 0.5}')
  if [ $((r % 2)) = 1 ]; then order="rbs slurm"; else order="slurm rbs"; fi
  for sys in $order; do
    gang_round "$sys" "$r" "$settle" > "$work/round"
    read -r a b n q per fl < "$work/round"
    echo "$a" >> "$work/a_$sys"; echo "$b" >> "$work/b_$sys"; echo "$per" >> "$work/poll_$sys"
    echo "$fl" >> "$work/floor_$sys"; sub "$a" "$fl" >> "$work/over_$sys"; sub "$b" "$fl" >> "$work/overb_$sys"
    printf '  round %d %-5s: RUNNING after %s s (%d polls, %s ms each), on all %d nodes after %s s; floor %s s; %d short jobs were queued\n' \
      "$r" "$sys" "$a" "$n" "$per" "$GANG" "$b" "$fl" "$q"
  done
done

echo
echo "a $GANG-node gang on $NODES busy nodes; median of $ROUNDS rounds (seconds)"
printf '%-46s %8s %8s %10s\n' "measurement" "rbs" "Slurm" "Slurm/rbs"
row "(a) submit -> RUNNING (polled)" a
row "(b) submit -> command started on all $GANG nodes" b
row "(c) (a) less the floor" over
row "(d) (b) less the floor" overb
row "    the floor: $GANG nodes free, nothing new" floor -
row "    poll period (ms): the resolution of (a)" poll -
