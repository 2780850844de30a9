#!/usr/bin/env bash
# Benchmarks submitting a DAG of N jobs (default 1000): one
# `rbs job submit //dag:pipeline` of a generated workspace against N
# `sbatch --dependency` calls building the same DAG, in the same run. Only
# the submission is timed: the rbs cluster has no worker, so its jobs stay
# PENDING, and the Slurm jobs are submitted with --hold; both are cancelled
# (untimed) afterwards.
#
# The DAG: S stages of W jobs (N = S*W, default 10 stages of 100). Job j<s>_<i>
# of stage s>0 runs after (afterok) j<s-1>_<i> and j<s-1>_<(i+1)%W>, so there
# are 2*(S-1)*W edges and the longest path is S jobs. In the workspace every
# job is a batch_job of one sh_binary `step` (a script that runs true), and
# job_pipeline `pipeline` lists all N jobs.
#
# Measured, alternating which side goes first each round:
#   rbs cold: a fresh copy of the workspace and a fresh build cache
#     (XDG_CACHE_HOME): the client analyses the workspace, builds the N job
#     targets and their manifests, stages their inputs and sends one request;
#   rbs again: the same command once more in the same workspace (the build is
#     cached and the blobs are on the cluster; N more jobs are created);
#   sbatch: N `sbatch --parsable --hold --dependency=afterok:A:B --wrap true`
#     calls in a shell loop, each after the ids of the earlier ones.
# Prints the median of ROUNDS rounds and sbatch/rbs (above 1: rbs is faster).
# Needs slurm-wlm (apt-get install -y slurm-wlm) and root. RBS=BINARY uses a
# built rbs instead of building this tree.
#
#   bench/pipeline-vs-sbatch.sh [STAGES] [WIDTH] [ROUNDS]     (default 10 100 3)
#
# Figures (rbs at 0bd9f16, a shared 2-core machine, Slurm 22.05 with
# bench/slurm/start.sh's settings; `bench/pipeline-vs-sbatch.sh 10 100 3`:
# 1,000 jobs, 1,800 edges; medians of 3 rounds):
#   rbs job submit //dag:pipeline, fresh workspace   0.707 s   sbatch/rbs 8.32x
#   rbs job submit //dag:pipeline, again (cached)    0.373 s   sbatch/rbs 15.77x
#   1000 x sbatch --hold --dependency                5.882 s
# (rounds: rbs cold 0.61, 0.75, 0.71 s; again 0.39, 0.37, 0.32 s; sbatch 6.40,
# 5.88, 5.40 s). The pipeline's 1,000 job targets are built in one build (at
# 01a03a6, one build per job: 1.437 s cold, 1.264 s again). The rbs client
# staged 2,000 files, 39.1 KiB, of which 20 B of distinct content; the
# server's data dir is kept across rounds, so after round 1 none were new.
set -euo pipefail
S=${1:-10}
W=${2:-100}
ROUNDS=${3:-3}
N=$((S * W))
command -v sbatch >/dev/null || { echo "slurm-wlm is not installed (apt-get install -y slurm-wlm)" >&2; exit 1; }
# RBS=/path/to/rbs uses that binary instead of building this tree's.
. "$(dirname "$0")/lib.sh"
cleanup_more() { "$root/bench/slurm/stop.sh" "$work/slurm" >/dev/null 2>&1; }

# ---- the workspace ----
ws=$work/ws
mkdir -p "$ws/dag"
echo 'module(name = "dagbench")' > "$ws/MODULE.bazel"
printf '#!/bin/sh\nexec true\n' > "$ws/dag/step.sh"
chmod +x "$ws/dag/step.sh"
{
  echo 'load("@rbs//job/rules.rbs", "batch_job", "job_pipeline")'
  echo
  echo 'sh_binary(name = "step", srcs = ["step.sh"])'
  echo
  for s in $(seq 0 $((S - 1))); do
    for i in $(seq 0 $((W - 1))); do
      if [ "$s" = 0 ]; then
        printf 'batch_job(name = "j%d_%d", binary = ":step", args = ["%d", "%d"])\n' "$s" "$i" "$s" "$i"
      else
        printf 'batch_job(name = "j%d_%d", binary = ":step", args = ["%d", "%d"], after = [":j%d_%d", ":j%d_%d"])\n' \
          "$s" "$i" "$s" "$i" $((s - 1)) "$i" $((s - 1)) $(((i + 1) % W))
      fi
    done
  done
  echo
  echo 'job_pipeline(name = "pipeline", jobs = ['
  for s in $(seq 0 $((S - 1))); do for i in $(seq 0 $((W - 1))); do printf '    ":j%d_%d",\n' "$s" "$i"; done; done
  echo '])'
} > "$ws/dag/BUILD.rbs"

