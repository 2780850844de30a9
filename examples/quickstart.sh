#!/usr/bin/env bash
# The rbs quickstart: builds rbs, starts `rbs remote serve` on a free local
# port with a throw-away data directory, and builds the examples/bazel
# workspace twice with Bazel using rbs as its remote cache. The second build,
# after `bazel clean`, is served entirely from the rbs cache.
#
#   ./examples/quickstart.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
command -v bazel >/dev/null || { echo "quickstart: bazel is not installed (Debian: apt-get install bazel-bootstrap)" >&2; exit 1; }
work=$(mktemp -d)
pid=""
bazel_() { bazel --output_user_root="$work/bazel" "$@"; }
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  (cd "$work/ws" 2>/dev/null && bazel_ shutdown 2>/dev/null) || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== building rbs"
(cd "$root" && go build -o "$work/rbs" ./cmd/rbs)

echo "== starting rbs remote serve"
"$work/rbs" remote serve --listen 127.0.0.1:0 --data-dir "$work/data" 2>"$work/server.log" &
pid=$!
addr=""
for _ in $(seq 100); do
  addr=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$work/server.log")
  [ -n "$addr" ] && break
  sleep 0.1
done
[ -n "$addr" ] || { cat "$work/server.log" >&2; exit 1; }
echo "   listening on $addr"

cp -r "$root/examples/bazel" "$work/ws"
cd "$work/ws"
echo "== first build: runs the actions, fills the rbs cache"
bazel_ build --remote_cache="grpc://$addr" //:counted 2>&1 | grep -E "processes|ERROR" || true
bazel_ clean 2>/dev/null
echo "== bazel clean; second build: every action comes from the rbs cache"
out=$(bazel_ build --remote_cache="grpc://$addr" //:counted 2>&1)
echo "$out" | grep -E "processes|ERROR"
echo "$out" | grep -q "remote cache hit" || { echo "quickstart: no remote cache hits" >&2; exit 1; }
echo "== result"
cat bazel-bin/counted.txt
