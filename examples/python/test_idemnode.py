"""Tests of idemnode.py.

LiveTest runs against a live node whose JSON API URL is in IDEMNODE_JSON_URL
(e.g. `idemnode serve --dev`, then IDEMNODE_JSON_URL=http://127.0.0.1:7404);
it is skipped when the variable is unset. TransportTest needs no node: it
checks the retry rules against a stub server of its own on 127.0.0.1.

    IDEMNODE_JSON_URL=http://127.0.0.1:7404 python3 -m unittest -v test_idemnode.py
"""

import http.server
import json
import os
import socket
import sys
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import idemnode  # noqa: E402
from idemnode import Client, IdemnodeError, MismatchError, InProgressError, RecordId  # noqa: E402

URL = os.environ.get("IDEMNODE_JSON_URL", "")
ALL_BYTES = bytes(range(256))


def new_id(test: str) -> RecordId:
    """A fresh key per test and run, so reruns against one node never collide."""
    return RecordId("py-tests", "POST /v1/" + test, uuid.uuid4().hex)


@unittest.skipUnless(URL, "IDEMNODE_JSON_URL is not set: start `idemnode serve --dev` and set it "
                          "to the node's JSON API (http://127.0.0.1:7404) to run the live tests")
class LiveTest(unittest.TestCase):
    def setUp(self):
        self.c = Client(URL, timeout=10.0)

    def test_outcomes(self):
        id, fp = new_id("outcomes"), b"\x01" * 32
        won = self.c.claim(id, fp, "owner-a", lease="20s", ttl="3600s")
        self.assertEqual(won.outcome, "won")
        self.assertGreater(won.token, 0)
        self.assertEqual(won.attempt, 1)
        self.assertIsNone(won.response)
        # The same owner again (a retried claim): won, same token.
        self.assertEqual(self.c.claim(id, fp, "owner-a").token, won.token)
        other = self.c.claim(id, fp, "owner-b")
        self.assertEqual((other.outcome, other.token), ("in_progress", 0))  # the holder's token stays hidden
        self.assertEqual(other.lease_expires_at, won.lease_expires_at)
        self.assertEqual(self.c.claim(id, b"\x02" * 32, "owner-b").outcome, "mismatch")
        # A stale token is fenced, everywhere.
        self.assertEqual(self.c.complete(id, won.token + 1, 200, [], b"x"), "fenced")
        self.assertEqual(self.c.release(id, won.token + 1), "fenced")
        self.assertEqual(self.c.extend(id, won.token + 1, 30).outcome, "fenced")
        ext = self.c.extend(id, won.token, 60)
        self.assertEqual(ext.outcome, "ok")
        self.assertGreater(ext.lease_expires_at, won.lease_expires_at)
        pending = self.c.get(id)
        self.assertEqual((pending.outcome, pending.record.state, pending.record.fingerprint),
                         ("ok", "pending", fp))

        headers = [("Content-Type", "application/octet-stream"), ("X-Dup", "1"), ("X-Dup", "2")]
        self.assertEqual(self.c.complete(id, won.token, 201, headers, ALL_BYTES), "ok")
        self.assertEqual(self.c.complete(id, won.token, 201, headers, ALL_BYTES), "ok")  # a retry
        self.assertEqual(self.c.complete(id, won.token, 500, headers, b"other"), "mismatch")
        replay = self.c.claim(id, fp, "owner-c")
        self.assertEqual((replay.outcome, replay.token), ("completed", won.token))
        self.assertEqual(replay.response.status, 201)
        self.assertEqual(replay.response.headers, headers)
        self.assertEqual(replay.response.body, ALL_BYTES)  # byte for byte, 0-255
        self.assertEqual(self.c.claim(id, b"\x03" * 32, "owner-c").outcome, "mismatch")
        self.assertEqual(self.c.release(id, won.token), "fenced")  # a completion is never deleted
        self.assertEqual(self.c.extend(id, won.token, 30).outcome, "fenced")

        for read in (self.c.get(id), self.c.get(id, stale=True)):
            self.assertEqual((read.outcome, read.record.state), ("ok", "completed"))
            self.assertEqual(read.record.id, id)
            self.assertEqual(read.record.response.body, ALL_BYTES)
            self.assertIsNotNone(read.record.completed_at)
        done = self.c.wait(id, timeout=5)
        self.assertEqual((done.outcome, done.record.response.body), ("completed", ALL_BYTES))

    def test_release(self):
        id, fp = new_id("release"), b"fp"
        won = self.c.claim(id, fp, "owner-a")
        self.assertEqual(self.c.release(id, won.token), "ok")
        self.assertEqual(self.c.release(id, won.token), "ok")  # idempotent
        self.assertEqual(self.c.get(id).outcome, "not_found")
        self.assertIsNone(self.c.get(id).record)
        self.assertEqual(self.c.complete(id, won.token, 200, [], b""), "not_found")
        self.assertEqual(self.c.extend(id, won.token, 30).outcome, "not_found")
        again = self.c.claim(id, fp, "owner-b")
        self.assertEqual(again.outcome, "won")
        self.assertGreater(again.token, won.token)  # tokens only grow
        self.assertEqual(self.c.complete(id, won.token, 200, [], b""), "fenced")  # the old holder

    def test_checkpoint_and_resume(self):
        id, fp = new_id("rides"), b"ride"
        won = self.c.claim(id, fp, "driver-1", lease="1s")
        self.assertIsNone(won.recovery_point)
        self.assertEqual(self.c.checkpoint(id, won.token, "charged", b"ch_1"), "ok")
        self.assertEqual(self.c.checkpoint(id, won.token, "charged", b"ch_1"), "ok")  # a retry
        self.assertEqual(self.c.checkpoint(id, won.token, "charged", b"ch_2"), "mismatch")
        self.assertEqual(self.c.checkpoint(id, won.token + 1, "charged", b"ch_1"), "fenced")
        time.sleep(1.1)  # the holder dies: its lease runs out
        taken = self.c.claim(id, fp, "driver-2")
        self.assertEqual((taken.outcome, taken.attempt), ("won", 2))
        self.assertEqual(taken.recovery_point, ("charged", b"ch_1"))
        self.assertEqual(self.c.checkpoint(id, won.token, "receipt-sent"), "fenced")  # the old holder
        with self.assertRaises(IdemnodeError) as bad:
            self.c.checkpoint(id, taken.token, "two words")
        self.assertEqual((bad.exception.reason, bad.exception.metadata.get("field")), ("INVALID_FIELD", "point"))

    def first_update(self, watch, match, timeout=20.0):
        """The first FeedUpdate of watch with an event that match accepts,
        and that event; fails after timeout (the watch runs in a thread: an
        idle stream yields nothing)."""
        found = []
        done = threading.Event()

        def follow():
            for up in watch:
                hits = [e for e in up.events if match(e)]
                if hits:
                    found.append((up, hits[0]))
                    done.set()
                    return
        threading.Thread(target=follow, daemon=True).start()
        if not done.wait(timeout):
            self.fail(f"no matching event in {timeout} s")
        return found[0]

    def test_abandoned_feed(self):
        id, fp = new_id("abandoned"), b"ride"
        won = self.c.claim(id, fp, "driver-1", lease="1s")
        self.assertEqual(self.c.checkpoint(id, won.token, "charged", b"ch_1"), "ok")
        # The holder dies: its lease runs out and the feed reports it once.
        up, ev = self.first_update(self.c.watch_abandoned("py-tests"), lambda e: e.id == id)
        self.assertEqual((ev.kind, ev.token, ev.attempt, ev.recovery_point), ("abandoned", won.token, 1, "charged"))
        self.assertGreaterEqual(up.caught_up_seq, ev.seq)
        listed, _ = self.c.list_abandoned("py-tests", page_size=1000)
        self.assertIn(ev.seq, [e.seq for e in listed])
        # The next claim takes it over and resumes: the feed says it is resolved,
        # and a watch resumed from the cursor does not repeat the abandonment.
        taken = self.c.claim(id, fp, "driver-2")
        self.assertEqual((taken.outcome, taken.recovery_point), ("won", ("charged", b"ch_1")))
        _, res = self.first_update(self.c.watch_abandoned("py-tests", after=up.caught_up_seq),
                                   lambda e: e.id == id)
        self.assertEqual((res.kind, res.resolution, res.resolves_seq, res.token), ("resolved", "taken_over", ev.seq, taken.token))
        with self.assertRaises(IdemnodeError) as bad:
            self.c.list_abandoned("two words")
        self.assertEqual((bad.exception.reason, bad.exception.metadata.get("field")), ("INVALID_FIELD", "tenant"))

    def test_wait(self):
        id = new_id("wait")
        self.assertEqual(self.c.wait(id, timeout=1).outcome, "not_found")
        won = self.c.claim(id, b"fp", "owner-a")
        start = time.monotonic()
        pending = self.c.wait(id, timeout=0.5)
        self.assertEqual((pending.outcome, pending.record.state), ("in_progress", "pending"))
        self.assertGreaterEqual(time.monotonic() - start, 0.4)
        # A wait is woken by the completion, long before its timeout.
        timer = threading.Timer(0.3, self.c.complete, (id, won.token, 200, [], b"done"))
        timer.start()
        start = time.monotonic()
        done = self.c.wait(id, timeout=20)
        timer.join()
        self.assertEqual((done.outcome, done.record.response.body), ("completed", b"done"))
        self.assertLess(time.monotonic() - start, 5)
        # ... and by a release: the record is gone, claim again.
        id2 = new_id("wait")
        won2 = self.c.claim(id2, b"fp", "owner-a")
        timer = threading.Timer(0.3, self.c.release, (id2, won2.token))
        timer.start()
        self.assertEqual(self.c.wait(id2, timeout=20).outcome, "not_found")
        timer.join()

    def test_do_runs_once(self):
        id, calls = new_id("do"), []

        def fn():
            calls.append(1)
            return 201, [("Content-Type", "application/json")], b'{"id":"ch_1"}'

        first = self.c.do(id, b'{"amount":100}', fn)
        self.assertEqual((first.executed, first.replayed), (True, False))
        for _ in range(3):
            again = self.c.do(id, b'{"amount":100}', fn)
            self.assertEqual((again.executed, again.replayed), (False, True))
            self.assertEqual(again.response, first.response)
            self.assertEqual(again.token, first.token)
        self.assertEqual(len(calls), 1)

    def test_do_mismatch(self):
        id = new_id("do-mismatch")
        self.c.do(id, b'{"amount":100}', lambda: (200, [], b"ok"))
        with self.assertRaises(MismatchError):
            self.c.do(id, b'{"amount":999}', lambda: self.fail("fn ran for a mismatched request"))

    def test_do_fn_raises_releases(self):
        id, calls = new_id("do-raises"), []

        def failing():
            calls.append(1)
            raise ConnectionError("the card processor timed out")

        with self.assertRaises(ConnectionError):
            self.c.do(id, b"req", failing)
        self.assertEqual(self.c.get(id).outcome, "not_found")  # released, not left pending

        def working():
            calls.append(1)
            return 200, {}, b"charged"

        res = self.c.do(id, b"req", working)
        self.assertEqual((res.executed, res.response.body, len(calls)), (True, b"charged", 2))

    def test_do_waits_for_holder(self):
        # Another process holds the key; do is held by the server and answers
        # with the holder's response once it completes, without running fn.
        id, req = new_id("do-wait"), b"req"
        holder = self.c.claim(id, idemnode.hashlib.sha256(req).digest(), "other-process")
        threading.Timer(0.5, self.c.complete, (id, holder.token, 202, [], b"theirs")).start()
        res = self.c.do(id, req, lambda: self.fail("fn ran while another holder completed"))
        self.assertEqual((res.replayed, res.response.body), (True, b"theirs"))
        # When the holder releases instead, do wins and runs fn.
        id2 = new_id("do-wait")
        holder = self.c.claim(id2, idemnode.hashlib.sha256(req).digest(), "other-process")
        threading.Timer(0.5, self.c.release, (id2, holder.token)).start()
        res = self.c.do(id2, req, lambda: (200, [], b"mine"))
        self.assertEqual((res.executed, res.response.body), (True, b"mine"))
        # When the holder outlasts do's wait: InProgressError.
        id3 = new_id("do-wait")
        self.c.claim(id3, idemnode.hashlib.sha256(req).digest(), "other-process")
        with self.assertRaises(InProgressError):
            self.c.do(id3, req, lambda: self.fail("fn ran while the key was held"), wait=0.5)

    def test_do_concurrent(self):
        id, lock, calls, results, errors = new_id("do-concurrent"), threading.Lock(), [0], [], []

        def fn():
            with lock:
                calls[0] += 1
            time.sleep(0.5)  # long enough for every other thread to find it in progress
            return 201, [("X-Run", "1")], ALL_BYTES

        def worker():
            try:
                results.append(Client(URL).do(id, b"same request", fn))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=worker) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        self.assertEqual(calls[0], 1)
        self.assertEqual(len(results), 20)
        self.assertEqual(sum(r.executed for r in results), 1)
        self.assertEqual({(r.response.status, r.response.body, r.token) for r in results},
                         {(201, ALL_BYTES, results[0].token)})

    def test_invalid_field(self):
        with self.assertRaises(IdemnodeError) as cm:
            self.c.claim(RecordId("py-tests", "POST /v1/x", ""), b"fp", "owner-a")
        e = cm.exception
        self.assertEqual((e.http_status, e.code, e.reason), (400, 3, "INVALID_FIELD"))
        self.assertEqual(e.metadata.get("field"), "id.key")
        self.assertIn("limit", e.metadata)
        with self.assertRaises(IdemnodeError) as cm:
            self.c.claim(new_id("invalid"), b"fp", "owner-a", ttl=31 * 86400)
        self.assertEqual((cm.exception.reason, cm.exception.metadata.get("field")), ("INVALID_FIELD", "ttl"))
        with self.assertRaises(IdemnodeError) as cm:
            self.c.complete(new_id("invalid"), 1, 200, [("Bad Name", "v")], b"")
        self.assertEqual(cm.exception.metadata.get("field"), "response.headers[0].name")

    def test_unknown_field_refused(self):
        with self.assertRaises(IdemnodeError) as cm:
            self.c._call("POST", "/v1/claim", {"id": new_id("unknown")._asdict(), "fingerprnt": "AQI="})
        self.assertEqual((cm.exception.http_status, cm.exception.reason), (400, "INVALID_JSON"))

    def test_failover_and_status(self):
        with socket.socket() as closed:  # bound, not listening: connections are refused
            closed.bind(("127.0.0.1", 0))
            c = Client([f"http://127.0.0.1:{closed.getsockname()[1]}", URL])
            st = c.status()
        self.assertIn(st["state"], ("leader", "follower"))
        self.assertIsInstance(st["applied_index"], int)
        self.assertTrue(st["node_id"])


