#!/usr/bin/env bash
# Benchmarks the cost of one scheduling round of the batch scheduler's core
# with the cluster full: PENDING tasks of one array (default 100,000, the
# largest array) waiting on WORKERS one-slot workers (default 200) that are
# all busy, so nothing can start. The peer is the scheduler core of an
# earlier commit (default d5b6759, before placement became a chain of
# checks), built and run in the same script: bench/rounds/round_test.go.in,
# which uses only the core's test harness as both trees have it, goes into
# jobs/sched of each tree, and each run prints the median of 7 rounds. The
# two sides alternate; the table shows the median of ROUNDS runs each and
# this tree / the base (below 1: this tree is cheaper).
#
#   bench/round-cost.sh [ROUNDS] [BASE] [PENDING] [WORKERS]    (default 5 d5b6759 100000 200)
#
# Figures (a shared 2-core machine; `bench/round-cost.sh 7`, this tree at
# 7c997c3 plus the per-spec cache of placeable's answers; medians of 7 runs,
# each the median of 7 rounds):
#   this tree   0.0449 s per round
#   d5b6759     0.0533 s per round      this tree / d5b6759: 0.84
# (runs: this tree 0.041-0.075 s, d5b6759 0.042-0.075 s; the machine is
# noisy: a run of 5 gave 1.00). Before the cache a round of this tree took
# 3.3 s: every pending task ran the placement chain over every worker.
set -euo pipefail
ROUNDS=${1:-5}
BASE=${2:-d5b6759}
PENDING=${3:-100000}
WORKERS=${4:-200}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/rbs-bench-rounds.XXXXXX)
cleanup() {
  git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true
  rm -f "$root/jobs/sched/zz_round_cost_test.go"
  rm -rf "$work"
}
trap cleanup EXIT
git -C "$root" worktree add -q --detach "$work/base" "$BASE"
for tree in "$root" "$work/base"; do
  cp "$root/bench/rounds/round_test.go.in" "$tree/jobs/sched/zz_round_cost_test.go"
  (cd "$tree" && go test -c -o "$work/$(basename "$tree").test" ./jobs/sched)
done
median() { sort -n | awk '{a[NR]=$1} END {printf "%.6f\n", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
run() { ROUND_PENDING=$PENDING ROUND_WORKERS=$WORKERS "$work/$1.test" -test.run '^TestRoundCost$' -test.count=1 | sed -n 's/^round: //p'; }
: > "$work/here" ; : > "$work/base.times"
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then run "$(basename "$root")" >> "$work/here"; run base >> "$work/base.times"
  else run base >> "$work/base.times"; run "$(basename "$root")" >> "$work/here"; fi
  echo "  run $r: this tree $(tail -1 "$work/here") s, $BASE $(tail -1 "$work/base.times") s"
done
here=$(median < "$work/here"); base=$(median < "$work/base.times")
echo
echo "one round, $PENDING tasks pending on $WORKERS full workers; median of $ROUNDS runs"
printf '%-28s %10s s\n' "this tree ($(git -C "$root" rev-parse --short HEAD))" "$here" "$BASE" "$base"
awk -v a="$here" -v b="$base" 'BEGIN{printf "this tree / %s: %.2f\n", "'"$BASE"'", a/b}'
