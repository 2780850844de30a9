#!/usr/bin/env bash
# Benchmarks staging a job's inputs through the rbs CAS against copying the
# same tree with rsync and reading it with tar, in the same run, on this
# machine:
#   - a tree of NFILES files totalling SIZE_MB MiB: 100 files share about 96%
#     of the size, the rest are small files of equal size in 99 directories
#     (random content from /dev/urandom);
#   - rbs cold: `rbs job submit --inputs tree=DIR -- true` on a fresh cluster
#     (a new server data dir and a new worker): the client hashes the tree,
#     asks FindMissingBlobs and uploads; timed for the submit command alone and
#     until `rbs job wait` returns (so the worker's fetch and staging count);
#   - rbs one-file-changed: one small file rewritten, submitted again to the
#     same cluster (only that blob and its directories upload);
#   - rsync cold: `rsync -a DIR/ DEST/` into a new directory; rsync
#     one-file-changed: the same command again after one small file changed;
#   - tar: `tar -cf - -C DIR . | cat > /dev/null` (reading the tree once);
#   - sha256sum: `find DIR -type f -print0 | xargs -0 sha256sum` (hashing the
#     tree once, one file after another, what the client does before it asks the
#     cluster anything).
# Each round alternates which side goes first; the table shows the median of
# ROUNDS rounds and the ratios rbs/rsync and rbs/tar (below 1: rbs is faster).
# The tree is in the page cache for every side; `sync` runs (untimed) between
# measurements. Needs rsync (apt-get install -y rsync). RBS=BINARY uses a
# built rbs instead of building this tree.
#
#   bench/stage-vs-rsync.sh [SIZE_MB] [NFILES] [ROUNDS]      (default 1024 10000 3)
#
# Figures (a shared 2-core machine, page cache warm, rbs at f55d319;
# `bench/stage-vs-rsync.sh 1024 10000 3`: 10,000 files, 1024.4 MiB, 100 files
# of 9.8 MiB and 9,900 of 4.2 KiB; medians of 3 rounds, seconds):
#                                        seconds  rbs/rsync  rbs/tar
#   rbs cold, submit                      5.741      1.90     8.74
#   rbs cold, until COMPLETED             9.304      3.08    14.16
#   rbs one file changed, submit          0.172      1.74     0.26
#   rbs one file changed, COMPLETED       0.457      4.62     0.70
#   rsync -a cold                         3.016
#   rsync -a one file changed             0.099
#   tar -cf - | cat                       0.657
#   sha256sum of every file               4.705
# rbs uploaded 10,000 files (1024.0 MiB) and 102 directories cold, and 1 file
# (4.2 KiB) and 3 directories with one file changed (9,999 files already on
# the cluster). With one file changed the client hashes only that file: the
# digests of unchanged files (same inode, size and mtime) carry over from the
# last submission, so it compares metadata as rsync does. (At 01a03a6, before
# that, the one-file-changed submit took 1.14 s, 12.4-13.0x rsync's.)
set -euo pipefail
SIZE_MB=${1:-1024}
NFILES=${2:-10000}
ROUNDS=${3:-3}
NBIG=100
NDIRS=99
command -v rsync >/dev/null || { echo "rsync is not installed (apt-get install -y rsync)" >&2; exit 1; }
[ "$NFILES" -gt "$NBIG" ] || { echo "NFILES must be above $NBIG" >&2; exit 2; }
# RBS=/path/to/rbs uses that binary instead of building this tree's.
. "$(dirname "$0")/lib.sh"
stop_cluster() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
export XDG_CACHE_HOME=$work/cache

# ---- the tree ----
tree=$work/tree
nsmall=$((NFILES - NBIG))
small_total=$((SIZE_MB * 1048576 * 4 / 100))
small_size=$((small_total / nsmall)); [ "$small_size" -gt 0 ] || small_size=1
big_size=$(((SIZE_MB * 1048576 - small_size * nsmall) / NBIG))
mkdir -p "$tree/big"
head -c $((big_size * NBIG)) /dev/urandom | split -b "$big_size" -a 3 -d - "$tree/big/b"
per=$(((nsmall + NDIRS - 1) / NDIRS)); left=$nsmall; d=0
while [ "$left" -gt 0 ]; do
  k=$((left < per ? left : per))
  mkdir -p "$tree/s$d"
  head -c $((small_size * k)) /dev/urandom | split -b "$small_size" -a 3 -d - "$tree/s$d/f"
  left=$((left - k)); d=$((d + 1))
