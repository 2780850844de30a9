# Shared by the benchmarks that compare rbs and Slurm on NODES one-CPU
# nodes of this machine (gang-vs-slurm.sh, preempt-vs-slurm.sh); source it
# after setting NODES. It makes $work (removed at exit, with every process
# in $pids and Slurm stopped), builds rbs into $rbs (or copies $RBS), and
# gives sub, median, row (a line of the results table) and the two clusters: start_rbs [serve flags...] runs a
# server and NODES `rbs remote worker` processes and exports RBS_REMOTE;
# start_slurm CONF runs Slurm with NODES slurmd (n1..nN), CONF's lines
# replacing those of bench/slurm/start.sh, and exports SLURM_CONF.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d "/tmp/rbs-bench-$(basename "$0" .sh).XXXXXX")
pids=()
# A process still running (not gone, not a zombie).
alive() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${s:0:1}" != Z ]; }
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do alive "$p" || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  "$root/bench/slurm/stop.sh" "$work/slurm" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
command -v sbatch >/dev/null || { echo "slurm-wlm is not installed (apt-get install -y slurm-wlm)" >&2; exit 1; }

sub() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f\n", a-b}'; }
median() { sort -n | awk '{a[NR]=$1} END {printf "%.3f\n", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# row LABEL NAME prints a line of the results table: the medians of
# $work/NAME_rbs and $work/NAME_slurm and their ratio; row LABEL NAME - leaves
# the ratio out (for figures that are not timings to compare).
row() {
  local r s
  r=$(median < "$work/$2_rbs"); s=$(median < "$work/$2_slurm")
  if [ "${3:-}" = - ]; then
    printf '%-46s %8s %8s\n' "$1" "$r" "$s"
  else
    printf '%-46s %8s %8s %10s\n' "$1" "$r" "$s" "$(awk -v s="$s" -v r="$r" 'BEGIN{printf "%.2fx", s/r}')"
  fi
}

# RBS=/path/to/rbs uses that binary instead of building this tree's.
if [ -n "${RBS:-}" ]; then cp "$RBS" "$work/rbs"; else (cd "$root" && go build -o "$work/rbs" ./cmd/rbs); fi
rbs=$work/rbs

start_rbs() {
  "$rbs" remote serve --listen 127.0.0.1:0 --data-dir "$work/rbs-data" "$@" 2> "$work/server.log" &
  pids+=($!)
  local addr="" i
  for _ in $(seq 200); do
    addr=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$work/server.log" 2>/dev/null || true); [ -n "$addr" ] && break; sleep 0.1
  done
  [ -n "$addr" ] || { cat "$work/server.log" >&2; exit 1; }
  export RBS_REMOTE=$addr
  for i in $(seq "$NODES"); do
    "$rbs" remote worker --name "w$i" --work-dir "$work/w$i" --cpus 1 --job-slots 1 --action-slots 1 2> "$work/worker$i.log" &
    pids+=($!)
  done
  for _ in $(seq 200); do
    [ "$(cat "$work"/worker*.log 2>/dev/null | grep -c registered)" -ge "$NODES" ] && break; sleep 0.1
  done
  [ "$(cat "$work"/worker*.log | grep -c registered)" -ge "$NODES" ] || { tail "$work"/worker*.log >&2; exit 1; }
}

start_slurm() {
  SLURM_CONF=$("$root/bench/slurm/start.sh" "$work/slurm" "$NODES" "$1" | tail -1)
  export SLURM_CONF
  [ "$(sinfo -h -N -o '%N %T' | sort -u | grep -c ' idle$')" -ge "$NODES" ] || { sinfo -N >&2; echo "Slurm's $NODES nodes are not up" >&2; exit 1; }
}
