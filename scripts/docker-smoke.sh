#!/usr/bin/env bash
# Smoke test of the container image and docker-compose.yml:
#   build the static binary and a FROM scratch image (no image is pulled),
#   start the three-node compose cluster under a project name of its own,
#   wait for a leader, claim / complete / replay a key through it, replay
#   through the followers, `docker kill` the leader, check the replay and a
#   new claim through the survivors, restart the killed node and check that
#   it caught up from its volume. Then, with the same image,
#   docker-compose.secure.yml under a project name of its own: certificates
#   from its init containers (no CA key where the nodes can read it), a
#   claim with tenant acme's client certificate
#   (won) and the order service through the proxy, a delegate naming tenant
#   acme; a plaintext client and the proxy without a tenant are refused.
# Everything it creates (containers, network, volumes, image, temp dir) is
# removed on every exit path, and it only talks to the ports that its own
# containers publish on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
say() { printf '[%3ds] %s\n' "$((SECONDS - start))" "$*"; }
die() { say "FAIL: $*" >&2; exit 1; }

for tool in docker jq curl go; do
	command -v "$tool" >/dev/null || { echo "docker-smoke.sh: $tool is required" >&2; exit 2; }
done
if docker compose version >/dev/null 2>&1; then
	compose=(docker compose)
elif command -v docker-compose >/dev/null; then
	compose=(docker-compose)
else
	echo "docker-smoke.sh: neither 'docker compose' nor docker-compose is installed" >&2; exit 2
fi

# Unique names: a second run, or anything else on the engine, cannot clash.
id="$$-$(date +%s)"
project="idemnode-smoke-$id"
project_secure="idemnode-smoke-secure-$id"
export IDEMNODE_IMAGE="idemnode:smoke-$id"
export IDEMNODE_ORDERS_IMAGE="idemnode-orders:smoke-$id" # scripts/docker-image.sh builds it beside
# Empty host ports: Docker picks free ones on 127.0.0.1 (read back with `port`).
export IDEMNODE_NODE1_GRPC_PORT= IDEMNODE_NODE2_GRPC_PORT= IDEMNODE_NODE3_GRPC_PORT=
export IDEMNODE_NODE1_HTTP_PORT= IDEMNODE_NODE2_HTTP_PORT= IDEMNODE_NODE3_HTTP_PORT=
export IDEMNODE_NODE1_API_PORT= IDEMNODE_NODE2_API_PORT= IDEMNODE_NODE3_API_PORT=
export IDEMNODE_PROXY_PORT= IDEMNODE_PROXY_HTTP_PORT=
work=$(mktemp -d "/tmp/idemnode-smoke.XXXXXX")
bin="$work/idemnode"
dc() { "${compose[@]}" -p "$project" -f docker-compose.yml "$@"; }
dcs() { "${compose[@]}" -p "$project_secure" -f docker-compose.secure.yml "$@"; }
# client_tls: the TLS flags of every client call; none for the plaintext cluster.
client_tls=()

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if ((rc != 0)) && [[ -e "$work/up" ]]; then
		echo "---- last node logs ($project)" >&2
		dc logs --no-color --tail=40 >&2 2>&1 || true
	fi
	if ((rc != 0)) && [[ -e "$work/up-secure" ]]; then
		echo "---- last logs ($project_secure)" >&2
		dcs logs --no-color --tail=40 >&2 2>&1 || true
	fi
	if [[ -e "$work/up" ]]; then
		dc down --volumes --remove-orphans --timeout 10 >"$work/down.log" 2>&1 || cat "$work/down.log" >&2
	fi
	if [[ -e "$work/up-secure" ]]; then
		dcs down --volumes --remove-orphans --timeout 10 >"$work/down.log" 2>&1 || cat "$work/down.log" >&2
		say "cleaned up project $project_secure"
	fi
	docker image rm "$IDEMNODE_IMAGE" "$IDEMNODE_ORDERS_IMAGE" >/dev/null 2>&1 || true
	rm -rf "$work"
	say "cleaned up project $project"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "building binary and image $IDEMNODE_IMAGE"
scripts/docker-image.sh "$IDEMNODE_IMAGE" "$bin"

say "starting compose project $project"
touch "$work/up" # from here on, cleanup runs `down`
dc up -d >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; die "compose up"; }

