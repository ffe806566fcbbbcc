#!/bin/bash
# As run on 2026-12-03. Builds: CGO_ENABLED=0 go build -o /var/tmp/idemnode-<variant> ./cmd/idemnode; base = fd03d6b, final = 2b74eb3.
# sysc.sh VARIANT SETUP MODE: one run; the read/write syscalls per request of each node over 10 s of the window
cd "$(git rev-parse --show-toplevel)"
v=$1 setup=$2 mode=${3:-claim}
case $setup in one) env="NODES=1";; leader) env="CLIENTS_TO=leader";; all) env="CLIENTS_TO=all";; esac
d=/tmp/ab/sys/$v-${mode//+/_}-$setup-$(date +%s%N); mkdir -p /tmp/ab/sys
env $env IDEMNODE_BIN=/var/tmp/idemnode-$v BENCH_ONLY=idemnode MODES="$mode" CLIENTS_LIST=64 DURATION=16s WARMUP=4s RESULTS_DIR=$d scripts/bench.sh >$d.log 2>&1 &
sleep 12
pids=$(pgrep -f "idemnode-?[a-z]* serve|/bin/idemnode serve" | tr '\n' ' ')
declare -A r0 w0
for p in $pids; do r0[$p]=$(awk '/syscr/{print $2}' /proc/$p/io); w0[$p]=$(awk '/syscw/{print $2}' /proc/$p/io); done
sleep 10
for p in $pids; do echo "$p $(( $(awk '/syscr/{print $2}' /proc/$p/io) - ${r0[$p]} )) $(( $(awk '/syscw/{print $2}' /proc/$p/io) - ${w0[$p]} ))"; done > $d.sys
wait
python3 - "$d/idemnode.jsonl" "$d.sys" "$v $setup $mode" <<'PY'
import json,sys
j=json.loads(open(sys.argv[1]).readline()); reqs=j['ops_per_s']*10
rows=[l.split() for l in open(sys.argv[2])]
print(sys.argv[3], f"{j['ops_per_s']:.0f}/s", f"{1e6*j['cpu']['server_cores']/j['ops_per_s']:.1f} us/req", " ".join(f"node r {int(r)/reqs:.2f} w {int(w)/reqs:.2f}" for p,r,w in rows), f"total r+w {sum(int(r)+int(w) for p,r,w in rows)/reqs:.2f}")
PY
