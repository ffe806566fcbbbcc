#!/bin/bash
# issue 43 §5: claim at the benchmark's 30-second leases, main (lockbefore,
# 8dcb915) against fix/lock (lockafter), alternating run by run, a fresh
# 3-node cluster each (scripts/bench.sh). Build both first with
# CGO_ENABLED=0 go build -o /var/tmp/idemnode-lock<variant> ./cmd/idemnode.
#   VARIANTS="lockbefore lockafter" MODE=claim ROUNDS=2 DUR=60s lock-alternate.sh
# Prints per run: time, variant, mode, ops/s, p99 ms, the leader's mean FSM apply per entry.
cd "$(dirname "$0")/../../.."
stats() { for f in $1/metrics-*-node*.txt; do awk '/^idemnode_raft_state /{st=$2}/^idemnode_raft_fsm_apply_seconds_sum/{as=$2}/^idemnode_raft_fsm_apply_seconds_count/{ac=$2} END{if(st==2 && ac>0) printf "leader-apply %.3fms", 1000*as/ac}' $f; done; }
for r in $(seq ${ROUNDS:-2}); do
  for v in $VARIANTS; do
    d=/tmp/ab-lock/runs/$v-${MODE}-$(date +%s%N)
    IDEMNODE_BIN=/var/tmp/idemnode-$v BENCH_ONLY=idemnode MODES="$MODE" CLIENTS_LIST=64 DURATION=${DUR:-60s} WARMUP=5s RESULTS_DIR=$d scripts/bench.sh >$d.log 2>&1 || echo "run failed: $d.log"
    echo "$(date +%H:%M:%S) $v $MODE $(grep "| $MODE " $d/table.md | awk -F'|' '{print $4, $6}') $(stats $d)"
    cp $d/idemnode.jsonl docs/bench-runs/2026-12-02/lock-$v-$MODE-$r.jsonl 2>/dev/null
  done
done
