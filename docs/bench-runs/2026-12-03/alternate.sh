#!/bin/bash
# As run on 2026-12-03. Builds: CGO_ENABLED=0 go build -o /var/tmp/idemnode-<variant> ./cmd/idemnode; base = fd03d6b, final = 2b74eb3.
# ab.sh: alternate server builds (VARIANTS) and setups (SETUPS: all leader one) run by run;
# prints rate and server CPU per request; lines also appended to /tmp/ab/summary.txt
cd "$(git rev-parse --show-toplevel)"
for r in $(seq ${ROUNDS:-3}); do
  for v in $VARIANTS; do
   for setup in ${SETUPS:-all}; do
    case $setup in one) env="NODES=1";; leader) env="CLIENTS_TO=leader";; all) env="CLIENTS_TO=all";; esac
    d=/tmp/ab/runs/$v-${MODE//+/_}-$setup-$(date +%s%N)
    env $env IDEMNODE_BIN=/var/tmp/idemnode-$v BENCH_ONLY=idemnode MODES="$MODE" CLIENTS_LIST=${CLIENTS:-64} DURATION=${DUR:-15s} WARMUP=4s RESULTS_DIR=$d IDEMBENCH_ARGS="${IBARGS:-}" PROFILE=${PROFILE:-} scripts/bench.sh >$d.log 2>&1
    python3 - "$d/idemnode.jsonl" "$v" "$MODE" "$setup" <<'PY' | tee -a /tmp/ab/summary.txt
import json,sys
for l in open(sys.argv[1]):
    j=json.loads(l); c=j['cpu']
    print(f"{sys.argv[2]:6} {sys.argv[4]:6} {sys.argv[3]:15} {j['ops_per_s']:7.0f}/s p50 {j['p50_ms']:.2f} p99 {j['p99_ms']:.2f} server {c['server_cores']:.2f} cores {1e6*c['server_cores']/j['ops_per_s']:6.1f} us/req loadgen {c['loadgen_cores']:.2f} busy {c['machine_busy_pct']:.0f}% steal {c.get('machine_steal_pct',0):.1f}", flush=True)
PY
   done
  done
done
