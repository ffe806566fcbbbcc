"""A client for idemnode's HTTP/JSON API, using only the Python standard library.

Every idemnode node serves its gRPC API as JSON over HTTP (docs/API.md, "The
HTTP/JSON API"): ``POST /v1/<method>`` with the request message as a protojson
body, ``GET /v1/status``. This module speaks that API and decodes the answers
into Python types:

* bytes (fingerprint, response body) are ``bytes``, decoded from base64;
* tokens and other uint64 fields are ``int`` (they travel as JSON strings);
* timestamps are timezone-aware ``datetime`` objects, or None when absent;
* an outcome is a short lower-case string, the enum name without its prefix:

  ==================== ============== ==========================================
  proto                Python         meaning
  ==================== ============== ==========================================
  OUTCOME_WON          "won"          you hold the key: run it, then complete
  OUTCOME_IN_PROGRESS  "in_progress"  another holder runs it
  OUTCOME_COMPLETED    "completed"    done before: here is the stored response
  OUTCOME_MISMATCH     "mismatch"     the key belongs to a different request
  OUTCOME_FENCED       "fenced"       your token no longer holds the record
  OUTCOME_NOT_FOUND    "not_found"    no such record (or it expired)
  OUTCOME_OK           "ok"           it took effect
  OUTCOME_EXPIRED      "expired"      it ran (or may have) and its key expired:
                                      do not run it again (--tombstone-ttl)
  ==================== ============== ==========================================

Outcomes are answers, not errors (HTTP 200). Errors are raised as
IdemnodeError; 503 answers and connection failures are retried with the same
body, since every idemnode operation is safe to send twice.

``Client.do`` runs a function at most once per key, like the Go SDK's Do.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import random
import ssl
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

__all__ = ["Client", "RecordId", "Response", "Claim", "Record", "Extended", "Read",
           "AbandonedEvent", "FeedUpdate", "DoResult", "IdemnodeError", "MismatchError", "InProgressError", "FencedError", "ExpiredError"]

Duration = Union[None, int, float, str, timedelta]


class RecordId(NamedTuple):
    """Addresses a record: the same key under two scopes or tenants is two records."""
    tenant: str
    scope: str
    key: str


class Response(NamedTuple):
    """A stored response: status, ordered (name, value) header pairs, body bytes."""
    status: int
    headers: list
    body: bytes


@dataclass
class Claim:
    """The answer of claim. token is 0 unless won or completed; response only when completed."""
    outcome: str
    token: int
    attempt: int
    lease_expires_at: Optional[datetime]
    expires_at: Optional[datetime]
    response: Optional[Response]
    owner: str
    # recovery_point: (name, data) of the last checkpoint, on a won takeover.
    recovery_point: Optional[tuple] = None


@dataclass
class Record:
    """A record as get and wait return it; state is "pending" or "completed"."""
    id: RecordId
    state: str
    fingerprint: bytes
    token: int
    attempt: int
    lease_expires_at: Optional[datetime]
    created_at: Optional[datetime]
    expires_at: Optional[datetime]
    completed_at: Optional[datetime]
    response: Optional[Response]


@dataclass
class Extended:
    """The answer of extend: "ok" with the lease's new end, "fenced" or "not_found"."""
    outcome: str
    lease_expires_at: Optional[datetime]


@dataclass
class Read:
    """The answer of get ("ok" or "not_found") and wait ("completed", "not_found", "in_progress")."""
    outcome: str
    record: Optional[Record]


class AbandonedEvent(NamedTuple):
    """One event of the feed of abandoned claims (docs/API.md, "Abandoned claims").

    kind is "abandoned" (the lease ran out while pending, without complete or
    release: the side effect may or may not have run) or "resolved"
    (resolution: "completed", "released", "taken_over" or "expired";
    resolves_seq: the abandoned event it settles)."""
    seq: int
    kind: str
    resolution: str
    resolves_seq: int
    id: RecordId
    token: int
    attempt: int
    recovery_point: str
    lease_expires_at: Optional[datetime]
    at: Optional[datetime]
    keep_until: Optional[datetime]


