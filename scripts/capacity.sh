#!/usr/bin/env bash
# Capacity over time: a fresh 3-node cluster under claim+complete load (fresh keys,
# 512-byte responses, 24 h TTL, so every record stays) for DURATION, measured in
# windows of WINDOW. After each window it prints the records held, claims/s and p99 of the
# window, each node's RSS, and node 1's store at the window's end: bytes on disk, read
# amplification (the sorted runs a lookup may look in) and compaction debt. What it checks:
# claims/s in the last window within 10 % of the first, and RSS flat (records pile up on
# disk, not in memory). On demand, not in CI.
#
#   scripts/capacity.sh                              # 10 minutes in 1-minute windows
#   DURATION=20m WINDOW=2m CLIENTS=64 scripts/capacity.sh
#
# Env: DURATION (10m), WINDOW (1m), CLIENTS (64), IPS ("127.0.0.31 127.0.0.32 127.0.0.33"),
#      SERVE_ARGS (extra serve flags), RESULTS (capacity-<stamp>.txt in bench-results/).
# Exit 1 when the last window's claims/s is more than 10 % below the first's.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.env"
REPO=$(cd "$(dirname "$0")/.." && pwd)
DURATION=${DURATION:-10m}
WINDOW=${WINDOW:-1m}
CLIENTS=${CLIENTS:-64}
read -r -a IPS <<<"${IPS:-127.0.0.31 127.0.0.32 127.0.0.33}"
read -r -a SERVE_EXTRA <<<"${SERVE_ARGS:-}"
mkdir -p "$REPO/bench-results"
RESULTS=${RESULTS:-$REPO/bench-results/capacity-$(date -u +%Y%m%dT%H%M%SZ).txt}
WORK=$(mktemp -d /var/tmp/idemnode-capacity.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
secs() { local d=$1; case $d in *m) echo $((${d%m} * 60)) ;; *s) echo "${d%s}" ;; *) echo "$d" ;; esac; }
total=$(secs "$DURATION")
win=$(secs "$WINDOW")
((total >= win && win > 0)) || { echo "capacity.sh: DURATION must be at least WINDOW" >&2; exit 2; }

(cd "$REPO" && go build -o "$WORK/idemnode" ./cmd/idemnode && go build -o "$WORK/idembench" ./cmd/idembench)
API_PORT=7404 # the JSON API, on each node's IP
for i in 0 1 2; do
	peers=()
	for j in 0 1 2; do ((j == i)) || peers+=("${IPS[$j]}:7402"); done
	"$WORK/idemnode" serve --node-id "node$((i + 1))" --data-dir "$WORK/node$((i + 1))" \
		--grpc-addr "${IPS[$i]}:7400" --raft-addr "${IPS[$i]}:7401" --gossip-addr "${IPS[$i]}:7402" \
		--http-addr "${IPS[$i]}:7403" ${API_PORT:+--api-addr "${IPS[$i]}:$API_PORT"} --bootstrap-expect 3 --join "$(IFS=,; echo "${peers[*]}")" \
		--gossip-profile local --log-level warn --insecure "${SERVE_EXTRA[@]}" >"$WORK/node$((i + 1)).log" 2>&1 &
	PIDS+=($!)
done
for _ in $(seq 1 600); do
	ready=0
	for ip in "${IPS[@]}"; do [[ $(curl -fsS -m 1 "http://$ip:7403/readyz" 2>/dev/null || true) == ready ]] && ready=$((ready + 1)); done
	((ready == 3)) && break
	sleep 0.1
done
((ready == 3)) || { echo "capacity.sh: cluster not ready" >&2; tail "$WORK"/node*.log >&2; exit 1; }

addrs=$(printf '%s:7400,' "${IPS[@]}")
metric() { curl -fsS -m 2 "http://$1:7403/metrics" | awk -v m="$2" '$1 == m {print $2}'; }
{
	echo "# capacity.sh $(date -u +%FT%TZ): DURATION=$DURATION WINDOW=$WINDOW CLIENTS=$CLIENTS, claim+complete, 512-byte bodies, 24 h TTL"
	printf '%-6s %10s %10s %8s %9s %9s %9s %11s %9s %10s\n' window records claims/s p99_ms rss1_mib rss2_mib rss3_mib disk1_mib read_amp1 debt1_mib
} | tee "$RESULTS"
first=0 last=0 n=$((total / win))
for w in $(seq 1 "$n"); do
	"$WORK/idembench" -addrs "${addrs%,}" -mode claim+complete -clients "$CLIENTS" -duration "${win}s" -warmup 0s \
		-out "$WORK/w$w.jsonl" 2>/dev/null >/dev/null || true
	ops=$(sed -n 's/.*"ops_per_s":\([0-9.]*\).*/\1/p' "$WORK/w$w.jsonl" | tail -1)
	p99=$(sed -n 's/.*"p99_ms":\([0-9.]*\).*/\1/p' "$WORK/w$w.jsonl" | tail -1)
	recs=$( (metric "${IPS[0]}" idemnode_records_completed; metric "${IPS[0]}" idemnode_records_pending) | awk '{n += $1} END {printf "%d", n}')
	disk=$(metric "${IPS[0]}" idemnode_store_disk_bytes | awk '{printf "%d", $1 / 1048576}')
	readamp=$(metric "${IPS[0]}" idemnode_store_read_amplification | awk '{printf "%d", $1}')
	debt=$(metric "${IPS[0]}" idemnode_store_compaction_debt_bytes | awk '{printf "%d", $1 / 1048576}')
	rss=()
	for p in "${PIDS[@]}"; do rss+=($(($(awk '/VmRSS/ {print $2}' "/proc/$p/status") / 1024))); done
	printf '%-6s %10s %10.0f %8.1f %9s %9s %9s %11s %9s %10s\n' "$w" "$recs" "$ops" "$p99" "${rss[@]}" "$disk" "$readamp" "$debt" | tee -a "$RESULTS"
	((w == 1)) && first=$ops
	last=$ops
done
verdict=$(echo "$last >= 0.9 * $first" | bc)
echo "first window ${first} claims/s, last ${last}: $([[ $verdict == 1 ]] && echo "within 10 %" || echo "MORE THAN 10 % LOWER")" | tee -a "$RESULTS"
[[ $verdict == 1 ]]
