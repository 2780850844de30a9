#!/usr/bin/env bash
# Benchmarks rbs's C/C++ rules against Debian's Bazel 4.2.3 and its
# auto-configured local C++ toolchain, in the same run, on one generated
# workspace of N cc_library targets (default 200): half in a chain (each
# depends on the one before), half in a binary tree (each depends on its two
# children), each with a header and a source that includes its
# dependencies' headers, and a cc_binary over both. The same BUILD files
# (native cc_library, no load) serve both tools.
#   cold build:        after `clean` (rbs: and a fresh local cache; Bazel:
#                      `bazel clean`, its server and toolchain kept); mean
#                      of 2, in the order rbs, Bazel, Bazel, rbs
#   no-op rebuild:     median of 3
#   touch a leaf:      a comment added to the chain's first header, which
#                      two sources include; median of 3 (a different
#                      comment each time)
# The two tools alternate within each measurement. Prints seconds and
# Bazel/rbs ratios (above 1: rbs is faster).
#
#   bench/cc-vs-bazel.sh [N]
#
# Figures (a shared 2-core machine, N=200: 401 actions cold):
#   200 cc_library + 1 cc_binary (seconds)          rbs    Bazel  Bazel/rbs
#   cold build (mean of 2)                          7.89   24.11     3.06
#   no-op rebuild (median of 3)                     0.21    0.32     1.52
#   rebuild after touching a leaf header (median)   0.15    0.37     2.47
# (both tools ran the two compiles of the sources that include the header;
# their objects came out the same, so no archive or link ran again.)
set -euo pipefail
N=${1:-200}
. "$(dirname "$0")/bazel.sh"

half=$((N / 2))
gen() {
  local ws=$1 i deps inc calls
  mkdir -p "$ws/lib"
  : > "$ws/lib/BUILD"
  for i in $(seq "$N"); do
    deps="" inc="" calls=""
    add() { deps+="\":l$1\", "; inc+="#include \"lib/l$1.h\""$'\n'; calls+=" + f$1()"; }
    if [ "$i" -le "$half" ]; then
      [ "$i" -gt 1 ] && add $((i - 1))
    else
      local k=$((i - half))
      [ $((2 * k)) -le $half ] && add $((half + 2 * k))
      [ $((2 * k + 1)) -le $half ] && add $((half + 2 * k + 1))
    fi
    echo "int f$i();" > "$ws/lib/l$i.h"
    printf '#include "lib/l%s.h"\n%sint f%s() { return 1%s; }\n' "$i" "$inc" "$i" "$calls" > "$ws/lib/l$i.cc"
    echo "cc_library(name = \"l$i\", srcs = [\"l$i.cc\"], hdrs = [\"l$i.h\"], deps = [${deps%, }])" >> "$ws/lib/BUILD"
  done
  printf '#include <cstdio>\n#include "lib/l%s.h"\n#include "lib/l%s.h"\nint main() { std::printf("%%d\\n", f%s() + f%s()); }\n' "$half" "$((half + 1))" "$half" "$((half + 1))" > "$ws/lib/main.cc"
  echo "cc_binary(name = \"main\", srcs = [\"main.cc\"], deps = [\":l$half\", \":l$((half + 1))\"])" >> "$ws/lib/BUILD"
}
gen "$work/rbs-ws"; echo 'module(name = "bench")' > "$work/rbs-ws/MODULE.bazel"
gen "$work/bazel"; echo 'workspace(name = "bench")' > "$work/bazel/WORKSPACE"
echo 'build --nosandbox_debug' > "$work/bazel/.bazelrc"
bazel_offline_stubs

timed() { local t0; t0=$(now); "$@" > "$work/last.txt" 2>&1 || { cat "$work/last.txt" >&2; exit 1; }; sub "$(now)" "$t0"; }

# Bazel's server start and its C++ toolchain's configuration are not part
# of what is measured: a first build does them.
echo "warming Bazel up (not timed)..." >&2
bz build //lib:l1 > "$work/warm.txt" 2>&1 || { tail -20 "$work/warm.txt" >&2; exit 1; }

rbs_cold_run() { rbs clean >/dev/null; rm -rf "$work/cache"; timed rbs build //lib:all >> "$work/rbs-cold"; }
bazel_cold_run() { bz clean >/dev/null 2>&1; timed bz build //lib:all >> "$work/bazel-cold"; }
rbs_cold_run; bazel_cold_run; bazel_cold_run; rbs_cold_run
mean() { awk '{s += $1} END {printf "%.2f\n", s / NR}'; }
[ "$(cd "$work/rbs-ws" && rbs-bin/lib/main)" = "$(cd "$work/bazel" && bazel-bin/lib/main)" ] || { echo "the two builds' programs disagree" >&2; exit 1; }

for _ in 1 2 3; do
  timed rbs build //lib:all >> "$work/rbs-noop"
  timed bz build //lib:all >> "$work/bazel-noop"
done
for r in 1 2 3; do
  for ws in rbs-ws bazel; do echo "// touched $r" >> "$work/$ws/lib/l1.h"; done
  timed rbs build //lib:all >> "$work/rbs-touch"
  timed bz build //lib:all >> "$work/bazel-touch"
done
grep -h "Built\|processes" "$work/last.txt" | sed 's/^/  /' >&2

ratio() { awk -v b="$1" -v r="$2" 'BEGIN{printf "%.2f", b/r}'; }
printf '%-52s %8s %8s %10s\n' "$N cc_library + 1 cc_binary (seconds)" "rbs" "Bazel" "Bazel/rbs"
for m in cold noop touch; do
  case $m in
    cold) label="cold build (mean of 2)"; r=$(mean < "$work/rbs-cold"); b=$(mean < "$work/bazel-cold") ;;
    noop) label="no-op rebuild (median of 3)"; r=$(median < "$work/rbs-noop"); b=$(median < "$work/bazel-noop") ;;
    touch) label="rebuild after touching a leaf header (median of 3)"; r=$(median < "$work/rbs-touch"); b=$(median < "$work/bazel-touch") ;;
  esac
  printf '%-52s %8s %8s %10s\n' "$label" "$r" "$b" "$(ratio "$b" "$r")"
done