class FeedUpdate(NamedTuple):
    """What watch_abandoned yields: events in increasing seq, and the cursor
    to keep (every event of the watched tenant up to it was yielded)."""
    events: List[AbandonedEvent]
    caught_up_seq: int


@dataclass
class DoResult:
    """What do produced: fn's response (executed) or the stored one (replayed)."""
    response: Response
    executed: bool
    replayed: bool
    token: int


class IdemnodeError(Exception):
    """A non-200 answer, or no answer at all.

    http_status is the HTTP status (None when no node answered); code the gRPC
    code number of the google.rpc.Status body (3 InvalidArgument, 14 Unavailable,
    ...); reason the ErrorInfo reason (INVALID_FIELD, NO_LEADER, RATE_LIMITED, ...;
    "UNREACHABLE" when no node answered, "" when the body had none); metadata
    the ErrorInfo metadata (e.g. {"field": "id.key", "limit": "..."}); retry_after
    the advised delay in seconds (Retry-After or RetryInfo), or None.
    """

    def __init__(self, http_status, code, reason, message, metadata=None, retry_after=None):
        super().__init__(f"idemnode: HTTP {http_status} {reason or code}: {message}")
        self.http_status, self.code, self.reason, self.message = http_status, code, reason, message
        self.metadata, self.retry_after = metadata or {}, retry_after


class MismatchError(Exception):
    """do: the key was used before with a different request (map it to HTTP 422)."""


class InProgressError(Exception):
    """do: another holder still runs the key when do's deadline ended."""


class FencedError(Exception):
    """do: fn ran, but its completion was refused (the lease was lost and taken over)."""


class ExpiredError(Exception):
    """do: the key expired after its operation ran (or may have), and the
    server keeps a tombstone: fn is not run again (map it to HTTP 410)."""


def _seconds(d: Duration) -> Optional[float]:
    """Duration as seconds: a number, a timedelta, or a protojson string like "30s"."""
    if d is None or isinstance(d, (int, float)):
        return d
    if isinstance(d, timedelta):
        return d.total_seconds()
    if isinstance(d, str) and d.endswith("s"):
        return float(d[:-1])
    raise ValueError(f"duration {d!r}: want seconds, a timedelta or a string like '30s'")


def _duration(d: Duration) -> Optional[str]:
    s = _seconds(d)
    return None if s is None else f"{s:.9f}".rstrip("0").rstrip(".") + "s"


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def _time(s: Optional[str]) -> Optional[datetime]:
    return datetime.fromisoformat(s.replace("Z", "+00:00")) if s else None


def _outcome(s: str) -> str:
    return s.removeprefix("OUTCOME_").lower()


def _response(m: Optional[dict]) -> Optional[Response]:
    if m is None:
        return None
    return Response(m["status"], [(h["name"], h["value"]) for h in m["headers"]],
                    base64.b64decode(m["body"]))


def _record(m: Optional[dict]) -> Optional[Record]:
    if m is None:
        return None
    return Record(RecordId(**m["id"]), m["state"].removeprefix("STATE_").lower(),
                  base64.b64decode(m["fingerprint"]), int(m["token"]), m["attempt"],
                  _time(m["leaseExpiresAt"]), _time(m["createdAt"]), _time(m["expiresAt"]),
                  _time(m["completedAt"]), _response(m["response"]))


def _event(m: dict) -> AbandonedEvent:
    resolution = m["resolution"].removeprefix("RESOLUTION_").lower()
    return AbandonedEvent(int(m["seq"]), m["kind"].removeprefix("KIND_").lower(),
                          "" if resolution == "unspecified" else resolution, int(m["resolvesSeq"]),
                          RecordId(**m["id"]), int(m["token"]), m["attempt"], m["recoveryPoint"],
                          _time(m["leaseExpiresAt"]), _time(m["at"]), _time(m["keepUntil"]))


