#!/bin/bash
# Alternates server builds run by run, a fresh 3-node cluster each (scripts/bench.sh):
#   VARIANTS="mem head" MODE=claim ROUNDS=6 alternate.sh
# runs /var/tmp/idemnode-<variant> for each variant (build them first, e.g.
# `git worktree add /tmp/wt-mem 8f176c4 && (cd /tmp/wt-mem && CGO_ENABLED=0 go build -o /var/tmp/idemnode-mem ./cmd/idemnode)`)
# and prints per run: time, variant, mode, ops/s, p99 ms, the leader's mean FSM apply per entry.
cd /work/main
stats() { for f in $1/metrics-*-node*.txt; do awk '/^idemnode_raft_state /{st=$2}/^idemnode_raft_fsm_apply_seconds_sum/{as=$2}/^idemnode_raft_fsm_apply_seconds_count/{ac=$2} END{if(st==2 && ac>0) printf "leader-apply %.3fms", 1000*as/ac}' $f; done; }
for r in $(seq ${ROUNDS:-3}); do
  for v in $VARIANTS; do
    d=/tmp/ab/runs/$v-${MODE}-$(date +%s%N)
    IDEMNODE_BIN=/var/tmp/idemnode-$v BENCH_ONLY=idemnode MODES="$MODE" CLIENTS_LIST=64 DURATION=${DUR:-15s} WARMUP=5s RESULTS_DIR=$d scripts/bench.sh >/dev/null 2>&1
    echo "$(date +%H:%M:%S) $v $MODE $(grep "| $MODE " $d/table.md | awk -F'|' '{print $4, $6}') $(stats $d)"
  done
done