# ---- the two clusters (rbs without a worker: its jobs stay PENDING) ----
start_server "$work/server.log"
export SLURM_CONF=$("$root/bench/slurm/start.sh" "$work/slurm" | tail -1)

rbs_side() {
  local r=$1 t0 d
  d=$work/ws$r
  rm -rf "$d" "$work/cache$r"; cp -r "$ws" "$d"
  t0=$(now)
  (cd "$d" && XDG_CACHE_HOME=$work/cache$r "$rbs" job submit --parsable //dag:pipeline > "$work/ids" 2> "$work/submit.err") \
    || { cat "$work/submit.err" >&2; exit 1; }
  sub "$(now)" "$t0" >> "$work/rbs_cold"
  [ "$(grep -c . "$work/ids")" = "$N" ] || { echo "rbs submitted $(grep -c . "$work/ids") jobs, not $N" >&2; cat "$work/submit.err" >&2; exit 1; }
  grep '^rbs: inputs' "$work/submit.err" > "$work/rbs_line" || true
  t0=$(now)
  (cd "$d" && XDG_CACHE_HOME=$work/cache$r "$rbs" job submit --parsable //dag:pipeline > "$work/ids2" 2> "$work/submit2.err") \
    || { cat "$work/submit2.err" >&2; exit 1; }
  sub "$(now)" "$t0" >> "$work/rbs_again"
  echo "  round $r rbs: cold $(tail -1 "$work/rbs_cold") s, again $(tail -1 "$work/rbs_again") s; $(cat "$work/rbs_line")"
  "$rbs" job cancel $(cat "$work/ids" "$work/ids2") > /dev/null 2>&1 || true
  rm -rf "$d"
}
slurm_side() {
  local r=$1 t0 s i dep
  declare -A id
  t0=$(now)
  for s in $(seq 0 $((S - 1))); do
    for i in $(seq 0 $((W - 1))); do
      dep=()
      [ "$s" = 0 ] || dep=(--dependency="afterok:${id[$((s - 1))_$i]}:${id[$((s - 1))_$(((i + 1) % W))]}")
      id[${s}_$i]=$(sbatch --parsable --hold -o /dev/null -e /dev/null "${dep[@]}" --wrap true)
    done
  done
  sub "$(now)" "$t0" >> "$work/slurm_t"
  echo "  round $r sbatch: $(tail -1 "$work/slurm_t") s ($(squeue -h -t PD -o %i | wc -l) pending)"
  scancel --quiet -u root 2>/dev/null || true
  for _ in $(seq 600); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.1; done
}

echo "DAG: $S stages of $W jobs ($N jobs, $((2 * (S - 1) * W)) afterok edges)"
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then rbs_side "$r"; slurm_side "$r"; else slurm_side "$r"; rbs_side "$r"; fi
done

ratio() { awk -v s="$1" -v r="$2" 'BEGIN{printf "%.2fx", s/r}'; }
c=$(median < "$work/rbs_cold"); a=$(median < "$work/rbs_again"); sl=$(median < "$work/slurm_t")
echo
echo "submitting $N jobs, $((2 * (S - 1) * W)) edges; median of $ROUNDS rounds"
printf '%-52s %9s %11s\n' "measurement" "seconds" "sbatch/rbs"
printf '%-52s %9s %11s\n' "rbs job submit //dag:pipeline, fresh workspace" "$c" "$(ratio "$sl" "$c")"
printf '%-52s %9s %11s\n' "rbs job submit //dag:pipeline, again (cached)" "$a" "$(ratio "$sl" "$a")"
printf '%-52s %9s\n' "$N x sbatch --hold --dependency" "$sl"
echo "rbs sent: $(cat "$work/rbs_line")"
