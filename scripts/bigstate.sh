#!/usr/bin/env bash
# Large-state measurements of the on-disk store, on demand (never in CI: it
# writes tens of GB at 30 M records and deletes them at the end).
#
#   RECORDS=1000000 scripts/bigstate.sh           # one node, 1 M records
#   RECORDS=5000000 REJOIN=1 scripts/bigstate.sh  # and two followers that join by InstallSnapshot
#
# Steps, each timed and printed as "key: value" lines (also in $WORK/results.txt):
#  1. cmd/idemgen writes a backup stream of RECORDS completed records (512-byte bodies), or
#     BACKUP names one it wrote before (kept, so runs that compare builds skip this step);
#  2. `idemnode snapshot restore` seeds node 1 with it (records/s), bytes on disk per record;
#  3. node 1 serves inside a memory cgroup of MEM bytes (page cache included), so the disk is
#     not hidden by 24 GiB of RAM: time to serving, RSS and the cgroup's usage;
#  4. idembench claim+complete for LOAD_SECONDS: claims/s, p99, RSS after, the time of each
#     snapshot persist (a memtable flush) from the node's metrics;
#  5. kill -9 and restart: time from start to serving again;
#  6. with REJOIN=1: node 2, then node 3, join empty and catch up by InstallSnapshot: records/s
#     from its start to an equal digest;
#  7. the apply cost per command on node 1's store (store's BenchmarkApplyOnStore), in its cgroup;
#  8. with EXPIRE=1: every record expires at once, deleted by Expire entries of 1 000 until the
#     store is empty (BenchmarkExpireAll): the time per entry, first tenth against last.
# Env: RECORDS (1000000; with BACKUP, the records it holds), BACKUP (none), BODY (response bytes, 512), EXPIRE (0), MEM (1G, per node), APPLY_COMMANDS (128000), LOAD_SECONDS (30), CLIENTS (64), REJOIN (0), WORK (a
#      fresh dir under /var/tmp), IPS ("127.0.0.21 127.0.0.22 127.0.0.23"), KEEP (1: keep $WORK).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.env"
REPO=$(cd "$(dirname "$0")/.." && pwd)
RECORDS=${RECORDS:-1000000}
MEM=${MEM:-1G}
LOAD_SECONDS=${LOAD_SECONDS:-30}
CLIENTS=${CLIENTS:-64}
REJOIN=${REJOIN:-0}
WORK=${WORK:-$(mktemp -d /var/tmp/idemnode-bigstate.XXXXXX)}
read -r -a IPS <<<"${IPS:-127.0.0.21 127.0.0.22 127.0.0.23}"
CG=/sys/fs/cgroup/memory/idemnode-bigstate-$$ # one memory cgroup per node below it
PIDS=()

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
result() { printf '%s: %s\n' "$1" "$2" | tee -a "$WORK/results.txt"; }
cleanup() {
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	sleep 0.5
	for d in "$CG"/n*; do [[ -d $d ]] && rmdir "$d" 2>/dev/null || true; done
	[[ -d $CG ]] && rmdir "$CG" 2>/dev/null || true
	[[ ${KEEP:-} == 1 ]] || rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$WORK/bin"
# Static, like the release: without cgo, Pebble's cache and memtables sit on the Go heap,
# where a build with cgo would keep them in C memory.
(cd "$REPO" && export CGO_ENABLED=0 && go build -o "$WORK/bin/idemnode" ./cmd/idemnode &&
	go build -o "$WORK/bin/idemgen" ./cmd/idemgen && go build -o "$WORK/bin/idembench" ./cmd/idembench &&
	go test -c -o "$WORK/bin/store.test" ./store) # all built at once: the tree may change during a long run
BIN=$WORK/bin
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
peak_kb() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; } # the most RSS the process has had

mkdir "$CG"
for i in 1 2 3; do
	mkdir "$CG/n$i"
	numfmt --from=iec "$MEM" >"$CG/n$i/memory.limit_in_bytes"
done

backup=${BACKUP:-$WORK/backup.snap}
if [[ -z ${BACKUP:-} ]]; then
	log "generating $RECORDS records"
	t=$(now)
	"$BIN/idemgen" -records "$RECORDS" -body "${BODY:-512}" -out "$backup" | tee -a "$WORK/results.txt"
	result generate_seconds "$(since "$t")"
fi
result backup_bytes "$(stat -c %s "$backup")"

log "restoring into node 1"
t=$(now)
"$BIN/idemnode" snapshot restore "$backup" --data-dir "$WORK/n1" --node-id n1 --raft-addr "${IPS[0]}:7401" -o json >"$WORK/restore.json"
secs=$(since "$t")
result restore_seconds "$secs"
result restore_records_per_second "$(echo "$RECORDS / $secs" | bc)"
[[ -n ${BACKUP:-} ]] || rm -f "$backup"
sync
disk=$(du -sb "$WORK/n1/fsm" | cut -f1)
result store_bytes "$disk"
result store_bytes_per_record "$(echo "$disk / $RECORDS" | bc)"

serve() { # node index, extra flags...; the node's pid is in PIDS[-1] (call it in this shell)
	local i=$1
	shift
	local ip=${IPS[$((i - 1))]}
	mkdir -p "$WORK/n$i"
	sh -c "echo \$\$ > $CG/n$i/cgroup.procs; exec $BIN/idemnode serve --node-id n$i --data-dir $WORK/n$i --dev \
		--grpc-addr $ip:7400 --raft-addr $ip:7401 --gossip-addr $ip:7402 --http-addr $ip:7403 --api-addr $ip:7404 \
		--gossip-profile local --log-level warn --snapshot-threshold 1024 --snapshot-interval 5s --pprof $*" >>"$WORK/n$i.log" 2>&1 &
	PIDS+=($!)
}
serving() { # waits until the node at ip answers a linearizable read (exit 1: not found, served)
	local ip=$1 deadline=$((SECONDS + 600)) rc
	while :; do
		rc=0
		"$BIN/idemnode" get --addr "$ip:7400" --timeout 2s --tenant t --scope s --key probe >/dev/null 2>&1 || rc=$?
		((rc == 0 || rc == 1)) && return
		((SECONDS < deadline)) || { echo "bigstate.sh: $ip did not serve (exit $rc)" >&2; exit 1; }
		sleep 0.05
	done
}