declare -A grpc http
for n in node1 node2 node3; do
	grpc[$n]=$(dc port "$n" 7400 | tr -d '\r')
	http[$n]=$(dc port "$n" 7403 | tr -d '\r')
	[[ "${grpc[$n]}" == 127.0.0.1:* && "${http[$n]}" == 127.0.0.1:* ]] ||
		die "$n publishes '${grpc[$n]}' '${http[$n]}', expected 127.0.0.1 ports"
done

status_of() { "$bin" status --addr "${grpc[$1]}" "${client_tls[@]}" --timeout 2s -o json 2>/dev/null; }

# leader_among NODE... prints the node that reports itself leader, if any.
leader_among() {
	local n
	for n in "$@"; do
		if [[ "$(status_of "$n" | jq -r .state 2>/dev/null)" == leader ]]; then
			echo "$n"; return 0
		fi
	done
	return 1
}

# wait_leader SECONDS NODE... waits until one of NODEs leads and every one of
# them is ready (/readyz: a leader is known and it has caught up).
wait_leader() {
	local limit=$1 deadline=$((SECONDS + $1)) l n ok
	shift
	while ((SECONDS < deadline)); do
		if l=$(leader_among "$@"); then
			ok=1
			for n in "$@"; do curl -fsS -o /dev/null "http://${http[$n]}/readyz" 2>/dev/null || ok=0; done
			if ((ok)); then echo "$l"; return 0; fi
		fi
		sleep 0.5
	done
	die "no ready leader among $* after ${limit}s"
}

say "waiting for a leader"
leader=$(wait_leader 60 node1 node2 node3)
say "leader is $leader (${grpc[$leader]}); members:"
"$bin" members --addr "${grpc[$leader]}" --timeout 5s

voters=$("$bin" members --addr "${grpc[$leader]}" --timeout 5s -o json | jq '[.servers[] | select(.voter)] | length')
[[ "$voters" == 3 ]] || die "expected 3 voters, got $voters"
metrics=$(curl -fsS "http://${http[$leader]}/metrics") || die "/metrics on $leader"
grep -q '^# TYPE' <<<"$metrics" || die "/metrics on $leader has no metric families"

key="smoke-$id"
ids=(--tenant smoke --scope 'POST /v1/charges' --key "$key")
printf '{"amount":100,"currency":"EUR"}' >"$work/request.json"
printf '{"id":"ch_%s","amount":100}' "$id" >"$work/response.json"
printf '{"amount":999}' >"$work/other.json"
want_body=$(base64 -w0 <"$work/response.json")

claim() { # claim NODE REQUEST_FILE: prints the JSON answer; exit code as the CLI's
	"$bin" claim --addr "${grpc[$1]}" "${ids[@]}" --request-file "$2" --owner "smoke-$id" --timeout 15s -o json
}
expect_replay() { # expect_replay NODE: the completed record, byte for byte (exit 4: completed)
	local out rc=0
	out=$(claim "$1" "$work/request.json") || rc=$?
	((rc == 4)) || die "replay through $1 exited $rc, want 4 (completed): $out"
	[[ "$(jq -r .outcome <<<"$out")" == completed ]] || die "replay through $1: $out"
	[[ "$(jq -r .response.body_base64 <<<"$out")" == "$want_body" ]] || die "replay through $1 changed the body: $out"
	[[ "$(jq -r .response.status <<<"$out")" == 201 ]] || die "replay through $1 changed the status: $out"
}

say "claim, complete, replay through the leader $leader"
out=$(claim "$leader" "$work/request.json") || die "claim: $out"
[[ "$(jq -r .outcome <<<"$out")" == won ]] || die "first claim did not win: $out"
token=$(jq -r .token <<<"$out")
out=$("$bin" complete --addr "${grpc[$leader]}" "${ids[@]}" --token "$token" --status 201 \
	--header 'Content-Type: application/json' --body-file "$work/response.json" --timeout 15s -o json) ||
	die "complete: $out"
[[ "$(jq -r .outcome <<<"$out")" == ok ]] || die "complete: $out"
expect_replay "$leader"

followers=()
for n in node1 node2 node3; do [[ "$n" == "$leader" ]] || followers+=("$n"); done
for n in "${followers[@]}"; do
	say "replay through follower $n (forwarded to the leader)"
	expect_replay "$n"
