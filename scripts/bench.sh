#!/usr/bin/env bash
# Benchmarks idemnode against etcd and Redis on this machine, in one
# invocation: a fresh local 3-node idemnode cluster per (mode, clients) run,
# driven by cmd/idembench, and beside each such run etcd (3 members) and
# Redis (1 node, appendfsync always) driven by bench-peers' run-etcd.sh and
# run-redis.sh with the same workload and settings (the systems take turns
# going first), then a markdown table of rates, server CPU per request and
# the ratios.
#
#   scripts/bench.sh                                           # 3 modes x 64, 16 clients, ~15 min with the peers
#   MODES=claim CLIENTS_LIST=64 DURATION=10s WARMUP=3s scripts/bench.sh
#   BENCH_ONLY=idemnode scripts/bench.sh                       # skip the peers
#   PEERS=redis CLIENTS_TO=leader scripts/bench.sh             # every client on the leader, beside Redis only
#
# Env: MODES ("claim claim+complete race"), CLIENTS_LIST ("64 16"), DURATION (20s),
#      WARMUP (5s), RESULTS_DIR (bench-results/<UTC stamp>), BENCH_ONLY (idemnode),
#      PEERS ("etcd redis"), BENCH_PEERS ($REPO/../shared/bench-peers),
#      NODE_IPS ("127.0.0.11 127.0.0.12 127.0.0.13"), NODES (3; 1 runs a
#      one-node cluster on the first address: the cost of one replica),
#      CLIENTS_TO (all: clients round-robin over every node, as in
#      production; leader: every client on the leader, so nothing is forwarded),
#      IDEMNODE_BIN (a server binary to run instead of this tree's build: the
#      previous release, to compare builds back to back),
#      IDEMBENCH_ARGS (extra idembench flags, e.g. "-conns 4"), SERVE_ARGS (extra
#      idemnode serve flags), PROFILE (1: a CPU profile of every node over each
#      measured window, cpu-<mode>-<clients>-node<i>.pprof in RESULTS_DIR).
# Server CPU per request is the server processes' CPU over the measured
# window (from /proc, summed over every node) divided by the requests
# answered in it; with PROFILE=1 the script ends with it split by part
# (gRPC, raft, log fsync, apply, store, GC, ...) from the node profiles:
# breakdown.md, or later: go run ./cmd/idembench -breakdown RESULTS_DIR.
# Results: idemnode.jsonl, etcd.jsonl, redis.jsonl, table.md, env.txt and each node's
# metrics after each run (metrics-<mode>-<clients>-node<i>.txt) in RESULTS_DIR. The
# script stops exactly the processes it started, on every exit path, and
# removes its data dirs. Exit 1 if a run failed or saw a race violation.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.env"
REPO=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/usr/local/go/bin:$PATH"

MODES=${MODES:-"claim claim+complete race"}
CLIENTS_LIST=${CLIENTS_LIST:-"64 16"}
DURATION=${DURATION:-20s}
WARMUP=${WARMUP:-5s}
RESULTS_DIR=${RESULTS_DIR:-$REPO/bench-results/$(date -u +%Y%m%dT%H%M%SZ)}
BENCH_ONLY=${BENCH_ONLY:-}
PEERS=${PEERS-"etcd redis"}
NODES=${NODES:-3}
CLIENTS_TO=${CLIENTS_TO:-all}
BENCH_PEERS=${BENCH_PEERS:-$REPO/../shared/bench-peers}
read -r -a IPS <<<"${NODE_IPS:-127.0.0.11 127.0.0.12 127.0.0.13}"
read -r -a EXTRA <<<"${IDEMBENCH_ARGS:-}"
read -r -a SERVE_EXTRA <<<"${SERVE_ARGS:-}"
PROFILE=${PROFILE:-}
[[ -n "$PROFILE" ]] && SERVE_EXTRA+=(--pprof)
PORTS=(7400 7401 7402 7403 7404) # gRPC, Raft, gossip, HTTP, JSON API on every node's IP

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { echo "bench.sh: $*" >&2; exit 2; }

for m in $MODES; do
	case $m in claim | claim+complete | race) ;; *) die "MODES: unknown mode '$m' (claim, claim+complete, race)" ;; esac
