# rbs's runfiles library for Bash (@bazel_tools//tools/bash/runfiles), for
# scripts written for Bazel's: source it with Bazel's initialisation lines,
# then `rlocation PATH` prints where the runfile PATH is (PATH starts with
# the workspace's name, __main__, or a repository's, such as bazel_tools),
# or prints nothing and fails when there is none. The runfiles tree's root
# is $RUNFILES_DIR, which rbs run and rbs test set; without it, the nearest
# directory named *.runfiles above the script.

if [[ -z "${RUNFILES_DIR:-}" ]]; then
  __rbs_runfiles_d=$(cd "$(dirname "$0")" 2>/dev/null && pwd)
  while [[ -n "$__rbs_runfiles_d" && "$__rbs_runfiles_d" != "/" && "$__rbs_runfiles_d" != *.runfiles ]]; do
    __rbs_runfiles_d=$(dirname "$__rbs_runfiles_d")
  done
  if [[ "$__rbs_runfiles_d" == *.runfiles ]]; then
    export RUNFILES_DIR="$__rbs_runfiles_d"
  elif [[ -d "$0.runfiles" ]]; then
    export RUNFILES_DIR="$0.runfiles"
  fi
  unset __rbs_runfiles_d
fi

function rlocation() {
  if [[ "$1" == /* ]]; then
    echo "$1"
    return 0
  fi
  if [[ -n "${RUNFILES_DIR:-}" && -e "$RUNFILES_DIR/$1" ]]; then
    echo "$RUNFILES_DIR/$1"
    return 0
  fi
  return 1
}
export -f rlocation

# runfiles_export_envvars exports what a program started from the script
# needs to find its own runfiles.
function runfiles_export_envvars() {
  export RUNFILES_DIR
}
export -f runfiles_export_envvars
