"""A walk-through of idemnode's JSON API from Python (standard library only).

    python3 examples/python/demo.py http://127.0.0.1:7404

or, with no argument, against the cluster the IDEMNODE_* variables name
(`source idemnode-cluster/env` after `scripts/cluster.sh up --secure`):
IDEMNODE_JSON_URL, IDEMNODE_TLS_CA/CERT/KEY, and IDEMNODE_TENANT for the
records' tenant (default demo; with --auth, the certificate's).

1. claim a key, complete it with a binary response, and replay it byte for byte;
2. Client.do twice with the same key: the function runs once, the second call
   is answered from the record.
Exits 1 if anything is not as expected.
"""

import hashlib
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idemnode import Client, RecordId, MismatchError, client_from_env  # noqa: E402


def check(ok: bool, what: str) -> None:
    print(("  ok    " if ok else "  FAIL  ") + what)
    if not ok:
        sys.exit(1)


def main() -> None:
    if len(sys.argv) == 2:
        c = Client(sys.argv[1])
    elif len(sys.argv) == 1 and os.environ.get("IDEMNODE_JSON_URL"):
        c = client_from_env()
    else:
        sys.exit(f"usage: {sys.argv[0]} http://127.0.0.1:7404   (a node's JSON API, --api-addr; "
                 "without it, IDEMNODE_JSON_URL and IDEMNODE_TLS_*)")
    tenant = os.environ.get("IDEMNODE_TENANT", "demo")
    st = c.status()
    print(f"node {st['node_id']} is {st['state']}, leader {st['leader_id']}, applied index {st['applied_index']}")

    print("\n1. claim, complete, replay")
    run = uuid.uuid4().hex[:8]  # a fresh key per run of the demo
    id = RecordId(tenant, "POST /v1/charges", f"order-{run}")
    request = b'{"amount":100,"currency":"EUR"}'
    fingerprint = hashlib.sha256(request).digest()
    won = c.claim(id, fingerprint, owner="worker-1")
    print(f"  claim by worker-1:    {won.outcome}, token {won.token}, lease until {won.lease_expires_at}")
    check(won.outcome == "won", "the first claim wins")
    print(f"  claim by worker-2:    {c.claim(id, fingerprint, owner='worker-2').outcome}")

    body = f'{{"id":"ch_{run}","amount":100}}\n'.encode() + bytes([0, 255, 128])  # not even UTF-8
    outcome = c.complete(id, won.token, 201, [("Content-Type", "application/json")], body)
    print(f"  complete:             {outcome}")
    check(outcome == "ok", "complete answers ok")

    replay = c.claim(id, fingerprint, owner="worker-2")
    print(f"  claim by worker-2:    {replay.outcome}, status {replay.response.status}, body {replay.response.body!r}")
    check(replay.outcome == "completed", "a retry is answered with the stored response")
    check(replay.response.body == body, "the replayed body is byte-identical")
    other = c.claim(id, hashlib.sha256(b'{"amount":999}').digest(), owner="worker-3")
    print(f"  another request:      {other.outcome}")
    check(other.outcome == "mismatch", "the same key with another request is refused")

    print("\n2. do() twice with the same key")
    id = RecordId(tenant, "POST /v1/charges", f"order-{run}-do")
    runs = []

    def charge():
        runs.append(1)
        print("  charge() runs: the side effect happens here")
        return 201, {"Content-Type": "application/json"}, f'{{"id":"ch_{run}_do"}}'.encode()

    first = c.do(id, request, charge)
    print(f"  first do:  executed={first.executed} replayed={first.replayed} body {first.response.body!r}")
    second = c.do(id, request, charge)
    print(f"  second do: executed={second.executed} replayed={second.replayed} body {second.response.body!r}")
    check(len(runs) == 1, "the function ran once")
    check(first.executed and not first.replayed and second.replayed and not second.executed,
          "the second call was replayed, not executed")
    check(second.response == first.response, "with the same response")
    try:
        c.do(id, b'{"amount":999}', charge)
        check(False, "do with another request raises MismatchError")
    except MismatchError as e:
        check(len(runs) == 1, f"do with another request raises MismatchError ({e})")
    print("\nPASS")


if __name__ == "__main__":
    main()
