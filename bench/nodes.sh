# Shared by the benchmarks that compare rbs and Slurm on NODES one-CPU
# nodes of this machine (gang-vs-slurm.sh, preempt-vs-slurm.sh); source it
# after setting NODES. On top of bench/lib.sh (whose cleanup also stops
# Slurm) it gives row (a line of the results table) and the two clusters:
# start_rbs [serve flags...] runs a server and NODES `rbs remote worker`
# processes and exports RBS_REMOTE; start_slurm CONF runs Slurm with NODES
# slurmd (n1..nN), CONF's lines replacing those of bench/slurm/start.sh,
# and exports SLURM_CONF.
command -v sbatch >/dev/null || { echo "slurm-wlm is not installed (apt-get install -y slurm-wlm)" >&2; exit 1; }
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cleanup_more() { "$root/bench/slurm/stop.sh" "$work/slurm" >/dev/null 2>&1; }
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

start_rbs() {
  local i
  start_server "$work/server.log" "$@"
  for i in $(seq "$NODES"); do start_worker "w$i" --cpus 1 --job-slots 1 --action-slots 1; done
}

start_slurm() {
  SLURM_CONF=$("$root/bench/slurm/start.sh" "$work/slurm" "$NODES" "$1" | tail -1)
  export SLURM_CONF
  [ "$(sinfo -h -N -o '%N %T' | sort -u | grep -c ' idle$')" -ge "$NODES" ] || { sinfo -N >&2; echo "Slurm's $NODES nodes are not up" >&2; exit 1; }
}
