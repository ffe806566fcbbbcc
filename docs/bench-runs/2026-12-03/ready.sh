#!/usr/bin/env bash
# Time from exec to /readyz answering 200 of `serve --dev`, at a first
# start and at a restart on the same data dir. Usage: ready.sh BINARY
# (ports 27400-27404 on 127.0.0.1 must be free). Needs curl and bc.
set -euo pipefail
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for start in first restart; do
	t0=$(date +%s.%N)
	"$bin" serve --dev --data-dir "$dir/data" --grpc-addr 127.0.0.1:27400 --raft-addr 127.0.0.1:27401 \
		--gossip-addr 127.0.0.1:27402 --http-addr 127.0.0.1:27403 --api-addr 127.0.0.1:27404 >/dev/null 2>&1 &
	pid=$!
	for _ in $(seq 3000); do
		curl -sf http://127.0.0.1:27403/readyz >/dev/null && break
		sleep 0.01
	done
	t1=$(date +%s.%N)
	echo "$start $(echo "$t1 - $t0" | bc)"
	kill "$pid"
	wait "$pid" || true
done
