#!/usr/bin/env bash
# Benchmarks a Bazel build served entirely from rbs's remote cache, in the
# same run, on three servers:
#   disk      the default disk CAS and action cache;
#   s3 warm   --cas/--ac cache(disk, s3://...) whose disks hold the results;
#   s3 cold   the same chain on a server with empty disks, so every blob
#             comes from the bucket (what a server that takes over sees);
# with an S3 server (Ceph radosgw, bench/s3server) on this machine. The
# workspace has G genrules of S bytes each. Each side is timed R times
# (bazel clean, then a build that is all remote cache hits), alternating;
# it prints the medians and each side's time over the disk's.
# Needs Debian's bazel-bootstrap and ceph-mon, ceph-osd, radosgw.
#
#   bench/s3cache-vs-disk.sh [G] [S] [R]
set -euo pipefail
G=${1:-200}
S=${2:-100000}
R=${3:-3}
source "$(dirname "$0")/bazel.sh"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; cleanup' EXIT
median() { sort -n | awk '{a[NR]=$1} END {printf "%.2f\n", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

(cd "$root" && go build -o "$work/s3server" ./bench/s3server)
mkdir "$work/s3"
"$work/s3server" "$work/s3" > "$work/s3.env" 2> "$work/s3.log" &
pids+=($!)
for _ in $(seq 1200); do [ -s "$work/s3.env" ] && break; sleep 0.05; done
[ -s "$work/s3.env" ] || { cat "$work/s3.log" >&2; exit 1; }
eval "export $(cat "$work/s3.env")"
remote="s3://$S3_BUCKET/bench?endpoint=$S3_ENDPOINT&region=$S3_REGION"

# serve NAME ARGS... starts a server and sets ${addr[NAME]}.
declare -A addr spid
serve() {
  local name=$1; shift
  "$work/rbs" remote serve --listen 127.0.0.1:0 --data-dir "$work/data-$name" "$@" 2> "$work/$name.log" &
  pids+=($!); spid[$name]=$!
  for _ in $(seq 600); do
    addr[$name]=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$work/$name.log"); [ -n "${addr[$name]}" ] && return; sleep 0.05
  done
  cat "$work/$name.log" >&2; exit 1
}
chain() { echo "cache(disk:$work/data-$1/$2-cache,$remote)"; }

mkdir -p "$work/bazel"
touch "$work/bazel/WORKSPACE"
for i in $(seq "$G"); do
  printf 'genrule(name = "g%d", outs = ["g%d.txt"], cmd = "(echo rule %d; head -c %d /dev/zero) > $@")\n' "$i" "$i" "$i" "$S"
done > "$work/bazel/BUILD"
echo 'build --nosandbox_debug' > "$work/bazel/.bazelrc"

serve disk
serve warm --cas "$(chain warm cas)" --ac "$(chain warm ac)"
build() { bz clean >/dev/null 2>&1; local t0; t0=$(now); bz build --remote_cache="grpc://$1" //... > "$work/last.out" 2>&1 || { cat "$work/last.out" >&2; exit 1; }; sub "$(now)" "$t0"; }
# Fill both caches (and the bucket) once.
build "${addr[disk]}" >/dev/null
build "${addr[warm]}" >/dev/null
for r in $(seq "$R"); do
  build "${addr[disk]}" >> "$work/t_disk"
  grep -q "$G remote cache hit" "$work/last.out" || { cat "$work/last.out" >&2; exit 1; }
  build "${addr[warm]}" >> "$work/t_warm"
  grep -q "$G remote cache hit" "$work/last.out" || { cat "$work/last.out" >&2; exit 1; }
  serve "cold$r" --cas "$(chain "cold$r" cas)" --ac "$(chain "cold$r" ac)"
  build "${addr[cold$r]}" >> "$work/t_cold"
  grep -q "$G remote cache hit" "$work/last.out" || { cat "$work/last.out" >&2; exit 1; }
  kill "${spid[cold$r]}"
done
d=$(median < "$work/t_disk"); w=$(median < "$work/t_warm"); c=$(median < "$work/t_cold")
printf '%-52s %8s %8s\n' "all-cache-hit build of $G x $S B genrules (median of $R)" "s" "/disk"
printf '%-52s %8s %8s\n' "disk" "$d" "1.00"
printf '%-52s %8s %8s\n' "cache(disk, s3), disks warm" "$w" "$(awk -v a="$w" -v b="$d" 'BEGIN{printf "%.2f", a/b}')"
printf '%-52s %8s %8s\n' "cache(disk, s3), empty disks (all from the bucket)" "$c" "$(awk -v a="$c" -v b="$d" 'BEGIN{printf "%.2f", a/b}')"
