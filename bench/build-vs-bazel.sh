#!/usr/bin/env bash
# Benchmarks the build tool against Debian's Bazel 4.2.3 in the same run, on
# a generated workspace of P packages x 5 genrules (default P=1000):
#   load + analysis: rbs build --nobuild //...   vs  bazel query //...
#   no-op rebuild:   rbs build //... (built)     vs  bazel build //... (built),
#                    alternating, median of three
# Prints both times and Bazel/rbs ratios (above 1: rbs is faster).
#
#   bench/build-vs-bazel.sh [P]
set -euo pipefail
P=${1:-1000}
. "$(dirname "$0")/bazel.sh"

gen() {
  local ws=$1
  mkdir -p "$ws"
  for p in $(seq "$P"); do
    mkdir -p "$ws/p$p"
    {
      echo "genrule(name = \"a\", outs = [\"a.txt\"], cmd = \"echo $p > \$@\")"
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

t0=$(now); rbs build --nobuild //... >/dev/null; t1=$(now); rbs_load=$(sub "$t1" "$t0")
t0=$(now); bz query //... >/dev/null 2>&1; t1=$(now); bazel_load=$(sub "$t1" "$t0")

echo "building $((P * 5)) genrules with each tool (not timed)..." >&2
rbs build //... >/dev/null
bz build //... >/dev/null 2>&1

# No-op rebuilds, alternating, median of three each.
for _ in 1 2 3; do
  t0=$(now); rbs build //... > "$work/rbs-noop.txt"; sub "$(now)" "$t0" >> "$work/rbs-noop-times"
  t0=$(now); bz build //... > "$work/bazel-noop.txt" 2>&1; sub "$(now)" "$t0" >> "$work/bazel-noop-times"
done
rbs_noop=$(median < "$work/rbs-noop-times")
bazel_noop=$(median < "$work/bazel-noop-times")
grep -h "Built\|processes" "$work/rbs-noop.txt" "$work/bazel-noop.txt" | sed 's/^/  /' >&2

ratio() { awk -v b="$1" -v r="$2" 'BEGIN{printf "%.1fx", b/r}'; }
printf '%-40s %8s %8s %10s\n' "$P packages x 5 genrules (seconds)" "rbs" "Bazel" "Bazel/rbs"
printf '%-40s %8s %8s %10s\n' "load + analysis (build --nobuild / query)" "$rbs_load" "$bazel_load" "$(ratio "$bazel_load" "$rbs_load")"
printf '%-40s %8s %8s %10s\n' "no-op rebuild (median of 3)" "$rbs_noop" "$bazel_noop" "$(ratio "$bazel_noop" "$rbs_noop")"
