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
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/rbs-bench-pva.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f\n", a-b}'; }
median() { sort -n | awk '{a[NR]=$1} END {printf "%.3f\n", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

if [ -n "${RBS:-}" ]; then cp "$RBS" "$work/rbs"; else (cd "$root" && go build -o "$work/rbs" ./cmd/rbs); fi
rbs=$work/rbs

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

"$rbs" remote serve --listen 127.0.0.1:0 --data-dir "$work/data" 2> "$work/server.log" &
pids+=($!)
addr=""
for _ in $(seq 200); do
  addr=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$work/server.log"); [ -n "$addr" ] && break; sleep 0.1
done
[ -n "$addr" ] || { cat "$work/server.log" >&2; exit 1; }
export RBS_REMOTE=$addr
"$rbs" remote worker --name w1 --work-dir "$work/w1" --cpus 64 --job-slots 64 --action-slots 2 2> "$work/worker.log" &
pids+=($!)
for _ in $(seq 200); do grep -q registered "$work/worker.log" && break; sleep 0.1; done
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
