package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idemnode/idemnode/idemhttp"
)

// Key says where a route's key comes from. In the routes file it is a
// mode for the Idempotency-Key header — required (a request without one
// is answered 400), optional (it passes through unguarded) or derived (a
// key is derived from the tenant, method, path and canonical body; see
// package idemhttp) — or, for webhook receivers, the sender's event id:
// {header: X-GitHub-Delivery} names a header, {json: /id} a field of the
// JSON body (a JSON Pointer, RFC 6901). A request without that header or
// field is answered 400, naming it.
type Key struct {
	// Mode is required, optional or derived, for the Idempotency-Key
	// header; empty when Header or JSON is set.
	Mode string
	// Header names the header carrying the key.
	Header string
	// JSON is the JSON Pointer of the body field carrying the key.
	JSON   string
	object bool // written as {header: …} or {json: …}
}

// UnmarshalJSON reads a mode ("required") or {header: NAME} or
// {json: /POINTER}; Route.check validates what was given.
func (k *Key) UnmarshalJSON(b []byte) error {
	var mode string
	if json.Unmarshal(b, &mode) == nil {
		*k = Key{Mode: mode}
		return nil
	}
	if !bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		// YAML reads an unquoted no as false: kept as text, check refuses
		// it naming the route.
		*k = Key{Mode: string(b)}
		return nil
	}
	var src struct {
		Header string `json:"header"`
		JSON   string `json:"json"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&src); err != nil {
		return fmt.Errorf("key: want required, optional, derived, {header: NAME} or {json: /POINTER}, got %s: %w", b, err)
	}
	*k = Key{Header: src.Header, JSON: src.JSON, object: true}
	return nil
}

// sender reports whether the key is a webhook sender's event id rather
// than a caller's Idempotency-Key.
func (k Key) sender() bool { return k.Header != "" || k.JSON != "" }

// check validates the key's source, and returns the parsed JSON Pointer
// when the key is a body field.
func (k Key) check() (idemhttp.Pointer, error) {
	switch {
	case k.Header != "" && k.JSON != "":
		return idemhttp.Pointer{}, errors.New("key: give header or json, not both")
	case k.Header != "" && !validHeaderName(k.Header):
		return idemhttp.Pointer{}, fmt.Errorf("key.header: %q is not a header name", k.Header)
	case k.JSON != "":
		p, err := idemhttp.ParsePointer(k.JSON)
		if err != nil {
			return idemhttp.Pointer{}, fmt.Errorf("key.json: %w", err)
		}
		return p, nil
	case k.Header != "":
		return idemhttp.Pointer{}, nil
	case k.object:
		return idemhttp.Pointer{}, errors.New("key: {header: NAME} or {json: /POINTER} needs a header name or a JSON Pointer such as /id; both are empty")
	case k.Mode != keyRequired && k.Mode != keyOptional && k.Mode != keyDerived:
		return idemhttp.Pointer{}, fmt.Errorf("key: %q, want required, optional, derived, {header: NAME} or {json: /POINTER}", k.Mode)
	}
	return idemhttp.Pointer{}, nil
}