log "starting node 1 in a $MEM memory cgroup"
t=$(now)
serve 1
pid=${PIDS[-1]}
serving "${IPS[0]}"
result start_to_serving_seconds "$(since "$t")"
result rss_idle_mib "$(($(rss_kb "$pid") / 1024))"
grep -E '^(RssAnon|RssFile)' "/proc/$pid/status" | tr -s ' \t' ' ' | tee -a "$WORK/results.txt"
result cgroup_usage_idle_mib "$(($(cat "$CG/n1/memory.usage_in_bytes") / 1048576))"

log "claim+complete load for ${LOAD_SECONDS}s"
"$BIN/idembench" -addrs "${IPS[0]}:7400" -mode claim+complete -clients "$CLIENTS" -duration "${LOAD_SECONDS}s" \
	-warmup 3s -out "$WORK/load.jsonl" 2>"$WORK/load.txt" || true
tail -3 "$WORK/load.txt" | tee -a "$WORK/results.txt"
result rss_after_load_mib "$(($(rss_kb "$pid") / 1024))"
result rss_peak_mib "$(($(peak_kb "$pid") / 1024))"
result cgroup_max_usage_mib "$(($(cat "$CG/n1/memory.max_usage_in_bytes") / 1048576))"
curl -s "http://${IPS[0]}:7403/metrics" |
	grep -E '^(idemnode_(snapshot_persist_seconds_(sum|count)|store_disk_bytes|records_completed|store_l0_files|store_read_amplification|store_(block_cache|memtable)_bytes|store_memtables)|go_memstats_(sys|heap_inuse|heap_alloc|next_gc)_bytes)[ {]' |
	tee -a "$WORK/results.txt"
# What holds the memory: the Go heap's live objects by allocation site, after the load.
curl -s -o "$WORK/heap.pprof" "http://${IPS[0]}:7403/debug/pprof/heap" &&
	go tool pprof -top -inuse_space "$BIN/idemnode" "$WORK/heap.pprof" 2>/dev/null | sed -n '4,16p' | tee -a "$WORK/results.txt" || true
[[ -z ${HEAP_OUT:-} ]] || cp "$WORK/heap.pprof" "$HEAP_OUT"

log "kill -9 and restart"
kill -9 "$pid"
sleep 0.5
t=$(now)
serve 1
pid=${PIDS[-1]}
serving "${IPS[0]}"
result restart_to_serving_seconds "$(since "$t")"

# rejoin I: node I joins with an empty data dir and catches up by InstallSnapshot;
# prints the time from its start to an equal record count and digest.
rejoin() {
	local i=$1 ip=${IPS[$(($1 - 1))]} want digest t secs
	want=$("$BIN/idemnode" status --addr "${IPS[0]}:7400" -o json | sed -n 's/.*"records": *\([0-9]*\).*/\1/p')
	digest=$("$BIN/idemnode" status --addr "${IPS[0]}:7400" -o json | sed -n 's/.*"digest": *"\([0-9a-f]*\)".*/\1/p')
	t=$(now)
	serve "$i" --join "${IPS[0]}:7402"
	local deadline=$((SECONDS + 1800))
	until "$BIN/idemnode" status --addr "$ip:7400" -o json 2>/dev/null | grep -q "\"digest\": *\"$digest\""; do
		((SECONDS < deadline)) || { echo "bigstate.sh: $ip did not catch up" >&2; exit 1; }
		sleep 0.1
	done
	secs=$(since "$t")
	result "rejoin_n${i}_seconds" "$secs"
	result "rejoin_n${i}_records_per_second" "$(echo "$want / $secs" | bc)"
	result "rejoin_n${i}_rss_mib" "$(($(rss_kb "${PIDS[-1]}") / 1024))"
}

if [[ $REJOIN == 1 ]]; then
	log "node 2, then node 3, join empty and catch up by InstallSnapshot"
	rejoin 2
	rejoin 3
fi
log "apply cost on node 1's store, inside its memory limit"
kill -9 "$pid"
sleep 0.5
sh -c "echo \$\$ > $CG/n1/cgroup.procs; exec env IDEMNODE_BENCH_STORE=$WORK/n1/fsm IDEMNODE_BENCH_RECORDS=$RECORDS \
	$BIN/store.test -test.run '^$' -test.bench ApplyOnStore -test.benchtime ${APPLY_COMMANDS:-128000}x" |
	grep -E '^Benchmark' | tee -a "$WORK/results.txt"
if [[ ${EXPIRE:-0} == 1 ]]; then
	log "every record expires: Expire entries of 1000 until the store is empty"
	sh -c "echo \$\$ > $CG/n1/cgroup.procs; exec env IDEMNODE_BENCH_STORE=$WORK/n1/fsm \
		$BIN/store.test -test.run '^$' -test.bench ExpireAll -test.benchtime 1x -test.timeout 60m" |
		grep -E '^Benchmark' | tee -a "$WORK/results.txt"
fi
log "done: $WORK/results.txt"
cat "$WORK/results.txt" >"${RESULTS_OUT:-/dev/null}"