done
rc=0
out=$(claim "${followers[0]}" "$work/other.json") || rc=$?
((rc == 1)) || die "a different request under the same key exited $rc, want 1 (mismatch): $out"
[[ "$(jq -r .outcome <<<"$out")" == mismatch ]] || die "expected mismatch: $out"

say "the JSON API through ${leader}'s published port"
api=$(dc port "$leader" 7404 | tr -d '\r')
out=$(curl -fsS "http://$api/v1/get" -H 'Content-Type: application/json' -d '{"id":{"tenant":"smoke","scope":"POST /v1/charges","key":"'"$key"'"}}') ||
	die "JSON get: $out"
[[ "$(jq -r .record.response.body <<<"$out")" == "$want_body" ]] || die "JSON get of the completed record: $out"

say "idemnode proxy in front of the example order service"
# order KEY [CURL_ARGS...]: POSTs an order through $proxy; prints the status.
order() { curl -sS -D "$work/order.h" -o "$work/order.b" -w '%{http_code}' -X POST "http://$proxy/orders" -H "Idempotency-Key: $1" "${@:2}" -d '{"item":"book"}'; }
# orders_once OPS_ADDR KEY [CURL_ARGS...]: once $proxy is ready, an order and
# its retry under KEY get the same 201, the retry marked replayed, and the
# order service created one order.
orders_once() {
	local ops=$1 key=$2 first count
	shift 2
	for _ in $(seq 1 60); do curl -fsS -o /dev/null "http://$ops/readyz" 2>/dev/null && break; sleep 0.5; done
	curl -fsS -o /dev/null "http://$ops/readyz" || die "the proxy is not ready"
	[[ "$(order "$key" "$@")" == 201 ]] || die "first order through the proxy: $(cat "$work/order.b")"
	first=$(cat "$work/order.b")
	[[ "$(order "$key" "$@")" == 201 && "$(cat "$work/order.b")" == "$first" ]] || die "retried order: $(cat "$work/order.b"), want $first"
	grep -qi '^Idempotent-Replayed: true' "$work/order.h" || die "the retried order is not marked replayed"
	count=$(curl -fsS "http://$proxy/orders/count?key=$key" | jq -r .count)
	[[ "$count" == 1 ]] || die "the order service created $count orders for one key, want 1"
}
proxy=$(dc port proxy 8000 | tr -d '\r')
orders_once "$(dc port proxy 8001 | tr -d '\r')" "order-$id"
[[ "$(curl -sS -o /dev/null -w '%{http_code}' -X POST "http://$proxy/orders" -d '{}')" == 400 ]] || die "an order without a key was not refused"

cid=$(dc ps -q "$leader" | tr -d '\r')
[[ -n "$cid" ]] || die "no container for $leader"
say "docker kill $leader ($cid)"
docker kill "$cid" >/dev/null
killed=$leader

leader=$(wait_leader 60 "${followers[@]}")
say "new leader is $leader"
for n in "${followers[@]}"; do
	say "replay through survivor $n"
	expect_replay "$n"
done
out=$("$bin" claim --addr "${grpc[${followers[1]}]}" --tenant smoke --scope 'POST /v1/charges' \
	--key "$key-after" --fingerprint 02 --timeout 15s -o json) || die "claim after failover: $out"
[[ "$(jq -r .outcome <<<"$out")" == won ]] || die "a new key after failover did not win: $out"

say "restarting $killed from its volume"
dc start "$killed" >"$work/start.log" 2>&1 || { cat "$work/start.log" >&2; die "start $killed"; }
# Its published port may change on restart.
grpc[$killed]=$(dc port "$killed" 7400 | tr -d '\r')
http[$killed]=$(dc port "$killed" 7403 | tr -d '\r')
wait_leader 60 node1 node2 node3 >/dev/null
# A restarted node applies its log once the leader tells it the commit
# index, so its local (stale) state catches up shortly after it serves.
caught_up=
for _ in $(seq 1 60); do
	out=$("$bin" get --addr "${grpc[$killed]}" "${ids[@]}" --consistency stale --timeout 5s -o json 2>&1) || true
	if [[ "$(jq -r '.record.state // empty' <<<"$out" 2>/dev/null | tr '[:upper:]' '[:lower:]')" == completed ]]; then
		caught_up=1
		break
	fi
	sleep 0.5
done
[[ -n $caught_up ]] || die "$killed did not catch up within 30 s: $out"
say "$killed caught up"
expect_replay "$killed"

say "plaintext compose passed (cluster, JSON API, proxy, failover, restart); taking it down"
dc down --volumes --remove-orphans --timeout 10 >"$work/down.log" 2>&1 || { cat "$work/down.log" >&2; die "compose down"; }
rm "$work/up"

say "starting the secure compose project $project_secure"
touch "$work/up-secure" # from here on, cleanup runs its `down`
dcs up -d >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; die "secure compose up"; }
for n in node1 node2 node3; do
	grpc[$n]=$(dcs port "$n" 7400 | tr -d '\r')
	http[$n]=$(dcs port "$n" 7403 | tr -d '\r')
done
# Tenant acme's certificate and the cluster CA, as a user takes them out of
# the init containers' volume.
n1=$(dcs ps -q node1 | tr -d '\r')
for f in cluster-ca.crt client-acme.crt client-acme.key; do docker cp "$n1:/pki/$f" "$work/$f"; done
# The CA keys stay in the pki-ca volume: its name is read from the init
# container that made the cluster CA (so that a renamed volume cannot make
# the check pass unseen), and no container that serves (the nodes, the
# proxy, the order service) may mount it.
ca_vol=$(docker inspect -f '{{range .Mounts}}{{if eq .Destination "/data"}}{{.Name}}{{end}}{{end}}' \
	"$(dcs ps -a -q pki-cluster-ca | tr -d '\r')")
[[ $ca_vol == *pki-ca ]] || die "pki-cluster-ca has no pki-ca volume at /data (it has '$ca_vol')"
for s in $(dcs config --services); do
	[[ $s == pki-* ]] && continue
	for c in $(dcs ps -a -q "$s" | tr -d '\r'); do
		mounts=" $(docker inspect -f '{{range .Mounts}}{{.Name}} {{end}}' "$c") "
		[[ $mounts != *" $ca_vol "* ]] || die "$s mounts $ca_vol, the volume of the CA keys"
		served=1
	done
done
[[ -n ${served:-} ]] || die "no serving container found to check for $ca_vol"
say "no node, proxy or order service mounts $ca_vol"
client_tls=(--tls-ca "$work/cluster-ca.crt" --tls-cert "$work/client-acme.crt" --tls-key "$work/client-acme.key")
leader=$(wait_leader 60 node1 node2 node3)
say "leader is $leader; a claim as acme through each node, over mutual TLS"
for n in node1 node2 node3; do
	out=$("$bin" claim --addr "${grpc[$n]}" "${client_tls[@]}" --key "secure-$id-$n" --fingerprint 01 --timeout 15s -o json) ||
		die "claim as acme through $n: $out"
	[[ "$(jq -r .outcome <<<"$out")" == won ]] || die "claim as acme through $n did not win: $out"
done
rc=0
out=$("$bin" claim --addr "${grpc[$leader]}" --key "secure-$id-plain" --fingerprint 01 --timeout 5s -o json 2>&1) || rc=$?
((rc == 5)) && grep -q CONNECTION_LOST <<<"$out" || die "a plaintext claim exited $rc, want 5 (CONNECTION_LOST): $out"
rc=0
out=$("$bin" claim --addr "${grpc[$leader]}" --tls-ca "$work/cluster-ca.crt" --key "secure-$id-nocert" --fingerprint 01 --timeout 5s -o json 2>&1) || rc=$?
((rc == 6)) && grep -q CLIENT_CERT_REQUIRED <<<"$out" || die "a claim without a client certificate exited $rc, want 6: $out"

say "the proxy, a delegate, in front of the order service for tenant acme"
proxy=$(dcs port proxy 8000 | tr -d '\r')
orders_once "$(dcs port proxy 8001 | tr -d '\r')" "order-$id" -H 'X-Tenant: acme'
code=$(order "order-$id-none")
[[ "$code" == 401 ]] || die "an order without X-Tenant answered $code, want 401: $(cat "$work/order.b")"

say "PASS: docker smoke test (image; compose cluster, JSON API, proxy, failover, restart; secure compose, mTLS, delegate proxy)"