done
for c in $CLIENTS_LIST; do [[ $c =~ ^[1-9][0-9]*$ ]] || die "CLIENTS_LIST: '$c' is not a client count"; done
[[ -z $BENCH_ONLY || $BENCH_ONLY == idemnode ]] || die "BENCH_ONLY must be empty or idemnode, got '$BENCH_ONLY'"
((${#IPS[@]} == 3)) || die "NODE_IPS must name 3 addresses, got '${IPS[*]}'"
case $NODES in 1) IPS=("${IPS[0]}") ;; 3) ;; *) die "NODES must be 1 or 3, got '$NODES'" ;; esac
case $CLIENTS_TO in all | leader) ;; *) die "CLIENTS_TO must be all or leader, got '$CLIENTS_TO'" ;; esac
for p in $PEERS; do
	case $p in etcd | redis) ;; *) die "PEERS: unknown peer '$p' (etcd, redis)" ;; esac
done

# port_free IP PORT: true when nothing accepts TCP connections there.
port_free() { ! (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
for ip in "${IPS[@]}"; do
	for p in "${PORTS[@]}"; do
		port_free "$ip" "$p" || { echo "bench.sh: $ip:$p is already in use (a cluster.sh cluster? set NODE_IPS)" >&2; exit 1; }
	done
done

# Processes this script started: the nodes of the current cluster, the
# running idembench, and a peer's run-*.sh. cleanup stops exactly these.
NODE_PIDS=()
BENCH_PID=
PEER_PID=
WORK=$(mktemp -d /tmp/idembench.XXXXXX)

# stop_pid PID SECONDS: TERM, wait, then KILL.
stop_pid() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "pid $pid did not stop on TERM in $2 s, sending KILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

stop_nodes() {
	local pid
	# TERM all first, so the nodes leave together rather than one per 10 s.
	for pid in "${NODE_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${NODE_PIDS[@]}"; do stop_pid "$pid" 10; done
	NODE_PIDS=()
}

cleanup() {
	if [[ -n $BENCH_PID ]]; then stop_pid "$BENCH_PID" 10; fi
	# run-etcd.sh and run-redis.sh stop their own servers on TERM, after
	# the current load run; killing them sooner would orphan those, so they
	# get time.
	if [[ -n $PEER_PID ]]; then
		log "waiting for the peer's script ($PEER_PID) to stop its servers"
		stop_pid "$PEER_PID" 120
	fi
	stop_nodes
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "building idemnode and idembench into $WORK/bin"
(cd "$REPO" && go build -o "$WORK/bin/idemnode" ./cmd/idemnode && go build -o "$WORK/bin/idembench" ./cmd/idembench)
if [[ -n "${IDEMNODE_BIN:-}" ]]; then
	cp "$IDEMNODE_BIN" "$WORK/bin/idemnode" # another build of the server, e.g. the previous release, against the same client
	log "server binary: $IDEMNODE_BIN"
fi
# The JSON API's port on each node's IP; a build from before it has none.
API_PORT=
serve_help=$("$WORK/bin/idemnode" serve --help 2>&1 || true)
[[ $serve_help == *--api-addr* ]] && API_PORT=7404
mkdir -p "$RESULTS_DIR"
{
	echo "date: $(date -u +%FT%TZ)"
	echo "commit: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$REPO" diff --quiet 2>/dev/null || echo ' (dirty)')"
	echo "go: $(go version)"
	echo "cpus: $(nproc)"
	echo "kernel: $(uname -r)"
	echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "settings: MODES='$MODES' CLIENTS_LIST='$CLIENTS_LIST' DURATION=$DURATION WARMUP=$WARMUP NODE_IPS='${IPS[*]}' NODES=$NODES CLIENTS_TO=$CLIENTS_TO PEERS='$PEERS' IDEMBENCH_ARGS='${EXTRA[*]}'"
} >"$RESULTS_DIR/env.txt"

# start_cluster DIR: NODES nodes with empty data in DIR, waits until every
# node is ready (a leader is known and the node has caught up).
start_cluster() {
	local dir=$1 i j peers
	for i in "${!IPS[@]}"; do
		peers=()
		for j in "${!IPS[@]}"; do ((j == i)) || peers+=("${IPS[$j]}:7402"); done
		mkdir -p "$dir/node$((i + 1))"
		"$WORK/bin/idemnode" serve --node-id "node$((i + 1))" --data-dir "$dir/node$((i + 1))/data" \
			--grpc-addr "${IPS[$i]}:7400" --raft-addr "${IPS[$i]}:7401" --gossip-addr "${IPS[$i]}:7402" \
			--http-addr "${IPS[$i]}:7403" ${API_PORT:+--api-addr "${IPS[$i]}:$API_PORT"} --bootstrap-expect "$NODES" ${peers[0]:+--join "$(IFS=,; echo "${peers[*]}")"} \
			--log-level warn --insecure "${SERVE_EXTRA[@]}" >"$dir/node$((i + 1))/log" 2>&1 & # plaintext, like the etcd it is compared with
		NODE_PIDS+=($!)
	done
	local ready pid
	for _ in $(seq 1 600); do
		ready=0
		for i in "${!IPS[@]}"; do
			[[ $(curl -fsS -m 1 "http://${IPS[$i]}:7403/readyz" 2>/dev/null || true) == ready ]] && ready=$((ready + 1))
		done
		((ready == NODES)) && return 0
		for pid in "${NODE_PIDS[@]}"; do
			kill -0 "$pid" 2>/dev/null || { echo "idemnode pid $pid exited; logs:" >&2; tail -n 20 "$dir"/node*/log >&2; return 1; }
		done
		sleep 0.1
	done
	echo "idemnode cluster not ready after 60 s; logs:" >&2
	tail -n 20 "$dir"/node*/log >&2
	return 1
}

# profile_nodes MODE CLIENTS: after the warm-up, a CPU profile of every node
# over the measured window, taken in parallel.
profile_nodes() {
	local i secs=${DURATION%s} warm=${WARMUP%s}
	sleep "$warm"
	for i in "${!IPS[@]}"; do
		curl -fsS -m $((secs + 10)) -o "$RESULTS_DIR/cpu-$1-$2-node$((i + 1)).pprof" \
			"http://${IPS[$i]}:7403/debug/pprof/profile?seconds=$((secs - 1))" &
	done
}

# scrape_nodes MODE CLIENTS: every node's /metrics right after the measured
# window, into metrics-<mode>-<clients>-node<i>.txt; raft's timings in it
# (idemnode_raft_commitTime, _leader_dispatchLog, ...) cover its last 10 s.
scrape_nodes() {
	local i
	for i in "${!IPS[@]}"; do
		curl -fsS -m 5 -o "$RESULTS_DIR/metrics-$1-$2-node$((i + 1)).txt" "http://${IPS[$i]}:7403/metrics" || true
	done
}

# leader_addr: the gRPC address of the node that says it leads
# (idemnode_raft_state 2, hashicorp/raft's Leader).
leader_addr() {
	local i metrics
	for i in "${!IPS[@]}"; do
		metrics=$(curl -fsS -m 2 "http://${IPS[$i]}:7403/metrics" 2>/dev/null || true)
		if grep -qx 'idemnode_raft_state 2' <<<"$metrics"; then
			echo "${IPS[$i]}:7400"
			return 0
		fi
	done
	echo "bench.sh: no node says it leads" >&2
	return 1
}

# bench_one MODE CLIENTS: a fresh cluster, one idembench run, the cluster
# stopped and its data removed. Returns idembench's exit code.
bench_one() {
	local mode=$1 clients=$2 dir rc=0 addrs pids
	dir=$(mktemp -d "$WORK/run.XXXXXX")
	start_cluster "$dir" || { stop_nodes; rm -rf "$dir"; return 1; }
	local nodes="$NODES nodes"
	((NODES == 1)) && nodes="1 node"
	local label="$nodes, clients pinned round-robin"
	addrs=$(printf '%s:7400,' "${IPS[@]}")
	addrs=${addrs%,}
	if [[ $CLIENTS_TO == leader ]]; then
		addrs=$(leader_addr) || { stop_nodes; rm -rf "$dir"; return 1; }
		label="$nodes, every client on the leader"
	fi
	pids=$(IFS=,; echo "${NODE_PIDS[*]}")
	log "idemnode mode=$mode clients=$clients addrs=$addrs (server pids $pids)"
	# In the background so that a signal reaches our trap at once.
	"$WORK/bin/idembench" -addrs "$addrs" -mode "$mode" -clients "$clients" -duration "$DURATION" \
		-warmup "$WARMUP" -pids "$pids" -label "$label" \
		-out "$RESULTS_DIR/idemnode.jsonl" "${EXTRA[@]}" >/dev/null &
	BENCH_PID=$!
	[[ -n "$PROFILE" ]] && profile_nodes "$mode" "$clients"
	wait "$BENCH_PID" || rc=$?
	BENCH_PID=
	scrape_nodes "$mode" "$clients"
	log "idemnode data after run: $(du -sh "$dir" | cut -f1); log lines at WARN or above: $(cat "$dir"/node*/log | wc -l)"
	# The nodes log at WARN and above: kept always, since a node that died
	# mid-run shows only as idembench's errors.
	local n
	for n in "$dir"/node*; do
		mkdir -p "$RESULTS_DIR/logs/$mode-$clients"
		cp "$n/log" "$RESULTS_DIR/logs/$mode-$clients/$(basename "$n").log" 2>/dev/null || true
	done
	stop_nodes
	rm -rf "$dir"
	return "$rc"
}

# idemnode_row MODE CLIENTS and peer_row PEER MODE CLIENTS run one row of
# the table on one system; they set FAILED on a failure.
idemnode_row() {
	local rc=0
	bench_one "$1" "$2" || rc=$?
	case $rc in
	0) ;;
	3) log "RACE VIOLATION in idemnode mode=$1 clients=$2 (node logs in $RESULTS_DIR/logs)"; FAILED=1 ;;
	*) log "idemnode run mode=$1 clients=$2 failed (exit $rc)"; FAILED=1 ;;
	esac
}