class _Stub(http.server.BaseHTTPRequestHandler):
    """Answers the queued (status, headers, body) in turn, recording each request body."""
    answers, bodies = [], []

    def do_POST(self):
        _Stub.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        status, headers, body = _Stub.answers.pop(0)
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _status(code, reason, **extra):
    details = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
                "domain": "idemnode.io", "metadata": {}}] + list(extra.get("details", []))
    return json.dumps({"code": code, "message": reason.lower(), "details": details}).encode()


class TransportTest(unittest.TestCase):
    """The retry rules, against a stub on 127.0.0.1 (no idemnode needed)."""

    @classmethod
    def setUpClass(cls):
        cls.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        cls.url = f"http://127.0.0.1:{cls.server.server_address[1]}"

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()

    def setUp(self):
        _Stub.answers.clear()
        _Stub.bodies.clear()

    def test_503_retried_with_the_same_body(self):
        ok = json.dumps({"outcome": "OUTCOME_OK"}).encode()
        _Stub.answers[:] = [(503, {}, _status(14, "NO_LEADER")), (503, {}, _status(14, "COMMIT_TIMEOUT")),
                            (200, {}, ok)]
        self.assertEqual(Client(self.url).release(RecordId("", "", "k"), 7), "ok")
        self.assertEqual(len(_Stub.bodies), 3)
        self.assertEqual(len(set(_Stub.bodies)), 1)
        self.assertEqual(json.loads(_Stub.bodies[0])["token"], "7")  # uint64 as a string

    def test_503_until_the_deadline(self):
        _Stub.answers[:] = [(503, {}, _status(14, "NO_LEADER"))] * 100
        start = time.monotonic()
        with self.assertRaises(IdemnodeError) as cm:
            Client(self.url, timeout=1.0).release(RecordId("", "", "k"), 7)
        self.assertEqual((cm.exception.http_status, cm.exception.reason), (503, "NO_LEADER"))
        self.assertLess(time.monotonic() - start, 2.0)

    def test_429_raised_at_once_with_retry_after(self):
        info = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.500s"}
        _Stub.answers[:] = [(429, {"Retry-After": "2"}, _status(8, "RATE_LIMITED", details=[info]))]
        with self.assertRaises(IdemnodeError) as cm:
            Client(self.url).claim(RecordId("", "", "k"), b"", "o")
        self.assertEqual((cm.exception.http_status, cm.exception.reason, cm.exception.retry_after),
                         (429, "RATE_LIMITED", 2.0))
        self.assertEqual(len(_Stub.bodies), 1)

    def test_non_json_error(self):
        _Stub.answers[:] = [(502, {}, b"<html>bad gateway</html>")]
        with self.assertRaises(IdemnodeError) as cm:
            Client(self.url).release(RecordId("", "", "k"), 7)
        self.assertEqual((cm.exception.http_status, cm.exception.code, cm.exception.reason), (502, None, ""))


if __name__ == "__main__":
    unittest.main()
