#!/usr/bin/env bash
# Worker churn for ten minutes (or DURATION): TestWorkerChurn, which CI
# runs for one, run longer. Workers join, leave (SIGTERM) and are killed
# (SIGKILL) at random while arrays, 2-node gangs and GPU jobs run; every job
# must end COMPLETED, each earlier attempt ended by its worker's loss, and
# no slot or GPU may stay held. Prints the test's figures: workers joined,
# left and killed, jobs and tasks completed, attempts requeued.
#
#   bench/churn.sh [DURATION]     (default 10m)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
RBS_CHURN_FOR=${1:-10m} go test ./tests -run '^TestWorkerChurn$' -count=1 -v -timeout 2h 2>&1 |
  grep -E '^(=== RUN|--- |PASS|FAIL|ok)|churn_test.go'
