#!/usr/bin/env bash
# Benchmarks the rbs batch scheduler against Slurm (Debian slurm-wlm) on this
# machine, in the same run, driving both through their command lines:
#   (a) N single submissions (one CLI call each), timed until all complete
#   (b) one N-task array, timed until all complete
#   (c) submit->start latency of one job on an idle cluster (median of L samples;
#       the job writes its own start time)
#   (d) a chain of C jobs, each afterok on the previous, total and per link
# and, for (c) and (d), rbs's own figure of the time its server takes from
# a submission's (or a job end's) arrival until the start it decided is sent
# to the worker (the mean of rbs_job_event_seconds over the part),
# and prints Slurm/rbs ratios (above 1: rbs is faster). For (a) it also times
# the same loop with only `rbs --version` (the cost of starting the CLI), with
# an empty Go program (the least any Go client costs) and with /bin/true
# (what this machine charges for a process per job at all),
# and (a') submits the same N single jobs from one process over one
# connection (bench/jobsubmit); Slurm's counterpart (slurmrestd) is not run.
# Needs slurm-wlm
# (apt-get install slurm-wlm) and root.
#
#   bench/jobs-vs-slurm.sh [N] [C] [L]
set -euo pipefail
N=${1:-1000}
C=${2:-20}
L=${3:-10}
command -v sbatch >/dev/null || { echo "slurm-wlm is not installed (apt-get install slurm-wlm)" >&2; exit 1; }
. "$(dirname "$0")/lib.sh"
cleanup_more() { "$root/bench/slurm/stop.sh" "$work/slurm" >/dev/null 2>&1; }
(cd "$root" && go build -o "$work/jobsubmit" ./bench/jobsubmit)
build_empty_go

# ---- the two clusters ----
start_server "$work/server.log"
start_worker w1 --cpus 64 --job-slots 64 --action-slots 2
export SLURM_CONF=$("$root/bench/slurm/start.sh" "$work/slurm" | tail -1)
mkdir -p "$work/out"

slurm_idle() { while [ -n "$(squeue -h -o %i 2>/dev/null)" ]; do sleep 0.05; done; }

declare -A R
# (a) N single submissions.
t0=$(now); ids=()
for _ in $(seq "$N"); do ids+=($("$rbs" job submit --parsable -- true)); done
"$rbs" job wait "${ids[@]}" >/dev/null
R[a_rbs]=$(sub "$(now)" "$t0")
t0=$(now)
for _ in $(seq "$N"); do sbatch --parsable -o /dev/null -e /dev/null --wrap true >/dev/null; done
slurm_idle
R[a_slurm]=$(sub "$(now)" "$t0")

# (a) references: the same loop shape, no job submitted.
t0=$(now)
for _ in $(seq "$N"); do x=$("$rbs" --version); done
R[a_start]=$(sub "$(now)" "$t0")
t0=$(now)
for _ in $(seq "$N"); do x=$("$work/empty-go"); done
R[a_empty]=$(sub "$(now)" "$t0")
t0=$(now)
for _ in $(seq "$N"); do x=$(/bin/true); done
R[a_true]=$(sub "$(now)" "$t0")

# (a') the same N single jobs from one process.
R[a_api]=$("$work/jobsubmit" -n "$N")

# (b) one N-task array.
t0=$(now)
id=$("$rbs" job submit --parsable --array "0-$((N - 1))" -- true)
"$rbs" job wait "$id" >/dev/null
R[b_rbs]=$(sub "$(now)" "$t0")
t0=$(now)
sbatch --parsable -o /dev/null -e /dev/null --array="0-$((N - 1))" --wrap true >/dev/null
slurm_idle
R[b_slurm]=$(sub "$(now)" "$t0")

# events EVENT: the sum and count of rbs's rbs_job_event_seconds{event=EVENT},
# the server's own time from the event's arrival to the starts it decided
# sent to workers.
events() {
  curl -sf "http://$addr/metrics" | awk -v e="event=\"$1\"" '
    index($0, "rbs_job_event_seconds_sum{" e "}") == 1 {s=$2}
    index($0, "rbs_job_event_seconds_count{" e "}") == 1 {c=$2}
    END {print s+0, c+0}'
}
# mean_ms BEFORE AFTER: the mean in milliseconds of the events between two
# readings of events.
mean_ms() { awk -v b="$1" -v a="$2" 'BEGIN{split(b, x, " "); split(a, y, " "); printf "%.2f", (y[1]-x[1])/(y[2]-x[2])*1000}'; }

