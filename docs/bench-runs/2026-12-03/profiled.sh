#!/bin/bash
# As run on 2026-12-03. Builds: CGO_ENABLED=0 go build -o /var/tmp/idemnode-<variant> ./cmd/idemnode; base = fd03d6b, final = 2b74eb3.
# prof.sh VARIANT: profiled runs of one build in each setup; results under /tmp/ab/prof/
cd "$(git rev-parse --show-toplevel)"
v=$1
for mode in ${MODES_P:-claim claim+complete}; do
  for setup in ${SETUPS:-one leader all}; do
    case $setup in one) env="NODES=1";; leader) env="CLIENTS_TO=leader";; all) env="CLIENTS_TO=all";; esac
    d=/tmp/ab/prof/$v-${mode//+/_}-$setup-$(date +%H%M%S)
    env $env IDEMNODE_BIN=/var/tmp/idemnode-$v BENCH_ONLY=idemnode PROFILE=1 MODES="$mode" CLIENTS_LIST=${CLIENTS:-64} DURATION=15s WARMUP=4s RESULTS_DIR=$d scripts/bench.sh >$d.log 2>&1
    python3 - "$d/idemnode.jsonl" "$v $setup" "$mode" <<'PY'
import json,sys
for l in open(sys.argv[1]):
    j=json.loads(l); c=j['cpu']
    print(f"{sys.argv[2]:14} {sys.argv[3]:15} {j['ops_per_s']:9.0f}/s  p50 {j['p50_ms']:.2f} p99 {j['p99_ms']:.2f}  server {c['server_cores']:.2f} cores  {1e6*c['server_cores']/j['ops_per_s']:6.1f} us/req  loadgen {c['loadgen_cores']:.2f}  busy {c['machine_busy_pct']:.0f}%  steal {c.get('machine_steal_pct',0):.1f}", flush=True)
PY
  done
done
