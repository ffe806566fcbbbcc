#!/usr/bin/env bash
# Runs docs/OPERATIONS.md's "From clone to a secured cluster in fifteen
# minutes" as the page shows it: the code block after the line
#   <!-- scripts/fifteen-minutes.sh runs the next block -->
# read from the page (so the page is the one source), in a fresh clone of
# this repository's HEAD under a temporary directory. Its three nodes listen
# on 127.0.92.11-13, ports 7400-7404. Then checks that acme's claim won and
# the claim without a certificate was refused (exit 6), stops any node still
# running, removes the directory and says how long the block took.
set -euo pipefail
cd "$(dirname "$0")/.."

doc=docs/OPERATIONS.md
marker='<!-- scripts/fifteen-minutes.sh runs the next block -->'
block=$(awk -v m="$marker" '$0 == m { after = 1; next } after && /^```sh$/ { on = 1; next } on && /^```$/ { exit } on' "$doc")
[[ -n "$block" ]] || { echo "fifteen-minutes.sh: no sh block after '$marker' in $doc" >&2; exit 1; }

work=$(mktemp -d /tmp/idemnode-fifteen.XXXXXX)
out=$work/out
# On any exit: the nodes the block started and did not stop (its own last
# line stops them); on failure, the block's output and the nodes' logs; then
# the directory.
cleanup() {
	local code=$? pids
	pids=$(jobs -p)
	if [[ -n "$pids" ]]; then
		kill $pids 2>/dev/null || true
		wait $pids 2>/dev/null || true
	fi
	if ((code != 0)); then
		[[ -f "$out" ]] && cat "$out"
		# The block keeps its nodes' logs in ../idemnode-try.
		for log in "$work"/idemnode-try/node*.log; do
			[[ -f "$log" ]] && { echo "== the end of ${log##*/}"; tail -n 20 "$log"; }
		done
		echo "fifteen-minutes.sh: failed (exit $code); the block's output and the nodes' logs are above" >&2
	fi
	rm -rf "$work"
}
trap cleanup EXIT

git clone -q . "$work/idemnode"
cd "$work/idemnode"
start=$SECONDS
# In this shell, so that the block's `jobs -p` and cd work as in a terminal;
# its output goes to a file the checks below read.
eval "$block" >"$out" 2>&1
took=$((SECONDS - start))
cat "$out"

grep -q '"outcome":"won"' "$out" || { echo "fifteen-minutes.sh: acme's claim did not win" >&2; exit 1; }
grep -q 'requires a client certificate' "$out" && grep -q '^refused, exit 6$' "$out" ||
	{ echo "fifteen-minutes.sh: the claim without a certificate was not refused with exit 6" >&2; exit 1; }
echo "fifteen-minutes.sh: the block of $doc ran in ${took}s from a fresh clone"
