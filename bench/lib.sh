# Shared by the benchmarks that run an rbs cluster on this machine; source
# it. It makes $work (removed at exit: every process in $pids is stopped
# first, and cleanup_more run, when the script defines it), builds rbs into
# $rbs (or copies $RBS, a binary to measure instead of this tree's), and
# gives:
#   now                 the time, in seconds
#   sub A B             A - B, to the millisecond
#   median              the median of the numbers on stdin, to the millisecond
#   alive PID           whether the process is running (not gone, not a zombie)
#   build_empty_go      an empty Go program at $work/empty-go, the floor of a
#                       process's start
#   start_server LOG [FLAGS...]
#                       `rbs remote serve` on a free loopback port, with its
#                       data in $work/data unless FLAGS say otherwise, its log
#                       in LOG; sets addr, its address, and exports it as
#                       RBS_REMOTE
#   start_worker NAME [FLAGS...]
#                       `rbs remote worker --name NAME` with its work dir in
#                       $work/NAME and its log in $work/NAME.log, once it has
#                       registered
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d "/tmp/rbs-bench-$(basename "$0" .sh).XXXXXX")
pids=()

alive() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${s:0:1}" != Z ]; }
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do alive "$p" || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  if declare -F cleanup_more >/dev/null; then cleanup_more || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f\n", a-b}'; }
median() { sort -n | awk '{a[NR]=$1} END {printf "%.3f\n", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

if [ -n "${RBS:-}" ]; then cp "$RBS" "$work/rbs"; else (cd "$root" && go build -o "$work/rbs" ./cmd/rbs); fi
rbs=$work/rbs

build_empty_go() {
  mkdir -p "$work/empty-src"
  printf 'package main\n\nfunc main() {}\n' > "$work/empty-src/main.go"
  printf 'module empty\n\ngo 1.22\n' > "$work/empty-src/go.mod"
  (cd "$work/empty-src" && go build -o "$work/empty-go" .)
}

start_server() {
  local log=$1 a data=(--data-dir "$work/data")
  shift
  addr=""
  for a in "$@"; do case $a in --data-dir | --data-dir=*) data=() ;; esac; done
  "$rbs" remote serve --listen 127.0.0.1:0 "${data[@]}" "$@" 2> "$log" &
  pids+=($!)
  for _ in $(seq 200); do
    addr=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$log" 2>/dev/null | head -1); [ -n "$addr" ] && break; sleep 0.1
  done
  [ -n "$addr" ] || { cat "$log" >&2; exit 1; }
  export RBS_REMOTE=$addr
}

start_worker() {
  local name=$1
  shift
  "$rbs" remote worker --name "$name" --work-dir "$work/$name" "$@" 2> "$work/$name.log" &
  pids+=($!)
  for _ in $(seq 200); do grep -q registered "$work/$name.log" && return; sleep 0.1; done
  cat "$work/$name.log" >&2
  exit 1
}
