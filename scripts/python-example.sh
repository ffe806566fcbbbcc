#!/usr/bin/env bash
# Runs the Python example client (examples/python) against a real node:
#   build idemnode, start one `serve --dev` node on 127.0.0.1:17600-17604 in
#   a temp working dir, wait for /readyz, then run the demo and the unittest
#   suite against its JSON API (127.0.0.1:17604).
# The node it started (and only that one, by its pid) is stopped and its
# temp dir removed on every exit path; any failure exits non-zero.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.env"
cd "$(dirname "$0")/.."

start=$SECONDS
say() { printf '[%3ds] %s\n' "$((SECONDS - start))" "$*"; }
die() { say "FAIL: $*" >&2; exit 1; }

# Fixed ports, away from the defaults (7400-7404) so a node someone runs by
# hand is never the one under test. --dev derives raft (+1), http (+3) and
# the JSON API (+4) from the gRPC port, and binds no gossip port.
grpc_addr=127.0.0.1:17600
ready_url=http://127.0.0.1:17603/readyz
api_url=http://127.0.0.1:17604

command -v go >/dev/null || { echo "python-example.sh: go is required" >&2; exit 2; }
command -v curl >/dev/null || { echo "python-example.sh: curl is required" >&2; exit 2; }
if ! command -v python3 >/dev/null; then
	# The example is stdlib-only, so Debian's python3 is all it needs.
	if ((EUID == 0)) && command -v apt-get >/dev/null; then
		say "installing python3"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 >/dev/null
	else
		echo "python-example.sh: python3 is required (and we cannot install it: not root, or no apt-get)" >&2
		exit 2
	fi
fi

work=$(mktemp -d "/tmp/idemnode-pyex.XXXXXX")
node_pid=

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n $node_pid ]] && kill -0 "$node_pid" 2>/dev/null; then
		kill -TERM "$node_pid" 2>/dev/null || true
		# A clean shutdown hands over leadership and drains calls (a few
		# seconds); past 20 s, cut it.
		for _ in $(seq 1 200); do kill -0 "$node_pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$node_pid" 2>/dev/null || true
		wait "$node_pid" 2>/dev/null || true
	fi
	if ((rc != 0)) && [[ -s "$work/node.log" ]]; then
		echo "---- last node log lines" >&2
		tail -20 "$work/node.log" >&2
	fi
	rm -rf "$work"
	say "stopped node ${node_pid:-(none)}, removed $work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Something already answering there would be tested instead of our node.
if curl -fsS -o /dev/null --max-time 2 "$ready_url" 2>/dev/null; then
	die "something already answers on $ready_url; stop it first"
fi

say "building idemnode ($(python3 --version))"
CGO_ENABLED=0 go build -o "$work/idemnode" ./cmd/idemnode

say "starting idemnode serve --dev --grpc-addr $grpc_addr"
mkdir "$work/node"
# exec: $! is the node itself, so cleanup stops exactly it.
(cd "$work/node" && exec "$work/idemnode" serve --dev --grpc-addr "$grpc_addr") >"$work/node.log" 2>&1 &
node_pid=$!

# /readyz answers 200 once a leader is known and the node caught up.
deadline=$((SECONDS + 60))
until curl -fsS -o /dev/null --max-time 2 "$ready_url" 2>/dev/null; do
	kill -0 "$node_pid" 2>/dev/null || die "the node exited before it was ready"
	((SECONDS < deadline)) || die "the node was not ready within 60 s"
	sleep 0.25
done
say "node $node_pid ready; JSON API at $api_url"

say "demo: python3 examples/python/demo.py $api_url"
python3 examples/python/demo.py "$api_url" || die "the demo failed"

say "tests: python3 -m unittest -v examples/python/test_idemnode.py"
IDEMNODE_JSON_URL=$api_url python3 -m unittest -v examples/python/test_idemnode.py || die "the tests failed"

say "PASS: Python example (demo and tests against a live node)"
