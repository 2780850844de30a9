#!/usr/bin/env bash
# Benchmarks remote execution: Bazel builds N independent trivial genrules
# (default 1000) on a fresh rbs cluster (one server, two workers, cold
# caches) and, in the same run, with Bazel's own local execution. Prints both
# times, their ratio, and rbs's per-action overhead as the server measured it
# (Execute received to result written, p50/p99).
#
#   bench/remote-exec.sh [N]
set -euo pipefail

n=${1:-1000}
jobs=8
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for ws in "$work/local" "$work/remote"; do
    (cd "$ws" 2>/dev/null && bazel --output_user_root="$work/bazel-$(basename "$ws")" shutdown 2>/dev/null) || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

(cd "$root" && go build -o "$work/rbs" ./cmd/rbs)

. "$root/bench/genrules.sh"
gen() {
  genrules "$1" "$n"
  echo 'build --nosandbox_debug' > "$1/.bazelrc"
}
gen "$work/local"
gen "$work/remote"

now() { date +%s.%N; }

# Local: load and analyse first, then time the execution of the actions.
cd "$work/local"
bazel --output_user_root="$work/bazel-local" build --nobuild //... >/dev/null 2>&1
t0=$(now)
bazel --output_user_root="$work/bazel-local" build --jobs=$jobs //... > "$work/local.log" 2>&1
t1=$(now)
local_s=$(echo "$t1 - $t0" | bc)

# rbs: a fresh server and two workers.
"$work/rbs" remote serve --listen 127.0.0.1:0 --data-dir "$work/data" 2> "$work/server.log" &
pids+=($!)
addr=""
for _ in $(seq 100); do
  addr=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$work/server.log"); [ -n "$addr" ] && break; sleep 0.1
done
for w in w1 w2; do
  "$work/rbs" remote worker --server "$addr" --name "$w" --work-dir "$work/$w" --action-slots 4 2> "$work/$w.log" &
  pids+=($!)
done
for _ in $(seq 100); do
  [ "$("$work/rbs" remote status --server "$addr" --json | grep -c '"name"')" = 2 ] && break; sleep 0.1
done
cd "$work/remote"
bazel --output_user_root="$work/bazel-remote" build --nobuild //... >/dev/null 2>&1
t0=$(now)
bazel --output_user_root="$work/bazel-remote" build --jobs=$jobs --remote_executor="grpc://$addr" //... > "$work/remote.log" 2>&1
t1=$(now)
remote_s=$(echo "$t1 - $t0" | bc)

grep -h "processes" "$work/local.log" "$work/remote.log" | sed 's/^/  /'
status=$("$work/rbs" remote status --server "$addr" --json)
p50=$(echo "$status" | sed -n 's/.*"overhead_p50_ms": \([0-9.]*\).*/\1/p')
p99=$(echo "$status" | sed -n 's/.*"overhead_p99_ms": \([0-9.]*\).*/\1/p')
printf '%-44s %10s\n' "build of $n trivial actions" "seconds"
printf '%-44s %10.2f\n' "Bazel local execution (--jobs=$jobs)" "$local_s"
printf '%-44s %10.2f\n' "Bazel on rbs, 2 workers x 4 slots (--jobs=$jobs)" "$remote_s"
printf '%-44s %10.2f\n' "ratio local/rbs (>1: rbs faster)" "$(echo "$local_s / $remote_s" | bc -l)"
printf '%-44s %10s\n' "rbs per-action overhead p50 / p99 (ms)" "$p50 / $p99"
