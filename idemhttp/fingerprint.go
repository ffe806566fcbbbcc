package idemhttp

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
)

// Fingerprint is the default request fingerprint: SHA-256 over the method,
// the URL path and the canonical body (CanonicalBody), each length-prefixed.
func Fingerprint(r *http.Request, body []byte) []byte {
	return fingerprint([]byte(r.Method), []byte(r.URL.Path), CanonicalBody(r.Header.Get("Content-Type"), body))
}

// FingerprintWithoutBody is the default fingerprint of routes keyed by a
// webhook sender's event id (KeyFromHeader, KeyFromJSON): the method and
// the URL path, not the body. The sender's signature vouches for the body,
// and attempts of one event may carry different ones (Stripe counts
// pending_webhooks in it), which the body's fingerprint would refuse with
// 422 on every retry. It differs from Fingerprint of an empty body.
func FingerprintWithoutBody(r *http.Request, _ []byte) []byte {
	return fingerprint([]byte(r.Method), []byte(r.URL.Path))
}

// fingerprint hashes the fields, each length-prefixed.
func fingerprint(fields ...[]byte) []byte {
	h := sha256.New()
	for _, field := range fields {
		var n [binary.MaxVarintLen64]byte
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(field)))])
		h.Write(field)
	}
	return h.Sum(nil)
}

// CanonicalBody returns the body as the fingerprint sees it: a JSON body
// (application/json or any +json type) parsed and re-serialised with object
// keys sorted and insignificant whitespace removed; any other body, and
// JSON that does not parse, as its raw bytes. Numbers keep their literal
// text, so 1 and 1.0 differ.
func CanonicalBody(contentType string, body []byte) []byte {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return body
	}
	if c, ok := CanonicalJSON(body); ok {
		return c
	}
	return body
}

// CanonicalJSON re-serialises one JSON value with sorted object keys; ok
// is false when body is not exactly one JSON value.
func CanonicalJSON(body []byte) (canonical []byte, ok bool) {
	v, ok := decodeJSON(body)
	if !ok {
		return nil, false
	}
	// encoding/json writes map keys sorted and json.Number verbatim.
	out, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	return out, true
}

// decodeJSON decodes exactly one JSON value, numbers as json.Number; ok is
// false when body is anything else (nothing, trailing data, not JSON).
func decodeJSON(body []byte) (v any, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false // trailing data
	}
	return v, true
}
