#!/usr/bin/env python3
"""A small HTTP service for the proxy's tests, in Python on purpose: the
proxy must work in front of a service in any language.

It counts how often each Idempotency-Key ran (the side effect) and answers:
  POST /charges[?sleep=S]  count the key, sleep S seconds, answer 201 with
                           JSON naming the key, the count and the fencing
                           token the proxy passed in Idempotency-Token
  POST /fail               count the key, answer 503 (a transient failure)
  POST /big?bytes=N        count the key, answer 200 with N bytes
  POST /rides              a two-step operation: charge (counted as "K/charge")
                           unless the proxy says it resumes after "charged",
                           record that step through the JSON API's
                           /v1/checkpoint, then send the receipt (answer 201);
                           with header X-Crash: 1 it dies between the steps
                           (closes the connection without an answer)
  GET  /count?key=K        how often K ran (not counted)
Usage: upstream.py PORT [JSON_API_URL]  (prints "ready" once it listens)
"""
import base64
import json
import sys
import urllib.request
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

counts = {}
lock = threading.Lock()


def count(key):
    with lock:
        counts[key] = counts.get(key, 0) + 1
        return counts[key]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet: the tests read answers, not logs
        pass

    def answer(self, status, body, content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urlparse(self.path)
        if url.path != "/count":
            return self.answer(404, b"{}")
        key = parse_qs(url.query).get("key", [""])[0]
        with lock:
            n = counts.get(key, 0)
        self.answer(200, json.dumps({"key": key, "count": n}).encode())

    def do_POST(self):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        length = int(self.headers.get("Content-Length", "0"))
        request_body = self.rfile.read(length)
        key = self.headers.get("Idempotency-Key", "")
        n = count(key)
        if url.path == "/charges":
            time.sleep(float(query.get("sleep", ["0"])[0]))
            body = json.dumps({"key": key, "count": n, "token": self.headers.get("Idempotency-Token", ""),
                               "tenant": self.headers.get("X-Tenant", ""), "bytes": len(request_body)})
            return self.answer(201, body.encode())
        if url.path == "/fail":
            return self.answer(503, b'{"error":"try again"}')
        if url.path == "/big":
            return self.answer(200, b"x" * int(query.get("bytes", ["2048"])[0]), "text/plain")
        if url.path == "/rides":
            return self.ride(key, self.headers.get("X-Crash", "") == "1")
        self.answer(404, b"{}")

    def ride(self, key, crash):
        point = self.headers.get("Idempotency-Resume-Point", "")
        if point == "charged":
            charge = base64.b64decode(self.headers.get("Idempotency-Resume-Data", "")).decode()
        else:
            charge = "ch_%d" % count(key + "/charge")
            checkpoint(self.headers, "charged", charge.encode())
        if crash:
            self.close_connection = True  # dies before answering
            return
        body = json.dumps({"key": key, "charge": charge, "resumed": point,
                           "charges": counts.get(key + "/charge", 0)})
        self.answer(201, body.encode())


def checkpoint(headers, point, data):
    """Records a step of the claim the proxy runs this request under."""
    req = {"id": {"tenant": headers.get("Idempotency-Record-Tenant", ""),
                  "scope": headers.get("Idempotency-Record-Scope", ""),
                  "key": headers.get("Idempotency-Record-Key", "")},
           "token": headers.get("Idempotency-Token", ""), "point": point,
           "data": base64.b64encode(data).decode()}
    call = urllib.request.Request(JSON_API + "/v1/checkpoint", data=json.dumps(req).encode(),
                                  headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(call, timeout=10) as resp:
        outcome = json.load(resp).get("outcome")
    if outcome != "OUTCOME_OK":
        raise RuntimeError("checkpoint answered %s" % outcome)


JSON_API = ""


def main():
    global JSON_API
    if len(sys.argv) > 2:
        JSON_API = sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