done
files=$(find "$tree" -type f | wc -l)
bytes=$(du -sb "$tree" | cut -f1)
echo "tree: $files files, $(awk -v b="$bytes" 'BEGIN{printf "%.1f MiB", b/1048576}') ($NBIG of $big_size B, $nsmall of $small_size B)"
cat "$tree"/*/* > /dev/null   # in the page cache for every side
change=0
change_one() { change=$((change + 1)); head -c "$small_size" /dev/urandom > "$tree/s0/f000"; }

# ---- one cluster per round: a fresh server data dir and worker ----
start_cluster() {
  local r=$1
  start_server "$work/server$r.log" --data-dir "$work/data$r"
  start_worker "w$r" --cpus 4 --job-slots 4 --action-slots 2
}
finish() { stop_cluster; rm -rf "$work/data$1" "$work/w$1"; }

# rbs_submit KIND ROUND: submit, then wait; records the two times and the upload line.
rbs_submit() {
  local kind=$1 r=$2 t0 t1 id
  sync
  t0=$(now)
  id=$("$rbs" job submit --parsable --inputs "tree=$tree" -- true 2> "$work/submit.err")
  t1=$(now)
  "$rbs" job wait "$id" > "$work/wait.out" 2>&1 || { echo "job $id did not complete:" >&2; cat "$work/wait.out" >&2; exit 1; }
  echo "$(sub "$t1" "$t0")" >> "$work/rbs_${kind}_submit"
  echo "$(sub "$(now)" "$t0")" >> "$work/rbs_${kind}_done"
  grep '^rbs: inputs' "$work/submit.err" > "$work/rbs_${kind}_line" || { cat "$work/submit.err" >&2; exit 1; }
  echo "  round $r rbs $kind: submit $(tail -1 "$work/rbs_${kind}_submit") s, completed $(tail -1 "$work/rbs_${kind}_done") s; $(cat "$work/rbs_${kind}_line")"
}
rsync_copy() {
  local kind=$1 r=$2 t0
  sync
  t0=$(now)
  rsync -a "$tree/" "$work/dest/"
  echo "$(sub "$(now)" "$t0")" >> "$work/rsync_$kind"
  echo "  round $r rsync $kind: $(tail -1 "$work/rsync_$kind") s"
}
tar_read() {
  local r=$1 t0
  sync
  t0=$(now)
  tar -cf - -C "$tree" . | cat > /dev/null
  echo "$(sub "$(now)" "$t0")" >> "$work/tar"
  echo "  round $r tar: $(tail -1 "$work/tar") s"
}
hash_read() {
  local r=$1 t0
  sync
  t0=$(now)
  find "$tree" -type f -print0 | xargs -0 sha256sum > /dev/null
  echo "$(sub "$(now)" "$t0")" >> "$work/sha"
  echo "  round $r sha256sum: $(tail -1 "$work/sha") s"
}
rbs_side() { start_cluster "$1"; rbs_submit cold "$1"; change_one; rbs_submit warm "$1"; finish "$1"; }
peer_side() { rm -rf "$work/dest"; rsync_copy cold "$1"; change_one; rsync_copy warm "$1"; rm -rf "$work/dest"; tar_read "$1"; hash_read "$1"; }

for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then rbs_side "$r"; peer_side "$r"; else peer_side "$r"; rbs_side "$r"; fi
done

m() { median < "$work/$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }
rc=$(m rsync_cold); rw=$(m rsync_warm); tr=$(m tar); sh=$(m sha)
echo
echo "tree: $files files, $(awk -v b="$bytes" 'BEGIN{printf "%.1f MiB", b/1048576}'); median of $ROUNDS rounds; seconds"
printf '%-44s %9s %10s %8s\n' "measurement" "seconds" "rbs/rsync" "rbs/tar"
for kind in cold warm; do
  peer=$rc; label="cold (fresh cluster)"; [ $kind = warm ] && { peer=$rw; label="one file changed"; }
  s=$(m rbs_${kind}_submit); d=$(m rbs_${kind}_done)
  printf '%-44s %9s %10s %8s\n' "rbs $label: submit" "$s" "$(ratio "$s" "$peer")" "$(ratio "$s" "$tr")"
  printf '%-44s %9s %10s %8s\n' "rbs $label: until COMPLETED" "$d" "$(ratio "$d" "$peer")" "$(ratio "$d" "$tr")"
done
printf '%-44s %9s\n' "rsync -a cold (new directory)" "$rc"
printf '%-44s %9s\n' "rsync -a one file changed" "$rw"
printf '%-44s %9s\n' "tar -cf - | cat > /dev/null" "$tr"
printf '%-44s %9s\n' "sha256sum of every file (sequential)" "$sh"
echo "what rbs sent (last round):"
echo "  cold: $(cat "$work/rbs_cold_line")"
echo "  one file changed: $(cat "$work/rbs_warm_line")"
