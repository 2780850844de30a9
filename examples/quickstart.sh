#!/usr/bin/env bash
# The rbs quickstart, the main job end to end on one machine with Go and
# python3: builds rbs, starts an embedded cluster (`rbs remote serve
# --workers 2`: the server and two workers in one process, on loopback, with
# a throw-away data directory), then
#   1. builds //app:train_2node, an ml_training_job of two nodes on a
#      data-parallel trainer (torch.distributed where torch is installed,
#      else plain Python over a socket), into its manifest;
#   2. submits it, its rank 0 told to fail once at epoch 5, and follows the
#      logs of both ranks: the gang's retry resumes from the checkpoint the
#      first attempt left;
#   3. submits //app:pipeline, three jobs in one request;
#   4. downloads the training run's checkpoints and metrics.json into
#      ./rbs-quickstart-outputs (or $QUICKSTART_OUTPUTS) and prints where
#      they are.
#
#   ./examples/quickstart.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
outputs=${QUICKSTART_OUTPUTS:-$PWD/rbs-quickstart-outputs}
command -v python3 >/dev/null || { echo "quickstart: python3 is not installed (Debian: apt-get install python3)" >&2; exit 1; }
work=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

echo "== building rbs"
(cd "$root" && go build -o "$work/rbs" ./cmd/rbs)
rbs=$work/rbs

echo "== starting an embedded cluster: rbs remote serve --workers 2"
"$rbs" remote serve --workers 2 --listen 127.0.0.1:0 --data-dir "$work/data" 2>"$work/server.log" &
server=$!
addr=""
for _ in $(seq 300); do
  addr=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$work/server.log")
  [ -n "$addr" ] && [ "$(grep -c 'msg=registered' "$work/server.log")" -ge 2 ] && break
  sleep 0.1
done
[ -n "$addr" ] || { cat "$work/server.log" >&2; exit 1; }
export RBS_REMOTE=$addr
"$rbs" remote status

mkdir -p "$work/app"
(cd "$root/examples" && tar --exclude=rbs-out --exclude=rbs-bin --exclude=bazel -cf - .) | tar -C "$work/app" -xf -
cd "$work/app"
export XDG_CACHE_HOME="$work/cache"

echo
echo "== 1. rbs build //app:train_2node: the job target's manifest"
"$rbs" build //app:train_2node
cat rbs-bin/app/train_2node.job.json

echo
echo "== 2. rbs job submit //app:train_2node on two workers, rank 0 failing once at epoch 5; the retry resumes from the checkpoint"
id=$("$rbs" job submit --parsable //app:train_2node -- --fail-at-epoch 5 --fail-rank 0)
"$rbs" job logs -f "$id"
"$rbs" job wait "$id"
"$rbs" job show "$id"

echo
echo "== 3. rbs job submit //app:pipeline: three jobs in one request"
"$rbs" job submit //app:pipeline | tee "$work/pipeline.txt"
"$rbs" job wait $(awk 'NR > 1 { print $1 }' "$work/pipeline.txt")

echo
echo "== 4. rbs job outputs: the training run's checkpoints and metrics"
rm -rf "$outputs"
"$rbs" job outputs "$id" --dest "$outputs"
cat "$outputs/out/metrics.json"
echo
ls "$outputs/ckpt"
echo "The training run's outputs are in $outputs"
