#!/usr/bin/env bash
# Runs a local idemnode cluster on loopback addresses 127.0.0.11, .12, ...
#   scripts/cluster.sh up [N]      build, start N nodes (default 3), wait for a leader
#   scripts/cluster.sh status      show every node's status
#   scripts/cluster.sh down        stop exactly the processes `up` started
# Data and logs live under ./idemnode-cluster/ (IDEMNODE_CLUSTER_DIR overrides).
# The nodes run with --insecure: plaintext, on loopback only (docs/SECURITY.md
# shows a cluster with TLS).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.env"
cd "$(dirname "$0")/.."
dir="${IDEMNODE_CLUSTER_DIR:-$PWD/idemnode-cluster}"
bin="$dir/bin/idemnode"

ip_of() { echo "127.0.0.$((10 + $1))"; }

up() {
	local n="${1:-3}"
	if [[ ! "$n" =~ ^[0-9]+$ ]] || (( n < 1 || n > 9 )) || (( n % 2 == 0 )); then
		echo "cluster.sh: N must be an odd number from 1 to 9, got '$n'" >&2; exit 2
	fi
	if compgen -G "$dir/node*/pid" >/dev/null; then
		echo "cluster.sh: a cluster is already running under $dir (scripts/cluster.sh down first)" >&2; exit 1
	fi
	mkdir -p "$dir/bin"
	go build -o "$bin" ./cmd/idemnode
	for i in $(seq 1 "$n"); do
		local ip; ip=$(ip_of "$i")
		mkdir -p "$dir/node$i"
		local peers=() j
		for j in $(seq 1 "$n"); do (( j == i )) || peers+=("$(ip_of "$j"):7402"); done
		peers=$(IFS=,; echo "${peers[*]}")
		# Every node runs the same command line but for its own addresses.
		nohup "$bin" serve --node-id "node$i" --data-dir "$dir/node$i/data" \
			--grpc-addr "$ip:7400" --raft-addr "$ip:7401" --gossip-addr "$ip:7402" --http-addr "$ip:7403" \
			--bootstrap-expect "$n" ${peers:+--join "$peers"} --insecure \
			>"$dir/node$i/log" 2>&1 &
		echo $! >"$dir/node$i/pid"
	done
	for _ in $(seq 1 150); do
		for i in $(seq 1 "$n"); do
			if "$bin" status --addr "$(ip_of "$i"):7400" -o json 2>/dev/null | grep -q '"state":"leader"'; then
				echo "cluster of $n up; leader is node$i at $(ip_of "$i"):7400"
				echo "try:  $bin claim --addr $(ip_of 1):7400 --key demo-1 --fingerprint 01 -o json"
				echo "logs: $dir/node*/log   stop: scripts/cluster.sh down"
				return 0
			fi
		done
		sleep 0.2
	done
	echo "cluster.sh: no leader after 30s; see $dir/node*/log" >&2
	exit 1
}

status() {
	for f in "$dir"/node*/pid; do
		[[ -e "$f" ]] || { echo "no cluster under $dir"; return 0; }
		local i; i=$(basename "$(dirname "$f")"); i=${i#node}
		echo "== node$i (pid $(cat "$f"))"
		"$bin" status --addr "$(ip_of "$i"):7400" --timeout 2s || true
	done
}

down() {
	for f in "$dir"/node*/pid; do
		[[ -e "$f" ]] || continue
		local pid; pid=$(cat "$f")
		# Only signal the process if it is still the idemnode we started.
		if [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$bin" ]]; then
			kill -TERM "$pid" 2>/dev/null || true
			for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			kill -KILL "$pid" 2>/dev/null || true
		fi
		rm -f "$f"
	done
	echo "cluster down (data kept in $dir; remove it for a fresh cluster)"
}

case "${1:-}" in
	up) up "${2:-3}" ;;
	status) status ;;
	down) down ;;
	*) echo "usage: scripts/cluster.sh up [N] | status | down" >&2; exit 2 ;;
esac
