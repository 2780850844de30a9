#!/usr/bin/env bash
# More of rbs on one machine: builds rbs and starts a local cluster — `rbs
# remote serve` on a free port with a throw-away data directory, and one `rbs
# remote worker` — then uses it three ways:
#   1. Bazel builds examples/bazel with rbs as its remote cache, twice; the
#      second build, after `bazel clean`, is served entirely from the cache.
#   2. rbs builds and tests the examples/ workspace on the cluster.
#   3. A four-task job array runs on the worker's job slots, two at a time.
#
#   ./examples/demos.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
for tool in bazel python3; do
  command -v $tool >/dev/null || { echo "demos: $tool is not installed (Debian: apt-get install bazel-bootstrap python3)" >&2; exit 1; }
done
work=$(mktemp -d)
pids=()
bazel_() { bazel --output_user_root="$work/bazel" "$@"; }
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  (cd "$work/ws" 2>/dev/null && bazel_ shutdown 2>/dev/null) || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== building rbs"
(cd "$root" && go build -o "$work/rbs" ./cmd/rbs)
rbs=$work/rbs

echo "== starting a local cluster: rbs remote serve + rbs remote worker"
"$rbs" remote serve --listen 127.0.0.1:0 --data-dir "$work/data" 2>"$work/server.log" &
pids+=($!)
addr=""
for _ in $(seq 100); do
  addr=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$work/server.log")
  [ -n "$addr" ] && break
  sleep 0.1
done
[ -n "$addr" ] || { cat "$work/server.log" >&2; exit 1; }
export RBS_REMOTE=$addr
"$rbs" remote worker --name quickstart --work-dir "$work/worker" --job-slots 2 2>"$work/worker.log" &
pids+=($!)
for _ in $(seq 100); do grep -q registered "$work/worker.log" && break; sleep 0.1; done
"$rbs" remote status

echo
echo "== 1. Bazel with rbs as its remote cache"
cp -r "$root/examples/bazel" "$work/ws"
cd "$work/ws"
bazel_ build --remote_cache="grpc://$addr" //:counted 2>&1 | grep -E "processes|ERROR" || true
bazel_ clean 2>/dev/null
echo "   bazel clean; the second build comes from the rbs cache:"
out=$(bazel_ build --remote_cache="grpc://$addr" //:counted 2>&1)
echo "$out" | grep -E "processes|ERROR"
echo "$out" | grep -q "remote cache hit" || { echo "demos: no remote cache hits" >&2; exit 1; }
cat bazel-bin/counted.txt

echo
echo "== 2. rbs build and rbs test of examples/ on the cluster"
mkdir -p "$work/app"
(cd "$root/examples" && tar --exclude=rbs-out --exclude=rbs-bin --exclude=bazel -cf - .) | tar -C "$work/app" -xf -
cd "$work/app"
XDG_CACHE_HOME="$work/cache" "$rbs" build //...
XDG_CACHE_HOME="$work/cache" "$rbs" test //...
cat rbs-bin/app/stamped.txt

echo
echo "== 3. a job array on the worker's job slots, at most two tasks at once (examples/jobs/hello.sh)"
id=$("$rbs" job submit --parsable --script "$root/examples/jobs/hello.sh")
"$rbs" job wait "$id" || { "$rbs" job show "$id"; exit 1; }
for i in 0 1 2 3; do "$rbs" job logs "${id}_$i"; done
"$rbs" job list --history