def _error(status: int, headers, raw: bytes) -> IdemnodeError:
    """Decodes a google.rpc.Status body (or whatever a proxy answered)."""
    try:
        body = json.loads(raw)
        code, message, details = body.get("code"), body.get("message", ""), body.get("details") or []
    except (ValueError, AttributeError):
        code, message, details = None, raw[:200].decode("utf-8", "replace"), []
    reason, metadata, retry_after = "", {}, None
    for d in details:
        kind = d.get("@type", "")
        if kind.endswith("google.rpc.ErrorInfo"):
            reason, metadata = d.get("reason", ""), d.get("metadata") or {}
        elif kind.endswith("google.rpc.RetryInfo") and d.get("retryDelay"):
            retry_after = _seconds(d["retryDelay"])
    if headers.get("Retry-After", "").isdigit():
        retry_after = float(headers["Retry-After"])
    return IdemnodeError(status, code, reason, message, metadata, retry_after)


def tls_context(ca: Optional[str] = None, cert: Optional[str] = None, key: Optional[str] = None) -> ssl.SSLContext:
    """The TLS of a cluster's JSON API: ca verifies the nodes (a PEM file, the
    cluster CA; None: the system's roots), cert and key are the client
    certificate that nodes with --tls-client-ca require (with --auth, it names
    the tenant)."""
    ctx = ssl.create_default_context(cafile=ca)
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def client_from_env(timeout: float = 10.0) -> Client:
    """A Client as the CLI's variables say (scripts/cluster.sh's env file):
    IDEMNODE_JSON_URL (comma-separated URLs), IDEMNODE_TLS_CA,
    IDEMNODE_TLS_CERT and IDEMNODE_TLS_KEY for https://, and
    IDEMNODE_AUTH_TOKEN."""
    urls = [u.strip() for u in os.environ.get("IDEMNODE_JSON_URL", "").split(",") if u.strip()]
    if not urls:
        raise ValueError("IDEMNODE_JSON_URL is not set")
    ca, cert, key = (os.environ.get("IDEMNODE_TLS_" + v) or None for v in ("CA", "CERT", "KEY"))
    ctx = tls_context(ca, cert, key) if ca or cert else None
    return Client(urls, token=os.environ.get("IDEMNODE_AUTH_TOKEN") or None, timeout=timeout, ssl_context=ctx)


