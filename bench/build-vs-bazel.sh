#!/usr/bin/env bash
# Benchmarks the build tool against Debian's Bazel 4.2.3 in the same run, on
# a generated workspace of P packages x 5 genrules (default P=1000), the
# first of each package reading a source file:
#   load + analysis: rbs build --nobuild //...  vs  bazel build --nobuild //...
#   query:           rbs query //...            vs  bazel query //...
#   no-op rebuild:   rbs build //... (built)    vs  bazel build //... (built)
#   one source edited, rebuilt: a package's source file changed, then
#                    rbs build //...            vs  bazel build //...
# each alternating, median of ROUNDS (default 5), Bazel's server warm (its
# start is not measured). Prints both times and Bazel/rbs ratios (above 1: rbs is
# faster); the goals are 15x, 20x, 5x and 3x.
#
#   bench/build-vs-bazel.sh [P [ROUNDS]]
set -euo pipefail
P=${1:-1000}
ROUNDS=${2:-5}
. "$(dirname "$0")/bazel.sh"

gen() {
  local ws=$1
  mkdir -p "$ws"
  for p in $(seq "$P"); do
    mkdir -p "$ws/p$p"
    echo "$p" > "$ws/p$p/src.txt"
    {
      echo "genrule(name = \"a\", srcs = [\"src.txt\"], outs = [\"a.txt\"], cmd = \"cat \$< > \$@\")"
      for t in b c d e; do
        echo "genrule(name = \"$t\", srcs = [\":a\"], outs = [\"$t.txt\"], cmd = \"cat \$< > \$@; echo $t >> \$@\")"
      done
    } > "$ws/p$p/BUILD"
  done
}
gen "$work/rbs-ws"; echo 'module(name = "bench")' > "$work/rbs-ws/MODULE.bazel"
gen "$work/bazel"; echo 'workspace(name = "bench")' > "$work/bazel/WORKSPACE"
echo 'build --nosandbox_debug' > "$work/bazel/.bazelrc"

# Bazel's server start is not part of what is measured.
bz version >/dev/null 2>&1 || true

# time NAME CMD...: appends the seconds CMD takes to $work/NAME.
time_it() {
  local name=$1 t0
  shift
  t0=$(now); "$@" > "$work/$name.out" 2>&1; sub "$(now)" "$t0" >> "$work/$name"
}
for _ in $(seq "$ROUNDS"); do
  time_it rbs-load rbs build --nobuild //...
  time_it bazel-load bz build --nobuild //...
done
for _ in $(seq "$ROUNDS"); do
  time_it rbs-query rbs query //...
  time_it bazel-query bz query //...
done

echo "building $((P * 5)) genrules with each tool (not timed)..." >&2
rbs build //... >/dev/null
bz build //... >/dev/null 2>&1

for _ in $(seq "$ROUNDS"); do
  time_it rbs-noop rbs build //...
  time_it bazel-noop bz build //...
done
grep -h "Built\|processes" "$work/rbs-noop.out" "$work/bazel-noop.out" | sed 's/^/  /' >&2

for r in $(seq "$ROUNDS"); do
  echo "edit $r" > "$work/rbs-ws/p1/src.txt"
  time_it rbs-edit rbs build //...
  echo "edit $r" > "$work/bazel/p1/src.txt"
  time_it bazel-edit bz build //...
done
grep -h "Built\|processes" "$work/rbs-edit.out" "$work/bazel-edit.out" | sed 's/^/  /' >&2
[ "$(cat "$work/rbs-ws/rbs-bin/p1/e.txt")" = "$(printf 'edit %s\ne' "$ROUNDS")" ] || { echo "rbs built p1/e.txt wrong" >&2; exit 1; }

ratio() { awk -v b="$1" -v r="$2" 'BEGIN{printf "%.1fx", b/r}'; }
row() {
  local r b
  r=$(median < "$work/rbs-$2"); b=$(median < "$work/bazel-$2")
  printf '%-44s %8s %8s %10s\n' "$1" "$r" "$b" "$(ratio "$b" "$r")"
}
printf '%-44s %8s %8s %10s\n' "$P packages x 5 genrules (s, median of $ROUNDS)" "rbs" "Bazel" "Bazel/rbs"
row "load + analysis (build --nobuild)" load
row "query //..." query
row "no-op rebuild" noop
row "one source edited, rebuilt" edit
