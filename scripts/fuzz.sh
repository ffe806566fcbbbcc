#!/usr/bin/env bash
# Runs every fuzz target for a bounded time each (FUZZTIME, default 20s):
# command decoding, snapshot restore, the abandoned feed's events, request validation, and the HTTP
# middleware's key parsing and JSON canonicalisation. New crashers land in
# the package's testdata/fuzz/ and fail the run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.env"
cd "$(dirname "$0")/.."
time="${FUZZTIME:-20s}"
# Go minimizes every new interesting input for up to 60 s by default and
# counts no executions meanwhile: with 20 s per target, FuzzDecodeCommand
# ran 9 120 inputs and spent the rest minimizing (0 execs/s in its log);
# with 1 s, 278 k. Crashers are still minimized, within this bound.
minimize="${FUZZMINIMIZETIME:-1s}"
targets=(
	"./fsm FuzzDecodeCommand"
	"./fsm FuzzRestore"
	"./fsm FuzzDecodeEvent"
	"./rpc FuzzValidateRequests"
	"./idemhttp FuzzParseKey"
	"./idemhttp FuzzCanonicalJSON"
	"./idemhttp FuzzPointer"
)
for t in "${targets[@]}"; do
	set -- $t
	echo "== fuzz $2 ($1) for $time"
	go test "$1" -run '^$' -fuzz "^$2\$" -fuzztime "$time" -fuzzminimizetime "$minimize"
done
