#!/usr/bin/env bash
# Benchmarks what starting the rbs command line costs a client command,
# against the least any Go client of the same server pays, in the same run:
#   empty    an empty Go program (what this machine charges to start Go)
#   rpc      bench/jobsubmit -n 1 -nowait: a Go program that dials the
#            server and makes the one Submit RPC `rbs job submit` makes
#   submit   rbs job submit -- true
#   version  rbs --version
# Each side is run K times in a row, the four sides alternating, R rounds;
# the figures are medians over rounds of the mean per call. The goal is
# submit <= 2 x empty + one RPC, where one RPC is rpc - empty: the script
# prints submit / (empty + rpc), which meets it at or below 1.
#
#   bench/cli-start.sh [R] [K]
set -euo pipefail
R=${1:-7}
K=${2:-20}
. "$(dirname "$0")/lib.sh"
(cd "$root" && go build -o "$work/jobsubmit" ./bench/jobsubmit)
build_empty_go
start_server "$work/server.log"

# per_call CMD...: milliseconds per call of K calls of CMD.
per_call() {
  local s e
  s=$(date +%s%N)
  for _ in $(seq "$K"); do "$@" >/dev/null; done
  e=$(date +%s%N)
  awk -v s="$s" -v e="$e" -v k="$K" 'BEGIN{printf "%.2f\n", (e-s)/1e6/k}'
}

"$rbs" job submit -- true >/dev/null # the server's first submission opens its store
for _ in $(seq "$R"); do
  per_call "$work/empty-go" >> "$work/empty"
  per_call "$work/jobsubmit" -n 1 -nowait >> "$work/rpc"
  per_call "$rbs" job submit -- true >> "$work/submit"
  per_call "$rbs" --version >> "$work/version"
done
e=$(median < "$work/empty"); r=$(median < "$work/rpc"); s=$(median < "$work/submit"); v=$(median < "$work/version")
printf 'per call, median of %d rounds of %d:\n' "$R" "$K"
printf '  empty Go program      %6.2f ms\n' "$e"
printf '  Go client, one RPC    %6.2f ms\n' "$r"
printf '  rbs job submit        %6.2f ms\n' "$s"
printf '  rbs --version         %6.2f ms  (%.1fx the empty program)\n' "$v" "$(awk -v a="$v" -v b="$e" 'BEGIN{print a/b}')"
printf 'rbs job submit / (2 x empty + one RPC) = %.2f  (goal: <= 1)\n' "$(awk -v s="$s" -v e="$e" -v r="$r" 'BEGIN{print s/(e+r)}')"
