#!/usr/bin/env bash
# Runs a real Prometheus against the local cluster of scripts/cluster.sh,
# with the chart's alert rules loaded, so you can watch the cluster and see
# alerts fire while you stop and kill nodes:
#   scripts/observe.sh up        start Prometheus (after scripts/cluster.sh up), print its URL
#   scripts/observe.sh status    whether it runs, and the alerts pending or firing now
#   scripts/observe.sh down      stop the Prometheus `up` started
# It is the Debian package's server (apt-get install --no-install-recommends
# prometheus), run as a plain process with its own config, data dir and port:
# a packaged prometheus service, if one runs, is left alone.
# Targets are the nodes' HTTP ports (127.0.0.1N:7403, or on IDEMNODE_CLUSTER_NET
# as cluster.sh), job "idemnode", with
# the labels cluster="local" and namespace="idemnode-local" that the alert
# rules and the dashboard (charts/idemnode/files/) group and select by.
# Environment:
#   IDEMNODE_CLUSTER_DIR       the cluster's directory (as cluster.sh; Prometheus lives in its prometheus/)
#   IDEMNODE_CLUSTER_NET       the cluster's addresses (as cluster.sh; default 127.0.0)
#   IDEMNODE_PROMETHEUS_ADDR   listen address (default 127.0.0.1:19090)
#   IDEMNODE_OBSERVE_INTERVAL  scrape and rule evaluation interval (default 5s)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${IDEMNODE_CLUSTER_DIR:-$PWD/idemnode-cluster}"
pdir="$dir/prometheus"
addr="${IDEMNODE_PROMETHEUS_ADDR:-127.0.0.1:19090}"
interval="${IDEMNODE_OBSERVE_INTERVAL:-5s}"
rules="$PWD/charts/idemnode/files/alerts.yaml"

# running: whether the pid file names a live prometheus.
running() {
	[[ -e "$pdir/pid" ]] && [[ "$(readlink "/proc/$(cat "$pdir/pid")/exe" 2>/dev/null)" == "$(readlink -f "$(command -v prometheus)")" ]]
}

# config N: the Prometheus configuration for a cluster of N nodes.
config() {
	local n=$1 i targets=()
	for i in $(seq 1 "$n"); do targets+=("'${IDEMNODE_CLUSTER_NET:-127.0.0}.$((10 + i)):7403'"); done
	cat <<EOF
# Written by scripts/observe.sh: the local cluster of scripts/cluster.sh.
global:
  scrape_interval: $interval
  scrape_timeout: $interval
  evaluation_interval: $interval
rule_files:
  - '$rules'
scrape_configs:
  - job_name: idemnode
    static_configs:
      - targets: [$(IFS=,; echo "${targets[*]}")]
        labels:
          cluster: local
          namespace: idemnode-local
EOF
}

up() {
	command -v prometheus >/dev/null || {
		echo "observe.sh: no prometheus on PATH; as root: apt-get install --no-install-recommends prometheus" >&2; exit 1; }
	[[ -e "$dir/size" ]] || { echo "observe.sh: no cluster under $dir (scripts/cluster.sh up first)" >&2; exit 1; }
	if running; then echo "observe.sh: Prometheus already runs at http://$addr (scripts/observe.sh down first)" >&2; exit 1; fi
	mkdir -p "$pdir/data"
	config "$(cat "$dir/size")" >"$pdir/prometheus.yml"
	: >"$pdir/log"
	nohup prometheus --config.file="$pdir/prometheus.yml" --storage.tsdb.path="$pdir/data" \
		--storage.tsdb.retention.time=1d --web.listen-address="$addr" >>"$pdir/log" 2>&1 &
	echo $! >"$pdir/pid"
	for _ in $(seq 1 150); do
		if curl -fsS "http://$addr/-/ready" >/dev/null 2>&1; then
			echo "Prometheus at http://$addr (targets: /targets, alerts: /alerts; API: /api/v1/query)"
			echo "rules: $rules; log: $pdir/log; stop: scripts/observe.sh down"
			return 0
		fi
		running || { echo "observe.sh: Prometheus exited; see $pdir/log:" >&2; tail -20 "$pdir/log" >&2; exit 1; }
		sleep 0.2
	done
	echo "observe.sh: Prometheus not ready after 30s; see $pdir/log" >&2
	exit 1
}

status() {
	if ! running; then echo "Prometheus is not running (scripts/observe.sh up)"; return 0; fi
	echo "Prometheus at http://$addr (pid $(cat "$pdir/pid"))"
	curl -fsS "http://$addr/api/v1/alerts" | python3 -c '
import json, sys
alerts = json.load(sys.stdin)["data"]["alerts"]
for a in alerts:
    print(a["state"], a["labels"]["alertname"], a["labels"].get("instance", ""), sep="\t")
if not alerts:
    print("no alert pending or firing")'
}

down() {
	if running; then
		local pid; pid=$(cat "$pdir/pid")
		kill "$pid"
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
		echo "Prometheus stopped (data kept in $pdir)"
	else
		echo "Prometheus is not running"
	fi
	rm -f "$pdir/pid"
}

case "${1:-}" in
	up) up ;;
	status) status ;;
	down) down ;;
	*) echo "usage: scripts/observe.sh up | status | down" >&2; exit 2 ;;
esac