class Client:
    """A client of one idemnode cluster.

    urls: one node's base URL ("http://127.0.0.1:7404") or several, tried in
    order when one cannot be reached; any node answers (followers forward to
    the leader). token: a bearer token for ``serve --auth``. timeout bounds
    each call in seconds, retries included, plus the server-side wait the call
    asks for. ssl_context is the TLS of https:// URLs (see tls_context; None:
    the system's roots, no client certificate). A Client is safe to share
    between threads (one connection per call).
    """

    def __init__(self, urls: Union[str, Sequence[str]], token: Optional[str] = None, timeout: float = 10.0,
                 ssl_context: Optional[ssl.SSLContext] = None):
        self.urls = [urls] if isinstance(urls, str) else list(urls)
        if not self.urls:
            raise ValueError("Client: no URL")
        self.token, self.timeout, self.ssl_context = token, timeout, ssl_context
        self._next = 0  # the node that answered last; tried first

    # -- transport ---------------------------------------------------------

    def _call(self, method: str, path: str, body: Optional[dict] = None, wait: float = 0.0) -> dict:
        """Sends one call, retrying 503 answers and connection failures with the same body."""
        data = None if body is None else json.dumps(body).encode()
        deadline = time.monotonic() + self.timeout + wait
        attempt = 0
        while True:
            i = self._next % len(self.urls)
            left = deadline - time.monotonic()
            try:
                status, headers, raw = self._send(self.urls[i], method, path, data, left)
                if status == 200:
                    return json.loads(raw)
                err = _error(status, headers, raw)
                if status != 503:
                    raise err
            except (OSError, http.client.HTTPException) as e:  # refused, reset, timed out
                err = IdemnodeError(None, 14, "UNREACHABLE", f"{self.urls[i]}: {e!r}")
            self._next = i + 1  # the next attempt goes to the next node
            attempt += 1
            # Back off once every node has had its turn: full jitter, at most 0.8 s.
            pause = 0.0 if attempt % len(self.urls) else random.uniform(0.025, 0.05 * 2 ** min(attempt, 4))
            if time.monotonic() + pause >= deadline:
                raise err
            time.sleep(pause)

    def _connect(self, u: urllib.parse.SplitResult, timeout: float) -> http.client.HTTPConnection:
        if u.scheme == "https":
            return http.client.HTTPSConnection(u.netloc, timeout=timeout, context=self.ssl_context)
        return http.client.HTTPConnection(u.netloc, timeout=timeout)

    def _send(self, url: str, method: str, path: str, data: Optional[bytes], left: float):
        u = urllib.parse.urlsplit(url)
        conn = self._connect(u, max(left, 0.001))
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   # The server answers (a wait: IN_PROGRESS) before our socket gives up.
                   "Grpc-Timeout": f"{max(1, int((left - min(0.25, left / 10)) * 1000))}m"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            conn.request(method, u.path.rstrip("/") + path, body=data, headers=headers)
            r = conn.getresponse()
            return r.status, r.headers, r.read()
        finally:
            conn.close()

    # -- operations --------------------------------------------------------

    def claim(self, id: RecordId, fingerprint: bytes, owner: str, lease: Duration = None,
              ttl: Duration = None, wait: Duration = None) -> Claim:
        """Claims id for the request identified by fingerprint (<= 64 bytes).

        Answers "won" (you hold the key: run the side effect, then complete or
        release with the token), "completed" (with the stored response),
        "in_progress" (another owner holds a live lease) or "mismatch". Reuse
        the same owner when retrying this claim: a won claim answers "won" with
        the same token again. lease (default 30s) and ttl (24h) are seconds or
        "30s" strings; wait > 0 holds an in-progress claim on the server until
        the holder finishes or its lease ends, then claims again.
        """
        body = {"id": id._asdict(), "fingerprint": _b64(fingerprint), "owner": owner,
                "lease": _duration(lease), "ttl": _duration(ttl), "wait": _duration(wait)}
        m = self._call("POST", "/v1/claim", {k: v for k, v in body.items() if v is not None},
                       wait=_seconds(wait) or 0.0)
        point = m.get("recoveryPoint")
        return Claim(_outcome(m["outcome"]), int(m["token"]), m["attempt"], _time(m["leaseExpiresAt"]),
                     _time(m["expiresAt"]), _response(m["response"]), owner,
                     (point["name"], base64.b64decode(point.get("data") or "")) if point else None)

    def complete(self, id: RecordId, token: int, status: int, headers, body: bytes) -> str:
        """Stores the holder's response under its token, to be replayed byte for byte.

        headers: (name, value) pairs in order (a name may repeat) or a dict.
        Answers "ok" (also for a retry with the same response), "fenced" (the
        token lost the record), "mismatch" (completed before with another
        response) or "not_found".
        """
        pairs = headers.items() if isinstance(headers, dict) else headers
        resp = {"status": status, "headers": [{"name": n, "value": v} for n, v in pairs], "body": _b64(body)}
        m = self._call("POST", "/v1/complete", {"id": id._asdict(), "token": str(token), "response": resp})
        return _outcome(m["outcome"])

    def release(self, id: RecordId, token: int) -> str:
        """Deletes the holder's pending record after a transient failure, so the
        next claim runs again: "ok" (also when already gone) or "fenced"
        (another token holds it, or it is completed)."""
        m = self._call("POST", "/v1/release", {"id": id._asdict(), "token": str(token)})
        return _outcome(m["outcome"])

    def extend(self, id: RecordId, token: int, lease: Duration) -> Extended:
        """Pushes the holder's lease to at least `lease` from now ("ok"; a lease
        never shortens), or answers "fenced" / "not_found"."""
        m = self._call("POST", "/v1/extend", {"id": id._asdict(), "token": str(token), "lease": _duration(lease)})
        return Extended(_outcome(m["outcome"]), _time(m["leaseExpiresAt"]))

    def checkpoint(self, id: RecordId, token: int, point: str, data: bytes = b"") -> str:
        """Records that step `point` of the holder's operation is done, with
        what resuming after it needs (<= 64 KiB): "ok" (also for a retry with
        the same data), "fenced", "mismatch" (this point was recorded with
        other data) or "not_found". A claim that takes the key over returns it
        as Claim.recovery_point."""
        m = self._call("POST", "/v1/checkpoint", {"id": id._asdict(), "token": str(token), "point": point,
                                                  "data": _b64(data)})
        return _outcome(m["outcome"])

    def get(self, id: RecordId, stale: bool = False) -> Read:
        """Reads the record: "ok" with it, or "not_found". Linearizable unless
        stale=True, which the answering node serves from its local state."""
        body = {"id": id._asdict(), "consistency": "CONSISTENCY_STALE" if stale else "CONSISTENCY_LINEARIZABLE"}
        m = self._call("POST", "/v1/get", body)
        return Read(_outcome(m["outcome"]), _record(m["record"]))

    def wait(self, id: RecordId, timeout: Duration = None) -> Read:
        """Held by the server until the record leaves pending: "completed" with
        the record, "not_found" when it is gone (released or expired: claim
        again), or "in_progress" when the timeout (default, and for 0: 30s)
        ends first. The server wakes it; nothing polls."""
        t = _seconds(timeout)
        body = {"id": id._asdict()}
        if t is not None and t > 0:
            body["timeout"] = _duration(t)
        m = self._call("POST", "/v1/wait", body, wait=t if t and t > 0 else 30.0)
        return Read(_outcome(m["outcome"]), _record(m["record"]))

    def list_abandoned(self, tenant: str = "", after: int = 0, page_size: int = 0) -> Tuple[List[AbandonedEvent], int]:
        """One page of the records abandoned now, each as the event that
        reported it, and the `after` of the next page (0: the last page).
        tenant "" is the caller's, "*" every tenant's (an admin identity)."""
        body = {"tenant": tenant, "afterSeq": str(after), "pageSize": page_size}
        m = self._call("POST", "/v1/list_abandoned", body)
        return [_event(e) for e in m["records"]], int(m["nextAfterSeq"])

    def watch_abandoned(self, tenant: str = "", after: int = 0, idle: float = 45.0) -> Iterator[FeedUpdate]:
        """Follows the feed of abandoned claims from the first event after
        `after`, yielding FeedUpdates until the caller stops iterating. A
        stream that breaks, or is silent for `idle` seconds (the server
        repeats its cursor every 15 s), is resumed on the next node from the
        last cursor yielded, so no event is missed or yielded twice: store
        caught_up_seq once an update is handled, and pass it as `after` when
        the watcher restarts. Raises IdemnodeError for a refusal (reason
        FEED_PRUNED: list the records abandoned now, then watch from 0)."""
        cursor, attempt = after, 0
        while True:
            url = self.urls[self._next % len(self.urls)]
            try:
                for up in self._stream(url, tenant, cursor, idle):
                    attempt = 0
                    if up.caught_up_seq <= cursor and not up.events:
                        continue  # the stream's start, or a heartbeat
                    yield up
                    cursor = max(cursor, up.caught_up_seq)
            except (OSError, http.client.HTTPException):
                pass  # refused, reset or silent: the next node
            except IdemnodeError as e:
                if e.code != 14:  # Unavailable (a node shutting down) is resumed elsewhere
                    raise
            self._next += 1
            attempt += 1
            time.sleep(random.uniform(0.025, 0.05 * 2 ** min(attempt, 4)))

    def _stream(self, url: str, tenant: str, after: int, idle: float) -> Iterator[FeedUpdate]:
        """One WatchAbandoned stream: newline-delimited {"result": ...} objects."""
        u = urllib.parse.urlsplit(url)
        conn = self._connect(u, idle)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            conn.request("POST", u.path.rstrip("/") + "/v1/watch_abandoned",
                         body=json.dumps({"tenant": tenant, "afterSeq": str(after)}).encode(), headers=headers)
            r = conn.getresponse()
            if r.status != 200:
                raise _error(r.status, r.headers, r.read())
            for line in r:
                if not line.strip():
                    continue
                m = json.loads(line)
                if "error" in m:
                    raise _error(400, {}, json.dumps(m["error"]).encode())
                res = m["result"]
                yield FeedUpdate([_event(e) for e in res.get("events", [])], int(res["caughtUpSeq"]))
        finally:
            conn.close()

    def status(self) -> dict:
        """The answering node's view: node_id, state (leader, follower, ...),
        leader_id, leader_addr, term, commit_index, applied_index, records,
        digest, fsm_time, cluster_id; keys in snake_case, counters as int."""
        m = self._call("GET", "/v1/status")
        out = {}
        for k, v in m.items():
            name = "".join("_" + c.lower() if c.isupper() else c for c in k)
            out[name] = _time(v) if name == "fsm_time" else int(v) if name in (
                "term", "commit_index", "applied_index", "records") else v
        return out

    # -- do ------------------------------------------------------------------

    def do(self, id: RecordId, request: bytes, fn: Callable[[], tuple], *, lease: Duration = "30s",
           ttl: Duration = "86400s", wait: Duration = 30.0) -> DoResult:
        """Runs fn at most once for (id, request) and answers every other call
        with what that run stored, like the Go SDK's client.Do.

        The fingerprint is SHA-256 of the request bytes; one owner nonce is
        made per do call and sent on every claim of it. Claim answers:
          won         fn() runs and returns (status, headers, body); do
                      completes the key with it and returns executed=True.
                      While fn runs, the lease is extended every third of it.
                      If fn raises, do releases the key (so a retry runs fn
                      again) and re-raises.
          completed   the stored response, replayed=True; fn is not called.
          in_progress another caller runs it: the claim is held on the server
                      (its `wait`) until the holder completes (the replay),
                      releases or dies (we win and run fn), at most `wait`
                      seconds in all; then InProgressError.
          mismatch    MismatchError: the key was used for another request.
          expired     ExpiredError: it ran before the key expired; fn is not called.
        If the completion is refused because the lease was lost, FencedError
        (fn ran, and another holder may run it again). If the server refuses
        to store the response (too large: 400), the key is released and the
        IdemnodeError raised.
        """
        fingerprint, owner = hashlib.sha256(request).digest(), uuid.uuid4().hex
        end = time.monotonic() + (_seconds(wait) or 0.0)
        while True:
            left = min(end - time.monotonic(), 600.0)  # the server holds a claim 10 min at most
            c = self.claim(id, fingerprint, owner, lease=lease, ttl=ttl, wait=left if left > 0 else None)
            if c.outcome == "won":
                return self._run(id, c.token, fn, _seconds(lease) or 30.0)
            if c.outcome == "completed":
                return DoResult(c.response, executed=False, replayed=True, token=c.token)
            if c.outcome == "mismatch":
                raise MismatchError(f"do {id}: the key was used with a different request")
            if c.outcome == "expired":
                raise ExpiredError(f"do {id}: the key expired at {c.expires_at} after its operation ran: not running it again")
            if c.outcome != "in_progress":
                raise RuntimeError(f"do {id}: unexpected claim outcome {c.outcome}")
            if time.monotonic() >= end:
                raise InProgressError(f"do {id}: still in progress (lease until {c.lease_expires_at})")

    def _run(self, id: RecordId, token: int, fn, lease: float) -> DoResult:
        stop = threading.Event()

        def keep_lease():  # like the Go SDK: extend every third of the lease
            while not stop.wait(lease / 3):
                try:
                    if self.extend(id, token, lease).outcome != "ok":
                        return  # lost: complete will answer fenced
                except IdemnodeError:
                    pass  # try again at the next tick
        keeper = threading.Thread(target=keep_lease, daemon=True)
        keeper.start()
        try:
            status, headers, body = fn()
            headers = list(headers.items() if isinstance(headers, dict) else headers)
            resp = Response(status, headers, bytes(body))  # a str body fails here, and releases
        except BaseException:
            stop.set()
            try:
                self.release(id, token)
            except IdemnodeError:
                pass  # the key stays claimed until its lease ends
            raise
        finally:
            stop.set()
            keeper.join()
        try:
            outcome = self.complete(id, token, status, headers, resp.body)
        except IdemnodeError as e:
            if e.http_status == 400:  # the server will not store it: let a retry run again
                self.release(id, token)
            raise
        if outcome != "ok":
            raise FencedError(f"do {id}: fn ran, but complete answered {outcome}")
        return DoResult(resp, executed=True, replayed=False, token=token)
