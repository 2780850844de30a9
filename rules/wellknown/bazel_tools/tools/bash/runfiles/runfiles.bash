# rbs's runfiles library for Bash (@bazel_tools//tools/bash/runfiles), for
# scripts written for Bazel's: source it with Bazel's initialisation lines,
# then `rlocation PATH` prints where the runfile PATH is, or prints nothing
# and fails when there is none. PATH starts with a repository's name: the
# main repository's directory (_main under modules, else the workspace's
# name), the name its module gives it (through the tree's _repo_mapping,
# as Bazel's library maps it), or another repository's, such as
# bazel_tools. The tree is found by $RUNFILES_DIR, else by the manifest
# $RUNFILES_MANIFEST_FILE, both of which rbs run and rbs test set; without
# either, by the nearest directory named *.runfiles above the script.

if [[ -z "${RUNFILES_DIR:-}" && -z "${RUNFILES_MANIFEST_FILE:-}" ]]; then
  __rbs_runfiles_d=$(cd "$(dirname "$0")" 2>/dev/null && pwd)
  while [[ -n "$__rbs_runfiles_d" && "$__rbs_runfiles_d" != "/" && "$__rbs_runfiles_d" != *.runfiles ]]; do
    __rbs_runfiles_d=$(dirname "$__rbs_runfiles_d")
  done
  if [[ "$__rbs_runfiles_d" == *.runfiles ]]; then
    export RUNFILES_DIR="$__rbs_runfiles_d"
  elif [[ -d "$0.runfiles" ]]; then
    export RUNFILES_DIR="$0.runfiles"
  elif [[ -f "$0.runfiles_manifest" ]]; then
    export RUNFILES_MANIFEST_FILE="$0.runfiles_manifest"
  fi
  unset __rbs_runfiles_d
fi

# __rbs_runfile prints where runfile $1 is, as it is named in the tree.
function __rbs_runfile() {
  if [[ -n "${RUNFILES_DIR:-}" && -e "$RUNFILES_DIR/$1" ]]; then
    echo "$RUNFILES_DIR/$1"
    return 0
  fi
  if [[ -n "${RUNFILES_MANIFEST_FILE:-}" && -f "$RUNFILES_MANIFEST_FILE" ]]; then
    local target
    target=$(awk -v p="$1" '$1 == p { sub(/^[^ ]* /, ""); print; exit }' "$RUNFILES_MANIFEST_FILE")
    if [[ -n "$target" && -e "$target" ]]; then
      echo "$target"
      return 0
    fi
  fi
  return 1
}
export -f __rbs_runfile

function rlocation() {
  if [[ "$1" == /* ]]; then
    echo "$1"
    return 0
  fi
  local repo="${1%%/*}" rest="${1#*/}" mapping="" target
  if [[ -n "${RUNFILES_DIR:-}" && -f "$RUNFILES_DIR/_repo_mapping" ]]; then
    mapping="$RUNFILES_DIR/_repo_mapping"
  elif mapping=$(__rbs_runfile _repo_mapping); then
    :
  fi
  if [[ "$1" == */* && -n "$mapping" ]]; then
    target=$(awk -F, -v r="$repo" '$1 == "" && $2 == r { print $3; exit }' "$mapping")
    if [[ -n "$target" ]]; then
      __rbs_runfile "$target/$rest" && return 0
    fi
  fi
  __rbs_runfile "$1"
}
export -f rlocation

# runfiles_export_envvars exports what a program started from the script
# needs to find its own runfiles.
function runfiles_export_envvars() {
  export RUNFILES_DIR RUNFILES_MANIFEST_FILE
}
export -f runfiles_export_envvars
