# Shared by the benchmarks that build trivial genrules through Bazel
# (remote-exec.sh, rbe-vs-buildbarn.sh); source it.

# genrules WS N writes a Bazel workspace at WS of N independent genrules,
# g0 to g(N-1), in 10 packages, each echoing its number to its output.
genrules() {
  local ws=$1 n=$2 p i
  mkdir -p "$ws"
  echo 'workspace(name = "bench")' > "$ws/WORKSPACE"
  for p in $(seq 0 9); do
    mkdir -p "$ws/p$p"
    for i in $(seq "$p" 10 $((n - 1))); do
      printf 'genrule(name = "g%d", outs = ["g%d.txt"], cmd = "echo %d > $@")\n' "$i" "$i" "$i"
    done > "$ws/p$p/BUILD"
  done
}
