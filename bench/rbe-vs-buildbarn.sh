#!/usr/bin/env bash
# Compares rbs's remote execution with Buildbarn's, stock Bazel 4.2.3 as the
# client of both: N independent genrules (default 200 and 1000), built cold
# (fresh servers, empty caches) and then all from the cache (after `bazel
# clean`, every action a hit, its output downloaded). Each side has 2
# workers × 4 slots; the sides alternate, 3 rounds each, and the table gives
# medians: wall time of the build, and CPU of the servers (rbs: `rbs remote
# serve`; Buildbarn: bb_storage and bb_scheduler), of the workers (rbs:
# `rbs remote worker`; Buildbarn: bb_worker and bb_runner) and of Bazel's
# own server, the client (on 2 cores, the wall can be no shorter than half
# of all four).
#
#   bench/rbe-vs-buildbarn.sh [N...]
#
# Buildbarn is built by bench/buildbarn/build.sh (see there: a pinned
# commit, plain Go binaries, and a patch that restores the REv2.0 that Bazel
# 4.2.3 speaks). Its storage is bb_storage's local backend on block files in
# this run's directory, as rbs's is its disk store; Bazel talks to
# bb_scheduler for execution and to bb_storage for the caches
# (--remote_executor and --remote_cache), with no frontend between.
set -euo pipefail

