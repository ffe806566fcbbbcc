#!/bin/bash
# Alternates server builds run by run, a fresh 3-node cluster each (scripts/bench.sh).
cd /work/main
for r in $(seq ${ROUNDS:-3}); do
  for v in $VARIANTS; do
    d=/tmp/ab/runs/$v-${MODE}-$(date +%s%N)
    IDEMNODE_BIN=/var/tmp/idemnode-$v BENCH_ONLY=idemnode MODES="$MODE" CLIENTS_LIST=64 DURATION=${DUR:-20s} WARMUP=5s RESULTS_DIR=$d scripts/bench.sh >$d.log 2>&1
    echo "$(date +%H:%M:%S) $v $MODE $(grep "| $MODE " $d/table.md | awk -F'|' '{print $4, $6}')"
  done
done
