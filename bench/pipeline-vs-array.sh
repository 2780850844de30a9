#!/usr/bin/env bash
# Benchmarks the jobs of one job_pipeline against the tasks of one job array
# doing the same work, in the same run, each timed from `rbs job submit`
# until every job has COMPLETED, on one worker of 64 job slots:
#   pipeline  rbs job submit //bench:pipeline, a job_pipeline of N
#             batch_jobs j0 ... j<N-1> with no dependencies, each running
#             the sh_binary `step` (a script that runs true) with its own
#             argument;
#   array     rbs job submit --array 0-<N-1> //bench:j0, the same batch_job
#             run as N array tasks.
# Both run the same program from the same staged inputs; the difference is
# what N jobs cost against N tasks of one job (a spec each, a record each,
# their inputs named in each). The targets are built before the first
# round. Prints the median of ROUNDS rounds, the two sides alternating, and
# pipeline/array (the goal: at most 1.2). RBS=BINARY uses a built rbs.
#
#   bench/pipeline-vs-array.sh [N] [ROUNDS]     (default 1000 3)
set -euo pipefail
N=${1:-1000}
ROUNDS=${2:-3}
. "$(dirname "$0")/lib.sh"

ws=$work/ws
mkdir -p "$ws/bench"
echo 'module(name = "pvabench")' > "$ws/MODULE.bazel"
printf '#!/bin/sh\nexec true\n' > "$ws/bench/step.sh"
chmod +x "$ws/bench/step.sh"
{
  echo 'load("@rbs//job/rules.rbs", "batch_job", "job_pipeline")'
  echo 'sh_binary(name = "step", srcs = ["step.sh"])'
  for i in $(seq 0 $((N - 1))); do printf 'batch_job(name = "j%d", binary = ":step", args = ["%d"])\n' "$i" "$i"; done
  echo 'job_pipeline(name = "pipeline", jobs = ['
  for i in $(seq 0 $((N - 1))); do printf '    ":j%d",\n' "$i"; done
  echo '])'
} > "$ws/bench/BUILD.rbs"

start_server "$work/server.log"
start_worker w1 --cpus 64 --job-slots 64 --action-slots 2
export XDG_CACHE_HOME=$work/cache
(cd "$ws" && "$rbs" build //bench:pipeline >/dev/null 2>&1)

# run NAME ARGS...: submits, waits for every job, and records the seconds.
run() {
  local name=$1 t0
  shift
  t0=$(now)
  (cd "$ws" && "$rbs" job submit --parsable "$@" > "$work/ids")
  "$rbs" job wait $(cat "$work/ids") > "$work/wait.out" || { echo "$name: not every job COMPLETED" >&2; tail "$work/wait.out" >&2; exit 1; }
  sub "$(now)" "$t0" >> "$work/$name"
  echo "  round $r $name: $(tail -1 "$work/$name") s"
}
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then run pipeline //bench:pipeline; run array --array "0-$((N - 1))" //bench:j0
  else run array --array "0-$((N - 1))" //bench:j0; run pipeline //bench:pipeline; fi
done
p=$(median < "$work/pipeline"); a=$(median < "$work/array")
printf '%d jobs of one job_pipeline, all COMPLETED   %8s s\n' "$N" "$p"
printf '%d tasks of one array, all COMPLETED         %8s s\n' "$N" "$a"
printf 'pipeline/array = %.2f  (goal: <= 1.2)\n' "$(awk -v p="$p" -v a="$a" 'BEGIN{print p/a}')"