sizes=${*:-200 1000}
rounds=3
slots=4
jobs=8
root=$(cd "$(dirname "$0")/.." && pwd)
command -v bazel >/dev/null || { echo "bazel is not installed (apt-get install bazel-bootstrap)" >&2; exit 1; }
bb=$("$root/bench/buildbarn/build.sh")
work=$(mktemp -d /tmp/rbs-bench-buildbarn.XXXXXX)
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    # bb_worker does not end on SIGTERM.
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  pids=()
}
cleanup() {
  stop_all
  for ws in "$work"/ws-*; do
    [ -d "$ws" ] && (cd "$ws" && bazel --output_user_root="$work/bazel-root-$(basename "$ws")" shutdown 2>/dev/null) || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
(cd "$root" && go build -o "$work/rbs" ./cmd/rbs)

now() { date +%s.%N; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# cpu PID... prints the CPU seconds the processes have used.
cpu() {
  local t=0 p
  for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  awk -v t="$t" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.2f\n", t/hz}'
}
wait_for() { # wait_for DESCRIPTION COMMAND...: until the command succeeds, for up to 30 s
  local what=$1; shift
  for _ in $(seq 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "timed out waiting for $what" >&2; exit 1
}

. "$root/bench/genrules.sh"

# start_rbs DIR: a server and two workers; sets flags, servers, workers.
start_rbs() {
  local d=$1
  "$work/rbs" remote serve --listen 127.0.0.1:0 --data-dir "$d/data" 2> "$d/server.log" &
  pids+=($!); disown $!; servers=($!)
  wait_for "rbs to listen" grep -q "listening on" "$d/server.log"
  local addr
  addr=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$d/server.log" | head -1)
  workers=()
  for w in w1 w2; do
    "$work/rbs" remote worker --server "$addr" --name "$w" --work-dir "$d/$w" --action-slots "$slots" 2> "$d/$w.log" &
    pids+=($!); disown $!; workers+=($!)
  done
  wait_for "rbs's workers" sh -c "[ \$('$work/rbs' remote status --server '$addr' --json | grep -c '\"name\"') = 2 ]"
  flags=(--remote_executor="grpc://$addr")
}

# start_bb DIR: bb_storage, bb_scheduler and two bb_worker + bb_runner
# pairs; sets flags, servers, workers.
start_bb() {
  local d=$1 storage scheduler workers_port admin diag w
  storage=$(free_port); scheduler=$(free_port); workers_port=$(free_port); admin=$(free_port); diag=$(free_port)
  mkdir -p "$d/cas/state" "$d/ac/state"
  cat > "$d/storage.json" <<JSON
{
  "grpcServers": [{"listenAddresses": ["127.0.0.1:$storage"], "authenticationPolicy": {"allow": {}}}],
  "maximumMessageSizeBytes": 16777216,
  "global": {"diagnosticsHttpServer": {"httpServers": [{"listenAddresses": ["127.0.0.1:$diag"], "authenticationPolicy": {"allow": {}}}]}},
  "contentAddressableStorage": {
    "backend": {"local": {
      "keyLocationMapOnBlockDevice": {"file": {"path": "$d/cas/key_location_map", "sizeBytes": 67108864}},
      "keyLocationMapMaximumGetAttempts": 8, "keyLocationMapMaximumPutAttempts": 32,
      "oldBlocks": 8, "currentBlocks": 24, "newBlocks": 3,
      "blocksOnBlockDevice": {"source": {"file": {"path": "$d/cas/blocks", "sizeBytes": 4294967296}}, "spareBlocks": 3},
      "persistent": {"stateDirectoryPath": "$d/cas/state", "minimumEpochInterval": "300s"}
    }},
    "getAuthorizer": {"allow": {}}, "putAuthorizer": {"allow": {}}, "findMissingAuthorizer": {"allow": {}}
  },
  "actionCache": {
    "backend": {"local": {
      "keyLocationMapOnBlockDevice": {"file": {"path": "$d/ac/key_location_map", "sizeBytes": 1048576}},
      "keyLocationMapMaximumGetAttempts": 8, "keyLocationMapMaximumPutAttempts": 32,
      "oldBlocks": 8, "currentBlocks": 24, "newBlocks": 1,
      "blocksOnBlockDevice": {"source": {"file": {"path": "$d/ac/blocks", "sizeBytes": 67108864}}, "spareBlocks": 3},
      "persistent": {"stateDirectoryPath": "$d/ac/state", "minimumEpochInterval": "300s"}
    }},
    "getAuthorizer": {"allow": {}}, "putAuthorizer": {"allow": {}}
  }
}
JSON
  cat > "$d/scheduler.json" <<JSON
{
  "adminHttpServers": [{"listenAddresses": ["127.0.0.1:$admin"], "authenticationPolicy": {"allow": {}}}],
  "clientGrpcServers": [{"listenAddresses": ["127.0.0.1:$scheduler"], "authenticationPolicy": {"allow": {}}}],
  "workerGrpcServers": [{"listenAddresses": ["127.0.0.1:$workers_port"], "authenticationPolicy": {"allow": {}}}],
  "browserUrl": "http://127.0.0.1:1",
  "contentAddressableStorage": {"grpc": {"client": {"address": "127.0.0.1:$storage"}}},
  "maximumMessageSizeBytes": 16777216,
  "executeAuthorizer": {"allow": {}}, "modifyDrainsAuthorizer": {"allow": {}},
  "killOperationsAuthorizer": {"allow": {}}, "synchronizeAuthorizer": {"allow": {}},
  "actionRouter": {"simple": {
    "platformKeyExtractor": {"action": {}},
    "invocationKeyExtractors": [{"correlatedInvocationsId": {}}, {"toolInvocationId": {}}],
    "initialSizeClassAnalyzer": {"defaultExecutionTimeout": "1800s", "maximumExecutionTimeout": "7200s"}
  }},
  "platformQueueWithNoWorkersTimeout": "900s"
}
JSON
  "$bb/bb_storage" "$d/storage.json" > "$d/storage.log" 2>&1 &
  pids+=($!); disown $!; servers=($!)
  "$bb/bb_scheduler" "$d/scheduler.json" > "$d/scheduler.log" 2>&1 &
  pids+=($!); disown $!; servers+=($!)
  workers=()
  for w in w1 w2; do
    mkdir -p "$d/$w/build" "$d/$w/cache"
    cat > "$d/$w/runner.json" <<JSON
{"buildDirectoryPath": "$d/$w/build", "grpcServers": [{"listenPaths": ["$d/$w/runner"], "authenticationPolicy": {"allow": {}}}]}
JSON
    cat > "$d/$w/worker.json" <<JSON
{
  "blobstore": {
    "contentAddressableStorage": {"grpc": {"client": {"address": "127.0.0.1:$storage"}}},
    "actionCache": {"grpc": {"client": {"address": "127.0.0.1:$storage"}}}
  },
  "browserUrl": "http://127.0.0.1:1",
  "maximumMessageSizeBytes": 16777216,
  "scheduler": {"address": "127.0.0.1:$workers_port"},
  "buildDirectories": [{
    "native": {
      "buildDirectoryPath": "$d/$w/build", "cacheDirectoryPath": "$d/$w/cache",
      "maximumCacheFileCount": 10000, "maximumCacheSizeBytes": 1073741824, "cacheReplacementPolicy": "LEAST_RECENTLY_USED"
    },
    "runners": [{"endpoint": {"address": "unix://$d/$w/runner"}, "concurrency": $slots, "platform": {}, "workerId": {"worker": "$w"}}]
  }],
  "filePool": {"blockDevice": {"file": {"path": "$d/$w/filepool", "sizeBytes": 1073741824}}},
  "inputDownloadConcurrency": 10, "outputUploadConcurrency": 11,
  "directoryCache": {"maximumCount": 1000, "maximumSizeBytes": 1024000, "cacheReplacementPolicy": "LEAST_RECENTLY_USED"}
}
JSON
    "$bb/bb_runner" "$d/$w/runner.json" > "$d/$w/runner.log" 2>&1 &
    pids+=($!); disown $!; workers+=($!)
    wait_for "bb_runner $w" test -S "$d/$w/runner"
    "$bb/bb_worker" "$d/$w/worker.json" > "$d/$w/worker.log" 2>&1 &
    pids+=($!); disown $!; workers+=($!)
  done
  wait_for "bb_storage" curl -sf "http://127.0.0.1:$diag/-/healthy"
  # The scheduler's page counts a worker per runner slot, under "All workers".
  wait_for "Buildbarn's workers" sh -c "curl -sf 'http://127.0.0.1:$admin/' | grep -o '%22all%22[^>]*>[0-9]*<' | grep -q '>$((2 * slots))<'"
  flags=(--remote_executor="grpc://127.0.0.1:$scheduler" --remote_cache="grpc://127.0.0.1:$storage")
}

# build SIDE N ROUND: one cold and one all-hits build; appends
# "SIDE N KIND wall servercpu workercpu bazelcpu" lines to $work/results.
build() {
  local side=$1 n=$2 round=$3 d ws out
  d=$work/run-$side-$n-$round; mkdir -p "$d"
  ws=$work/ws-$side
  [ -f "$ws/.n" ] && [ "$(cat "$ws/.n")" = "$n" ] || { rm -rf "$ws"; genrules "$ws" "$n"; echo "$n" > "$ws/.n"; }
  "start_$side" "$d"
  local bz=(bazel --output_user_root="$work/bazel-root-ws-$side")
  for kind in cold hits; do
    (cd "$ws" && "${bz[@]}" clean >/dev/null 2>&1 && "${bz[@]}" build --nobuild //... >/dev/null 2>&1)
    local s0 w0 b0 t0 t1 client
    client=$(cd "$ws" && "${bz[@]}" info server_pid 2>/dev/null)
    s0=$(cpu "${servers[@]}"); w0=$(cpu "${workers[@]}"); b0=$(cpu "$client"); t0=$(now)
    if ! (cd "$ws" && "${bz[@]}" build --jobs=$jobs "${flags[@]}" //... > "$d/$kind.log" 2>&1); then
      echo "the $side $kind build of $n failed:" >&2; tail -20 "$d/$kind.log" >&2; exit 1
    fi
    t1=$(now)
    out=$(grep -o "[0-9]* processes: .*" "$d/$kind.log" | tail -1)
    # Each side must have done the work: every genrule run remotely, then
    # every one a hit.
    want="$n remote\."; [ "$kind" = hits ] && want="$n remote cache hit"
    grep -q "$want" <<< "$out" || { echo "the $side $kind build of $n did not do what it should: $out" >&2; exit 1; }
    echo "$side $n $kind $(awk -v a="$t1" -v b="$t0" 'BEGIN{printf "%.2f", a-b}') $(awk -v a="$(cpu "${servers[@]}")" -v b="$s0" 'BEGIN{printf "%.2f", a-b}') $(awk -v a="$(cpu "${workers[@]}")" -v b="$w0" 'BEGIN{printf "%.2f", a-b}') $(awk -v a="$(cpu "$client")" -v b="$b0" 'BEGIN{printf "%.2f", a-b}')" >> "$work/results"
    echo "  $side, $n genrules, $kind, round $round: $(tail -1 "$work/results" | cut -d' ' -f4-) ($out)" >&2
  done
  stop_all
}

for n in $sizes; do
  for round in $(seq "$rounds"); do
    if [ $((round % 2)) = 1 ]; then order="rbs bb"; else order="bb rbs"; fi
    for side in $order; do build "$side" "$n" "$round"; done
  done
done

med() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
field() { awk -v s="$1" -v n="$2" -v k="$3" -v f="$4" '$1==s && $2==n && $3==k {print $f}' "$work/results" | med; }
echo
echo "Bazel 4.2.3 client, 2 workers x $slots slots a side, medians of $rounds alternating rounds"
echo "(Buildbarn: bb-remote-execution 13313e6 with bench/buildbarn's REv2.0 patch)"
printf '%-38s %10s %10s %14s\n' "" rbs Buildbarn rbs/Buildbarn
for n in $sizes; do
  for kind in cold hits; do
    label="$n genrules, $( [ $kind = cold ] && echo cold || echo all hits)"
    for m in "wall s:4" "server CPU s:5" "worker CPU s:6" "Bazel's CPU s:7"; do
      name=${m%%:*}; f=${m##*:}
      r=$(field rbs "$n" "$kind" "$f"); b=$(field bb "$n" "$kind" "$f")
      printf '%-38s %10s %10s %14s\n' "$label, $name" "$r" "$b" "$(awk -v r="$r" -v b="$b" 'BEGIN{if (b > 0) printf "%.2f", r/b; else print "-"}')"
    done
  done
done
