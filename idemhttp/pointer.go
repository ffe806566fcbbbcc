package idemhttp

import (
	"errors"
	"fmt"
	"strings"
)

// Pointer is a JSON Pointer (RFC 6901) to one field of a JSON document,
// such as /id or /data/object/id: each "/" starts a reference token, in
// which "~1" stands for "/" and "~0" for "~". A token is an object's
// member name or, in an array, an index without leading zeros.
type Pointer struct {
	text   string
	tokens []string
}

// ParsePointer parses a JSON Pointer. The empty pointer, which RFC 6901
// reads as the whole document, is refused: a key is one field of the body.
func ParsePointer(s string) (Pointer, error) {
	if s == "" {
		return Pointer{}, errors.New("the JSON Pointer is empty; name a field, such as /id")
	}
	if s[0] != '/' {
		return Pointer{}, fmt.Errorf("JSON Pointer %q does not start with /", s)
	}
	p := Pointer{text: s}
	for _, raw := range strings.Split(s[1:], "/") {
		tok, err := unescapeToken(raw)
		if err != nil {
			return Pointer{}, fmt.Errorf("JSON Pointer %q: %w", s, err)
		}
		p.tokens = append(p.tokens, tok)
	}
	return p, nil
}

// unescapeToken decodes ~1 to / and ~0 to ~; any other ~ is an error.
// Decoding ~01 gives ~1 and never /, as the RFC requires.
func unescapeToken(raw string) (string, error) {
	if !strings.Contains(raw, "~") {
		return raw, nil
	}
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		if raw[i] != '~' {
			b.WriteByte(raw[i])
			continue
		}
		if i+1 == len(raw) || (raw[i+1] != '0' && raw[i+1] != '1') {
			return "", fmt.Errorf("%q: ~ must be followed by 0 or 1", raw)
		}
		i++
		b.WriteByte("~/"[raw[i]-'0'])
	}
	return b.String(), nil
}

// String returns the pointer as it was written.
func (p Pointer) String() string { return p.text }

// IsZero reports whether p is the zero Pointer, which names nothing.
func (p Pointer) IsZero() bool { return p.tokens == nil }

// arrayIndex reads an RFC 6901 array index: "0", or digits without a
// leading zero. Indices too large for any body are not indices.
func arrayIndex(tok string) (int, bool) {
	if tok == "" || len(tok) > 9 || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, false
		}
		n = n*10 + int(tok[i]-'0')
	}
	return n, true
}