# (c) submit->start latency on an idle cluster.
submits_before=$(events submit)
for sys in rbs slurm; do
  for k in $(seq "$L"); do
    f=$work/out/lat-$sys-$k
    sleep 1
    t0=$(now)
    if [ $sys = rbs ]; then
      "$rbs" job submit --parsable -- sh -c "date +%s.%N > $f" >/dev/null
    else
      sbatch --parsable -o /dev/null -e /dev/null --wrap "date +%s.%N > $f" >/dev/null
    fi
    for _ in $(seq 500); do [ -s "$f" ] && break; sleep 0.01; done
    sub "$(cat "$f")" "$t0"
  done | median > "$work/out/lat-$sys"
  R[c_$sys]=$(cat "$work/out/lat-$sys")
done

R[c_server]=$(mean_ms "$submits_before" "$(events submit)")

# (d) a chain of C afterok jobs.
ends_before=$(events end)
t0=$(now); prev=""
for j in $(seq "$C"); do
  dep=(); [ -n "$prev" ] && dep=(--deps "afterok:$prev")
  prev=$("$rbs" job submit --parsable "${dep[@]}" -- sh -c "date +%s.%N > $work/out/chain-rbs-$j")
done
"$rbs" job wait "$prev" >/dev/null
R[d_rbs]=$(sub "$(now)" "$t0")
R[d_server]=$(mean_ms "$ends_before" "$(events end)")
t0=$(now); prev=""
for j in $(seq "$C"); do
  dep=(); [ -n "$prev" ] && dep=(--dependency="afterok:$prev")
  prev=$(sbatch --parsable -o /dev/null -e /dev/null "${dep[@]}" --wrap "date +%s.%N > $work/out/chain-slurm-$j")
done
slurm_idle
R[d_slurm]=$(sub "$(now)" "$t0")
for sys in rbs slurm; do
  R[link_$sys]=$(sub "$(cat "$work/out/chain-$sys-$C")" "$(cat "$work/out/chain-$sys-1")" | awk -v c="$C" '{printf "%.3f", $1/(c-1)}')
done

ratio() { awk -v s="$1" -v r="$2" 'BEGIN{printf "%.1fx", s/r}'; }
printf '%-42s %10s %10s %8s\n' "measurement (seconds)" "rbs" "Slurm" "Slurm/rbs"
printf '%-42s %10s %10s %8s\n' "(a) $N single submissions, all complete" "${R[a_rbs]}" "${R[a_slurm]}" "$(ratio "${R[a_slurm]}" "${R[a_rbs]}")"
printf '%-42s %10s %10s %8s\n' "    the same loop, 'rbs --version' only" "${R[a_start]}" "" ""
printf '%-42s %10s %10s %8s\n' "    the same loop, an empty Go program" "${R[a_empty]}" "" "$(ratio "${R[a_slurm]}" "${R[a_empty]}")"
printf '%-42s %10s %10s %8s\n' "    the same loop, /bin/true only" "${R[a_true]}" "" "$(ratio "${R[a_slurm]}" "${R[a_true]}")"
printf '%-42s %10s %10s %8s\n' "(a') $N single jobs from one process" "${R[a_api]}" "" ""
printf '%-42s %10s %10s %8s\n' "(b) one $N-task array, all complete" "${R[b_rbs]}" "${R[b_slurm]}" "$(ratio "${R[b_slurm]}" "${R[b_rbs]}")"
printf '%-42s %10s %10s %8s\n' "(c) submit->start, idle (median of $L)" "${R[c_rbs]}" "${R[c_slurm]}" "$(ratio "${R[c_slurm]}" "${R[c_rbs]}")"
printf '%-42s %10s %10s %8s\n' "    rbs server: submission in -> start out" "${R[c_server]} ms" "" ""
printf '%-42s %10s %10s %8s\n' "(d) chain of $C afterok jobs, total" "${R[d_rbs]}" "${R[d_slurm]}" "$(ratio "${R[d_slurm]}" "${R[d_rbs]}")"
printf '%-42s %10s %10s %8s\n' "    per link (start to start)" "${R[link_rbs]}" "${R[link_slurm]}" "$(ratio "${R[link_slurm]}" "${R[link_rbs]}")"
printf '%-42s %10s %10s %8s\n' "    rbs server: end in -> next start out" "${R[d_server]} ms" "" ""
