# Shared by the benchmarks that compare rbs's build tool with Debian's Bazel
# 4.2.3 (build-vs-bazel.sh, cc-vs-bazel.sh); source it. It makes $work
# (removed at exit, Bazel's server shut down), builds rbs into
# $work/rbs, and gives now, sub (seconds, to the millisecond), median (of
# any odd count), rbs (in $work/rbs-ws,
# with its own cache) and bz (in $work/bazel, with its own output root), and
# bazel_offline_stubs, which points $work/bazel's .bazelrc at stubs of the
# rule repositories Bazel would otherwise download (@rules_cc, @rules_java).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d "/tmp/rbs-bench-$(basename "$0" .sh).XXXXXX")
cleanup() {
  (cd "$work/bazel" 2>/dev/null && bazel --output_user_root="$work/bazel-root" shutdown 2>/dev/null) || true
  rm -rf "$work"
}
trap cleanup EXIT
command -v bazel >/dev/null || { echo "bazel is not installed (apt-get install bazel-bootstrap)" >&2; exit 1; }
(cd "$root" && go build -o "$work/rbs" ./cmd/rbs)

now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f\n", a-b}'; }
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
rbs() { (cd "$work/rbs-ws" && XDG_CACHE_HOME="$work/cache" "$work/rbs" "$@"); }
bz() { (cd "$work/bazel" && bazel --output_user_root="$work/bazel-root" "$@"); }

# Offline, Bazel 4.2.3 cannot fetch @rules_cc, which its C++ toolchain
# loads, nor @rules_java, which its default Java toolchains load: stubs give
# what they need. The .bazelrc lines are appended to $work/bazel/.bazelrc.
bazel_offline_stubs() {
  local cc=$work/stub_rules_cc java=$work/stub_rules_java r
  mkdir -p "$cc/cc" "$java/java"; touch "$cc/WORKSPACE" "$cc/BUILD" "$java/WORKSPACE" "$java/BUILD"
  printf 'package(default_visibility = ["//visibility:public"])\nalias(name = "toolchain_type", actual = "@bazel_tools//tools/cpp:toolchain_type")\n' > "$cc/cc/BUILD"
  for r in cc_binary cc_library cc_test cc_import cc_proto_library cc_toolchain cc_toolchain_suite objc_library; do
    echo "def $r(**kw): native.$r(**kw)"
  done > "$cc/cc/defs.bzl"
  echo 'package(default_visibility = ["//visibility:public"])' > "$java/java/BUILD"
  for r in java_binary java_import java_library java_plugin java_runtime java_test java_toolchain java_proto_library java_lite_proto_library; do
    echo "def $r(**kw): native.$r(**kw)"
  done > "$java/java/defs.bzl"
  printf 'build --override_repository=rules_cc=%s\nbuild --override_repository=rules_java=%s\n' "$cc" "$java" >> "$work/bazel/.bazelrc"
}
