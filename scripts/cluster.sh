#!/usr/bin/env bash
# Runs a local idemnode cluster on loopback addresses 127.0.0.11, .12, ...
# (IDEMNODE_CLUSTER_NET=127.0.N puts them on 127.0.N.11, ... instead)
#   scripts/cluster.sh up [N]      build, start N nodes (default 3), wait for a leader
#   scripts/cluster.sh up --secure [N]   the same with mutual TLS, gossip encryption and --auth
#   scripts/cluster.sh status      show every node's status ("not running" for a stopped one)
#   scripts/cluster.sh stop I      stop node I with SIGTERM (a leader hands over first)
#   scripts/cluster.sh kill I      stop node I with SIGKILL, as a crash would
#   scripts/cluster.sh start I     start node I again on its data dir, with its command line
#   scripts/cluster.sh down        stop exactly the processes `up` and `start` started
# stop, kill and start are for trying failover by hand, e.g.
#   scripts/cluster.sh kill 1; ./idemnode claim --addr 127.0.0.11:7400,127.0.0.12:7400 --key k --fingerprint 01
# Data and logs live under ./idemnode-cluster/ (IDEMNODE_CLUSTER_DIR overrides).
# IDEMNODE_SERVE_ARGS adds flags to every node's serve command line, e.g.
#   IDEMNODE_SERVE_ARGS="--tenant-max-keys 100000" scripts/cluster.sh up
# scripts/observe.sh runs a Prometheus against the cluster, with the alert rules.
# The nodes run with --insecure: plaintext, on loopback only. With --secure,
# `up` makes (once; later runs reuse them) under $dir/pki, with `idemnode tls`
# and `idemnode keygen`: the cluster CA and the client CA, a certificate per
# node naming its loopback IP, client certificates for tenant acme, for the
# tenant admin (--auth-admin: the script's own status calls) and for the
# tenant proxy (--auth-delegate: an `idemnode proxy` serving many tenants),
# and the gossip keyring. The nodes then run with mutual TLS, encrypted
# gossip and --auth, and `up` writes $dir/env: `source idemnode-cluster/env`
# points the CLI (IDEMNODE_ADDR, IDEMNODE_TLS_*, IDEMNODE_TENANT) and the
# Python example (IDEMNODE_JSON_URL) at the cluster as tenant acme; the Go
# example (examples/payments) takes the delegate's files as flags. status,
# stop, kill and start keep the mode `up` chose.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.env"
# A relative IDEMNODE_CLUSTER_DIR is the caller's: made absolute before the
# cd, so that the env file and the nodes' flags name it from anywhere.
dir="${IDEMNODE_CLUSTER_DIR:-}"
if [[ -n $dir && $dir != /* ]]; then dir="$PWD/$dir"; fi
cd "$(dirname "$0")/.."
dir="${dir:-$PWD/idemnode-cluster}"
bin="$dir/bin/idemnode"
pki="$dir/pki"
# A shell that sourced $dir/env holds the client's IDEMNODE_* settings, and
# serve reads the same names (IDEMNODE_TLS_CERT is also its own flag): the
# nodes and this script's own calls get every flag explicitly instead.
unset IDEMNODE_ADDR IDEMNODE_JSON_URL IDEMNODE_TLS_CA IDEMNODE_TLS_CERT IDEMNODE_TLS_KEY IDEMNODE_TLS_SERVER_NAME \
	IDEMNODE_AUTH_TOKEN IDEMNODE_AUTH_TOKEN_FILE IDEMNODE_TENANT

net="${IDEMNODE_CLUSTER_NET:-127.0.0}"
ip_of() { echo "$net.$((10 + $1))"; }

# ours PID: whether PID is still an idemnode this script started.
ours() { [[ "$(readlink "/proc/$1/exe" 2>/dev/null)" == "$bin" ]]; }

# running I: whether node I runs (its pid file names a live process of ours).
running() { [[ -e "$dir/node$1/pid" ]] && ours "$(cat "$dir/node$1/pid")"; }

# secure: whether the last `up` was --secure.
secure() { [[ -e "$dir/secure" ]]; }

# set_client_tls: client_tls=(the TLS flags of this script's own client
# calls): the admin certificate on a secure cluster, none on a plaintext one.
set_client_tls() {
	client_tls=()
	if secure; then
		client_tls=(--tls-ca "$pki/cluster-ca.crt" --tls-cert "$pki/client-admin.crt" --tls-key "$pki/client-admin.key")
	fi
}

# set_security I: security=(node I's flags for TLS, gossip encryption and auth).
set_security() {
	security=(--insecure)
	if secure; then
		security=(--tls-cert "$pki/node$1.crt" --tls-key "$pki/node$1.key" --peer-ca "$pki/cluster-ca.crt"
			--tls-client-ca "$pki/client-ca.crt" --gossip-key-file "$pki/gossip.keys"
			--auth --auth-admin admin --auth-delegate proxy)
	fi
}

# make_pki N: the CAs, N node certificates, the client certificates and the
# gossip keyring under $pki. Each command runs with --keep: a later `up`
# reuses the files, after `idemnode tls` checked that they are what it would
# make (node N's certificate names this IDEMNODE_CLUSTER_NET's address, each
# certificate is signed by the CA beside it with its own key); anything else
# stops `up` with idemnode's message naming what differs.
make_pki() {
	local n=$1 i tenant
	mkdir -p "$pki" && chmod 0700 "$pki"
	(
		"$bin" tls ca --kind cluster --dir "$pki" --keep &&
			"$bin" tls ca --kind client --dir "$pki" --keep &&
			"$bin" keygen --dir "$pki" --keep &&
			for i in $(seq 1 "$n"); do
				"$bin" tls node --dir "$pki" --name "node$i" --ip "$(ip_of "$i")" --keep || exit
			done &&
			for tenant in acme admin proxy; do
				"$bin" tls client --dir "$pki" --tenant "$tenant" --keep || exit
			done
	) >/dev/null || {
		echo "cluster.sh: the files under $pki are not what this up needs (see above);" \
			"remove the ones named (or all of $pki, for new CAs) to make them again" >&2
		exit 1
	}
}

# write_env N: $dir/env, the variables that point the CLI (every client
# subcommand) and the Python example (examples/python, client_from_env) at
# the cluster as tenant acme.
write_env() {
	local n=$1 addrs=() urls=() j
	for j in $(seq 1 "$n"); do addrs+=("$(ip_of "$j"):7400"); urls+=("https://$(ip_of "$j"):7404"); done
	# Values quoted for the shell that sources the file: a directory may
	# hold spaces or quotes.
	{
		echo "# idemnode cluster under $dir, as tenant acme (scripts/cluster.sh up --secure)"
		echo "# For the client subcommands and examples/python; serve reads these names too,"
		echo "# so run nodes from a shell that did not source this file."
		printf 'export IDEMNODE_ADDR=%q\n' "$(IFS=,; echo "${addrs[*]}")"
		printf 'export IDEMNODE_JSON_URL=%q\n' "$(IFS=,; echo "${urls[*]}")"
		printf 'export IDEMNODE_TLS_CA=%q\n' "$pki/cluster-ca.crt"
		printf 'export IDEMNODE_TLS_CERT=%q\n' "$pki/client-acme.crt"
		printf 'export IDEMNODE_TLS_KEY=%q\n' "$pki/client-acme.key"
		printf 'export IDEMNODE_TENANT=%q\n' acme
	} >"$dir/env"
}

# start_node I N: starts node I of N in the background.
start_node() {
	local i=$1 n=$2 ip j peers=()
	ip=$(ip_of "$i")
	mkdir -p "$dir/node$i"
	for j in $(seq 1 "$n"); do (( j == i )) || peers+=("$(ip_of "$j"):7402"); done
	peers=$(IFS=,; echo "${peers[*]}")
	set_security "$i"
	# Every node runs the same command line but for its own addresses.
	nohup "$bin" serve --node-id "node$i" --data-dir "$dir/node$i/data" \
		--grpc-addr "$ip:7400" --raft-addr "$ip:7401" --gossip-addr "$ip:7402" --http-addr "$ip:7403" --api-addr "$ip:7404" \
		--bootstrap-expect "$n" ${peers:+--join "$peers"} "${security[@]}" ${IDEMNODE_SERVE_ARGS:-} \
		>>"$dir/node$i/log" 2>&1 &
	echo $! >"$dir/node$i/pid"
}

# stop_node I SIGNAL: stops node I, waiting up to 10 s for it to exit.
stop_node() {
	local i=$1 sig=$2 f="$dir/node$1/pid" pid
	[[ -e "$f" ]] || return 0
	pid=$(cat "$f")
	if ours "$pid"; then
		kill "-$sig" "$pid" 2>/dev/null || true
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$f"
}

# size: the N of `up`.
size() {
	[[ -e "$dir/size" ]] || { echo "cluster.sh: no cluster under $dir (scripts/cluster.sh up first)" >&2; exit 1; }
	cat "$dir/size"
}

# node_arg I: checks that I names a node of the cluster.
node_arg() {
	local n; n=$(size)
	if [[ ! "${1:-}" =~ ^[0-9]+$ ]] || (( $1 < 1 || $1 > n )); then
		echo "cluster.sh: want a node number from 1 to $n, got '${1:-}'" >&2; exit 2
	fi
}

up() {
	local want_secure=
	if [[ "${1:-}" == --secure ]]; then want_secure=1; shift; fi
	if [[ "${2:-}" == --secure ]]; then want_secure=1; set -- "$1"; fi
	local n="${1:-3}"
	if [[ ! "$n" =~ ^[0-9]+$ ]] || (( n < 1 || n > 9 )) || (( n % 2 == 0 )); then
		echo "cluster.sh: N must be an odd number from 1 to 9, got '$n'" >&2; exit 2
	fi
	if compgen -G "$dir/node*/pid" >/dev/null; then
		echo "cluster.sh: a cluster is already running under $dir (scripts/cluster.sh down first)" >&2; exit 1
	fi
	# Another cluster on these addresses (of another IDEMNODE_CLUSTER_DIR)
	# would answer the leader check below for this one.
	for i in $(seq 1 "$n"); do
		if (exec 3<>"/dev/tcp/$(ip_of "$i")/7400") 2>/dev/null; then
			echo "cluster.sh: something already listens on $(ip_of "$i"):7400 (another cluster.sh cluster?)" >&2; exit 1
		fi
	done
	mkdir -p "$dir/bin"
	go build -o "$bin" ./cmd/idemnode
	if [[ -n $want_secure ]]; then make_pki "$n"; fi # before anything of the last cluster changes
	echo "$n" >"$dir/size"
	rm -f "$dir/secure" "$dir/env"
	if [[ -n $want_secure ]]; then
		write_env "$n"
		: >"$dir/secure"
	fi
	for i in $(seq 1 "$n"); do
		mkdir -p "$dir/node$i" && : >"$dir/node$i/log" # a fresh log per `up`; start appends
		start_node "$i" "$n"
	done
	set_client_tls
	local said
	for _ in $(seq 1 150); do
		for i in $(seq 1 "$n"); do
			# Refusals are normal while the nodes start; the last one is
			# shown if no leader comes (a certificate a node refuses, ...).
			if said=$("$bin" status --addr "$(ip_of "$i"):7400" "${client_tls[@]}" -o json 2>&1) && grep -q '"state":"leader"' <<<"$said"; then
				echo "cluster of $n up; leader is node$i at $(ip_of "$i"):7400"
				local addrs=() j
				for j in $(seq 1 "$n"); do addrs+=("$(ip_of "$j"):7400"); done
				if secure; then
					echo "mutual TLS, encrypted gossip and --auth; certificates and keys in $pki"
					local cluster delegate
					cluster=$(IFS=,; echo "${addrs[*]}")
					delegate=$(printf -- '--tls-ca %q --tls-cert %q --tls-key %q' "$pki/cluster-ca.crt" "$pki/client-proxy.crt" "$pki/client-proxy.key")
					echo "env:  source $(printf %q "$dir/env")   # the CLI and examples/python as tenant acme (client-acme.crt)"
					echo "try:  $(printf %q "$bin") claim --key demo-1 --fingerprint 01 -o json"
					echo "      python3 examples/python/demo.py"
					echo "admin (members, ...): $(printf -- '--tls-cert %q --tls-key %q' "$pki/client-admin.crt" "$pki/client-admin.key")"
					echo "as a delegate (tenant proxy, may name any tenant):"
					echo "      go run ./examples/payments --cluster $cluster ${delegate//--/-}"
					echo "      $(printf %q "$bin") proxy --cluster $cluster $delegate --tenant-header X-Tenant --upstream ..."
				else
					echo "try:  $(printf %q "$bin") claim --addr $(IFS=,; echo "${addrs[*]}") --key demo-1 --fingerprint 01 -o json"
				fi
				echo "logs: $dir/node*/log   one node: scripts/cluster.sh stop|kill|start I   all: scripts/cluster.sh down"
				return 0
			fi
		done
		sleep 0.2
	done
	echo "cluster.sh: no leader after 30s; the last status call said:" >&2
	sed 's/^/  /' <<<"$said" >&2
	echo "see $dir/node*/log" >&2
	exit 1
}

status() {
	[[ -e "$dir/size" ]] || { echo "no cluster under $dir"; return 0; }
	local i
	set_client_tls
	for i in $(seq 1 "$(size)"); do
		if running "$i"; then
			echo "== node$i (pid $(cat "$dir/node$i/pid"))"
			"$bin" status --addr "$(ip_of "$i"):7400" "${client_tls[@]}" --timeout 2s || true
		else
			echo "== node$i: not running (scripts/cluster.sh start $i; log: $dir/node$i/log)"
		fi
	done
}

start() {
	node_arg "$1"
	if running "$1"; then echo "cluster.sh: node$1 is already running" >&2; exit 1; fi
	start_node "$1" "$(size)"
	echo "node$1 started (pid $(cat "$dir/node$1/pid")) at $(ip_of "$1"):7400; log: $dir/node$1/log"
}

stop() {
	node_arg "$1"
	if ! running "$1"; then echo "node$1 is not running"; rm -f "$dir/node$1/pid"; return 0; fi
	stop_node "$1" "$2"
	echo "node$1 stopped ($2)"
}

down() {
	local f i
	for f in "$dir"/node*/pid; do
		[[ -e "$f" ]] || continue
		i=$(basename "$(dirname "$f")"); i=${i#node}
		stop_node "$i" TERM
	done
	rm -f "$dir/size"
	echo "cluster down (data kept in $dir; remove it for a fresh cluster)"
}

case "${1:-}" in
	up) shift; up "$@" ;;
	status) status ;;
	start) start "${2:-}" ;;
	stop) stop "${2:-}" TERM ;;
	kill) stop "${2:-}" KILL ;;
	down) down ;;
	*) echo "usage: scripts/cluster.sh up [--secure] [N] | status | start I | stop I | kill I | down" >&2; exit 2 ;;
esac