# peer_row PEER MODE CLIENTS: bench-peers' run-PEER.sh, Redis with every
# write fsynced before its reply (appendfsync always), as idemnode's are.
peer_row() {
	local peer=$1 rc=0
	log "$peer mode=$2 clients=$3 via $BENCH_PEERS/run-$peer.sh"
	POLICIES=always MODES=$2 CLIENTS_LIST=$3 DURATION=$DURATION WARMUP=$WARMUP OUT="$RESULTS_DIR/$peer.jsonl" \
		"$BENCH_PEERS/run-$peer.sh" &
	PEER_PID=$!
	wait "$PEER_PID" || rc=$?
	PEER_PID=
	if ((rc != 0)); then log "run-$peer.sh mode=$2 clients=$3 failed (exit $rc)"; FAILED=1; fi
}

SYSTEMS=(idemnode)
if [[ $BENCH_ONLY == idemnode ]]; then
	log "BENCH_ONLY=idemnode: skipping the peers"
else
	for p in $PEERS; do
		if [[ -x $BENCH_PEERS/run-$p.sh ]]; then SYSTEMS+=("$p"); else log "no $BENCH_PEERS/run-$p.sh: skipping $p"; fi
	done
fi

# The systems take turns row by row, and which of them goes first rotates,
# so the machine's drift (its speed changed by a third within half an hour
# on 2026-11-26) falls on every side of every ratio instead of on one
# system's whole part of the run.
FAILED=0
row=0
for clients in $CLIENTS_LIST; do
	for mode in $MODES; do
		for ((k = 0; k < ${#SYSTEMS[@]}; k++)); do
			sys=${SYSTEMS[$(((row + k) % ${#SYSTEMS[@]}))]}
			if [[ $sys == idemnode ]]; then idemnode_row "$mode" "$clients"; else peer_row "$sys" "$mode" "$clients"; fi
		done
		row=$((row + 1))
	done
done

tables=("$RESULTS_DIR/idemnode.jsonl")
for p in "${SYSTEMS[@]:1}"; do
	[[ -s $RESULTS_DIR/$p.jsonl ]] && tables+=("$RESULTS_DIR/$p.jsonl")
done

if [[ -s $RESULTS_DIR/idemnode.jsonl ]]; then
	echo
	"$WORK/bin/idembench" -table "${tables[@]}" | tee "$RESULTS_DIR/table.md"
	echo
fi
if [[ -n $PROFILE && -s $RESULTS_DIR/idemnode.jsonl ]]; then
	"$WORK/bin/idembench" -breakdown "$RESULTS_DIR" | tee "$RESULTS_DIR/breakdown.md" || FAILED=1
	echo
fi
log "results in $RESULTS_DIR (machine: $(nproc) cores shared by the load generator and every server; see cpu in the JSON lines)"
exit "$FAILED"
