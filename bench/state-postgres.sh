#!/usr/bin/env bash
# Benchmarks the batch scheduler's state on PostgreSQL against SQLite, and
# failover between two servers on one PostgreSQL state, on this machine:
#   (a) submissions per second: N single jobs from C concurrent submitters
#       in one process (bench/jobsubmit -nowait), acknowledged (so durable),
#       on a server with SQLite and on one with PostgreSQL (fsync on, as
#       shipped), R runs each, alternating; the ratio PostgreSQL/SQLite;
#   (b) failover time: SIGKILL of the active server until the first job
#       submitted after it (through the list of both servers) starts on
#       the new active one, median of F takeovers, alternating which
#       server is killed;
#   (c) state load time on takeover with 100,000 and 1,000,000 jobs in the
#       database (arrays of 100,000 pending tasks): the time from taking
#       the lease to serving, as the server logs it.
# Needs PostgreSQL (Debian's postgresql) and root (initdb runs as the
# postgres user).
#
#   bench/state-postgres.sh [N] [C] [R] [F]
set -euo pipefail
N=${1:-2000}
C=${2:-32}
R=${3:-3}
F=${4:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/rbs-bench-state.XXXXXX)
chmod 755 "$work"
pids=()
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$pgbin/initdb" ] || { echo "PostgreSQL is not installed (apt-get install -y postgresql)" >&2; exit 1; }
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  runuser -u postgres -- "$pgbin/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1 || true
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f\n", a-b}'; }
median() { sort -n | awk '{a[NR]=$1} END {printf "%.3f\n", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

(cd "$root" && go build -o "$work/rbs" ./cmd/rbs && go build -o "$work/jobsubmit" ./bench/jobsubmit)
rbs=$work/rbs

# ---- PostgreSQL, as shipped (fsync on), on a free port ----
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir "$work/pg" "$work/pgrun" && chown postgres "$work/pg" "$work/pgrun"
runuser -u postgres -- "$pgbin/initdb" -D "$work/pg" -U rbs --auth=trust >/dev/null
runuser -u postgres -- "$pgbin/pg_ctl" -D "$work/pg" -l "$work/pgrun/server.log" -w -o "-p $port -k $work/pgrun -h 127.0.0.1 -c max_connections=200" start >/dev/null
# newdb NAME creates a database and prints its address.
newdb() { "$pgbin/psql" -q -h 127.0.0.1 -p "$port" -U rbs -d postgres -c "CREATE DATABASE $1" >/dev/null; echo "postgres://rbs@127.0.0.1:$port/$1?sslmode=disable"; }

# serve LOG ARGS... starts a server, waits until it listens, sets $addr.
serve() {
  local log=$1; shift
  "$rbs" remote serve --listen 127.0.0.1:0 "$@" 2> "$log" &
  pids+=($!); spid=$!
  addr=
  for _ in $(seq 600); do
    addr=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$log"); [ -n "$addr" ] && break; sleep 0.05
  done
  [ -n "$addr" ] || { cat "$log" >&2; exit 1; }
}
waitlog() { for _ in $(seq 2400); do grep -q "$2" "$1" && return; sleep 0.025; done; echo "no '$2' in $1" >&2; cat "$1" >&2; exit 1; }

# ---- (a) submissions per second ----
for r in $(seq "$R"); do
  for side in sqlite postgres; do
    args=(--data-dir "$work/data-$side-$r")
    [ $side = postgres ] && args+=(--state "$(newdb "a$r")")
    serve "$work/a-$side-$r.log" "${args[@]}"
    if [ $side = postgres ]; then waitlog "$work/a-$side-$r.log" "took the lease"; fi
    t=$(RBS_REMOTE=$addr "$work/jobsubmit" -n "$N" -c "$C" -nowait)
    awk -v n="$N" -v t="$t" 'BEGIN{printf "%.1f\n", n/t}' >> "$work/rate_$side"
    kill "$spid"; wait "$spid" 2>/dev/null || true
  done
done
sq=$(median < "$work/rate_sqlite"); pq=$(median < "$work/rate_postgres")

# ---- (b) failover time ----
state=$(newdb failover)
serve "$work/b1.log" --data-dir "$work/b1" --state "$state"; a=$addr; apid=$spid
waitlog "$work/b1.log" "took the lease"
serve "$work/b2.log" --data-dir "$work/b2" --state "$state"; b=$addr; bpid=$spid
waitlog "$work/b2.log" "standing by: forwarding"
export RBS_REMOTE=$a,$b
"$rbs" remote worker --name w1 --work-dir "$work/w1" --cpus 8 --job-slots 8 2> "$work/worker.log" &
pids+=($!)
waitlog "$work/worker.log" registered
logs=("$work/b1.log" "$work/b2.log"); addrs=("$a" "$b"); spids=("$apid" "$bpid"); active=0
for i in $(seq "$F"); do
  "$rbs" job wait "$("$rbs" job submit --parsable -- true)" >/dev/null
  other=$((1-active))
  before=$(grep -c "took the lease" "${logs[$other]}" || true)
  t0=$(now)
  kill -KILL "${spids[$active]}"; wait "${spids[$active]}" 2>/dev/null || true
  id=$("$rbs" job submit --parsable -- sh -c 'date +%s.%N')
  "$rbs" job wait "$id" >/dev/null
  sub "$("$rbs" job logs "$id")" "$t0" >> "$work/failover"
  # The killed server comes back as the standby.
  log=${logs[$active]}.$i
  serve "$log" --listen "${addrs[$active]}" --data-dir "$work/b$((active+1))" --state "$state"
  spids[$active]=$spid; logs[$active]=$log
  waitlog "$log" "standing by: forwarding"
  active=$other
done
fo=$(median < "$work/failover")
unset RBS_REMOTE

# ---- (c) state load time on takeover ----
loadtime() { sed -n 's/.*loaded the shared state.*took=\([0-9.]*\)\(m\?s\).*/\1 \2/p' "$1" | tail -1 | awk '{printf "%.3f\n", ($2=="ms") ? $1/1000 : $1}'; }
state=$(newdb load)
serve "$work/c.log" --data-dir "$work/c" --state "$state"; cpid=$spid
waitlog "$work/c.log" "took the lease"
declare -A load
total=0
for want in 100000 1000000; do
  while [ $total -lt $want ]; do
    RBS_REMOTE=$addr "$rbs" job submit --parsable --array 0-99999 --constraint never=here -- true >/dev/null
    total=$((total+100000))
  done
  kill -KILL "$cpid"; wait "$cpid" 2>/dev/null || true
  serve "$work/c-$want.log" --data-dir "$work/c" --state "$state"; cpid=$spid
  waitlog "$work/c-$want.log" "loaded the shared state"
  load[$want]=$(loadtime "$work/c-$want.log")
done

printf '%-58s %10s\n' "measure" "value"
printf '%-58s %10s\n' "(a) submissions/s, SQLite (median of $R, $N jobs, $C at once)" "$sq"
printf '%-58s %10s\n' "(a) submissions/s, PostgreSQL (same)" "$pq"
printf '%-58s %10s\n' "(a) PostgreSQL / SQLite" "$(awk -v p="$pq" -v s="$sq" 'BEGIN{printf "%.2f", p/s}')"
printf '%-58s %10s\n' "(b) failover: kill -> first job started, s (median of $F)" "$fo"
printf '%-58s %10s\n' "(c) takeover load time, 100,000 jobs, s" "${load[100000]}"
printf '%-58s %10s\n' "(c) takeover load time, 1,000,000 jobs, s" "${load[1000000]}"
