#!/bin/bash
# alternate variants; print ops/s, leader commit and apply means
cd /work/main
stats() { for f in $1/metrics-*-node*.txt; do awk '/^idemnode_raft_commit_seconds_sum/{cs=$2}/^idemnode_raft_commit_seconds_count/{cc=$2}/^idemnode_raft_fsm_apply_seconds_sum/{as=$2}/^idemnode_raft_fsm_apply_seconds_count/{ac=$2}/^idemnode_proposal_commands_sum/{ps=$2}/^idemnode_proposal_commands_count/{pc=$2} END{if(pc>0) printf "commit %.2fms apply %.3fms cmds/entry %.1f", 1000*cs/cc, 1000*as/ac, ps/pc}' $f; done; }
run() { # name bin serveargs mode
  local d=/tmp/ab2/$1-$4-$(date +%s%N)
  IDEMNODE_BIN=/var/tmp/idemnode-$2 SERVE_ARGS="$3" BENCH_ONLY=idemnode MODES="$4" CLIENTS_LIST=64 DURATION=15s WARMUP=5s RESULTS_DIR=$d scripts/bench.sh >/dev/null 2>&1
  echo "$1 $4 $(grep "| $4 " $d/table.md | awk -F'|' '{print $4, $6}') $(stats $d) $(grep -o 'iowait [0-9]*%' $d/*.jsonl 2>/dev/null | head -1)"
}
for r in $(seq ${ROUNDS:-3}); do
  for v in $VARIANTS; do IFS=: read name bin args <<<"$v"; run $name $bin "$args" ${MODE:-claim}; done
done
