#!/usr/bin/env bash
# Benchmarks the job cache. In the same run, on one worker of 64 job slots:
#   (a) a job_pipeline of N batch_jobs with the cache on, each writing an
#       output, j<i> running after j<(i-1)/2> (a binary tree, ten levels
#       deep for 1,000): from `rbs job submit` until every job has
#       COMPLETED, the first run (every job runs) against an unchanged
#       resubmission (every job answered from the cache, level by level,
#       each level once the CAS is found to hold the one above's outputs).
#       Each round's first run takes a new --cache-version, so it misses;
#       the two sides alternate which goes first, the cached side
#       resubmitting the last version run.
#   (b) one job's submit -> COMPLETED: answered from the cache (the submit
#       returns once it is), against the same job run (submit, then wait),
#       the median of HITS of each, alternating.
# Prints the medians and the ratios. RBS=BINARY uses a built rbs.
#
#   bench/jobcache.sh [N] [ROUNDS] [HITS]     (default 1000 3 10)
set -euo pipefail
N=${1:-1000}
ROUNDS=${2:-3}
HITS=${3:-10}
. "$(dirname "$0")/lib.sh"

ws=$work/ws
mkdir -p "$ws/bench"
echo 'module(name = "cachebench")' > "$ws/MODULE.bazel"
printf '#!/bin/sh\nmkdir -p out && echo "$1" > "out/$1.txt"\n' > "$ws/bench/step.sh"
chmod +x "$ws/bench/step.sh"
{
  echo 'load("@rbs//job/rules.rbs", "batch_job", "job_pipeline")'
  echo 'sh_binary(name = "step", srcs = ["step.sh"])'
  for i in $(seq 0 $((N - 1))); do
    after=""
    [ "$i" -gt 0 ] && after=", after = [\":j$(((i - 1) / 2))\"]"
    printf 'batch_job(name = "j%d", binary = ":step", args = ["j%d"], outputs = ["out/j%d.txt"], cache = True%s)\n' "$i" "$i" "$i" "$after"
  done
  echo 'job_pipeline(name = "pipeline", jobs = ['
  for i in $(seq 0 $((N - 1))); do printf '    ":j%d",\n' "$i"; done
  echo '])'
} > "$ws/bench/BUILD.rbs"

start_server "$work/server.log"
start_worker w1 --cpus 64 --job-slots 64 --action-slots 2
export XDG_CACHE_HOME=$work/cache
(cd "$ws" && "$rbs" build //bench:pipeline >/dev/null 2>&1)

# pipeline NAME VERSION: submits the pipeline, waits for every job, and
# records the seconds; for "cached", checks that every job was.
pipeline() {
  local name=$1 version=$2 t0
  t0=$(now)
  (cd "$ws" && "$rbs" job submit --cache-version "$version" //bench:pipeline > "$work/submit.out")
  awk 'NR > 1 {print $1}' "$work/submit.out" > "$work/ids"
  "$rbs" job wait $(cat "$work/ids") > "$work/wait.out" || { echo "$name: not every job COMPLETED" >&2; tail "$work/wait.out" >&2; exit 1; }
  sub "$(now)" "$t0" >> "$work/$name"
  local cached
  cached=$(grep -c 'cached from job' "$work/submit.out" || true)
  if [ "$name" = cached ] && [ "$cached" != "$N" ]; then echo "cached: $cached of $N jobs answered from the cache" >&2; exit 1; fi
  if [ "$name" = first ] && [ "$cached" != 0 ]; then echo "first: $cached jobs answered from the cache" >&2; exit 1; fi
  echo "  round $r $name: $(tail -1 "$work/$name") s"
}
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then pipeline first "v$r"; pipeline cached "v$r"
  else pipeline cached "v$((r - 1))"; pipeline first "v$r"; fi
done

# One job, answered from the cache against run.
job=(--outputs o --name hit -- sh -c 'echo x > o')
"$rbs" job submit --cache --parsable "${job[@]}" > "$work/id0"
"$rbs" job wait "$(cat "$work/id0")" > /dev/null
hit() {
  local t0 id
  t0=$(now)
  id=$("$rbs" job submit --cache --parsable "${job[@]}")
  sub "$(now)" "$t0" >> "$work/hit"
  "$rbs" job show --json "$id" | grep -q '"cached_from"' || { echo "job $id was not answered from the cache" >&2; exit 1; }
}
miss() {
  local t0 id
  t0=$(now)
  id=$("$rbs" job submit --parsable "${job[@]}")
  "$rbs" job wait "$id" > /dev/null
  sub "$(now)" "$t0" >> "$work/miss"
}
for i in $(seq "$HITS"); do
  if [ $((i % 2)) = 1 ]; then hit; miss; else miss; hit; fi
done

f=$(median < "$work/first"); c=$(median < "$work/cached")
h=$(median < "$work/hit"); m=$(median < "$work/miss")
printf '%d-job pipeline, first run, all COMPLETED            %8s s\n' "$N" "$f"
printf '%d-job pipeline, unchanged, all answered from cache  %8s s\n' "$N" "$c"
printf 'first/cached = %.1f\n' "$(awk -v a="$f" -v b="$c" 'BEGIN{print a/b}')"
printf 'one job answered from the cache, submit -> COMPLETED  %8s s\n' "$h"
printf 'the same job run, submit -> COMPLETED                 %8s s\n' "$m"
printf 'run/cached = %.1f\n' "$(awk -v a="$m" -v b="$h" 'BEGIN{print a/b}')"
