package consume

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrNoKey means a message carries no idempotency key where the Config
// looks for one. Such a message can never be deduplicated; Process ends it
// (Term) without running the handler.
var ErrNoKey = errors.New("message has no idempotency key")

// A KeyFunc returns the idempotency key of a message, or an error wrapping
// ErrNoKey when it has none. The key must be the same on every delivery of
// the message and differ between messages meant as different operations.
type KeyFunc func(Message) (string, error)

// FromHeader takes the key from the named header (JetStream's Nats-Msg-Id,
// an event id a producer sets). A missing or empty header is ErrNoKey.
func FromHeader(name string) KeyFunc {
	return func(m Message) (string, error) {
		if v := m.Header(name); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("header %s missing or empty: %w", name, ErrNoKey)
	}
}

// FromJSONField takes the key from a field of the JSON payload named by a
// JSON Pointer (RFC 6901), such as "/id" or "/event/id". The field must be a
// non-empty string or a number (its JSON text is the key). It panics when
// pointer is not a JSON Pointer, as regexp.MustCompile does: the pointer is
// the program's, not the message's; ParsePointer checks one first.
func FromJSONField(pointer string) KeyFunc {
	tokens, err := ParsePointer(pointer)
	if err != nil {
		panic(err)
	}
	return func(m Message) (string, error) {
		raw, err := lookup(m.Data(), tokens)
		if err != nil {
			return "", fmt.Errorf("payload field %s: %w", pointer, err)
		}
		return raw, nil
	}
}

// ParsePointer splits a JSON Pointer (RFC 6901) into its reference tokens,
// with ~1 and ~0 decoded. "" is the whole document, which is never a key.
func ParsePointer(p string) ([]string, error) {
	if p == "" || p[0] != '/' {
		return nil, fmt.Errorf("json pointer %q: must start with /", p)
	}
	tokens := strings.Split(p[1:], "/")
	for i, tok := range tokens {
		for j := 0; j < len(tok); j++ {
			if tok[j] == '~' && (j+1 == len(tok) || (tok[j+1] != '0' && tok[j+1] != '1')) {
				return nil, fmt.Errorf("json pointer %q: ~ must be followed by 0 or 1", p)
			}
		}
		// ~1 first: "~01" is "~1" decoded, not "/" (RFC 6901 §4).
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

// lookup returns the key at tokens in the JSON document data.
func lookup(data []byte, tokens []string) (string, error) {
	var cur any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&cur); err != nil {
		return "", fmt.Errorf("payload is not JSON (%v): %w", err, ErrNoKey)
	}
	// One JSON value only: a payload with more after it is not the
	// document the pointer names.
	if _, err := dec.Token(); err != io.EOF {
		return "", fmt.Errorf("payload has data after its JSON value: %w", ErrNoKey)
	}
	for _, tok := range tokens {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return "", fmt.Errorf("missing: %w", ErrNoKey)
			}
			cur = next
		case []any:
			// RFC 6901: "0" or digits without a leading zero; Atoi alone
			// would also take "+1" and "-0".
			i, err := strconv.Atoi(tok)
			if err != nil || !digits(tok) || i >= len(v) || (len(tok) > 1 && tok[0] == '0') {
				return "", fmt.Errorf("no array element %q: %w", tok, ErrNoKey)
			}
			cur = v[i]
		default:
			return "", fmt.Errorf("missing (%q is inside a scalar): %w", tok, ErrNoKey)
		}
	}
	switch v := cur.(type) {
	case string:
		if v == "" {
			return "", fmt.Errorf("empty: %w", ErrNoKey)
		}
		return v, nil
	case json.Number:
		return v.String(), nil
	}
	return "", fmt.Errorf("is %s, not a string or number: %w", jsonKind(cur), ErrNoKey)
}

// digits reports whether s is one or more ASCII digits.
func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// jsonKind names the JSON type of a decoded value for messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}
