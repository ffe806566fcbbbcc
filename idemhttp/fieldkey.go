package idemhttp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// fieldKey reads the key from the field p names in a JSON body. A string
// is the key as it is; an integer is its literal text (an event id 42 is
// the key "42"). An absent field, null and "" are errMissingKey.
//
// The body is walked, not decoded: values off the pointer's path are
// skipped as raw bytes, never built into maps and slices, so a large body
// on an unauthenticated route costs about its own size, not dozens of
// times it. The walk also refuses what two JSON readers could take for
// different keys: a name on the path that appears twice (which one wins
// depends on the reader), or that equals the path's name but for case
// (Go's encoding/json matches struct fields case-insensitively).
func fieldKey(body []byte, p Pointer, maxLen int) (string, error) {
	if !json.Valid(body) {
		return "", errBodyNotJSON
	}
	w := walker{dec: json.NewDecoder(bytes.NewReader(body)), p: p}
	w.dec.UseNumber()
	v, found, err := w.value(0)
	if err != nil {
		return "", err
	}
	var key string
	switch v := v.(type) {
	case nil:
		found = false
	case string:
		key = v
	case json.Number:
		if !canonicalInteger(string(v)) {
			return "", fmt.Errorf("%s is the number %s; a numeric key must be an integer written without fraction, exponent or -0", p, v)
		}
		key = v.String()
	case bool:
		return "", fmt.Errorf("%s is a boolean, not a string or a number", p)
	}
	if !found || key == "" {
		return "", errMissingKey
	}
	if err := checkKey(key, maxLen); err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return key, nil
}

// walker reads one JSON value along a pointer's path; the body was
// checked to be valid JSON, so the decoder's errors are not expected.
type walker struct {
	dec  *json.Decoder
	p    Pointer
	skip json.RawMessage // reused for every value skipped
}

// value reads the next value, which the pointer's first depth tokens
// named, and returns the leaf the rest of them name, if any.
func (w *walker) value(depth int) (v any, found bool, err error) {
	tok, err := w.dec.Token()
	if err != nil {
		return nil, false, err
	}
	if depth == len(w.p.tokens) {
		switch tok {
		case json.Delim('{'):
			return nil, false, fmt.Errorf("%s is an object, not a string or a number", w.p)
		case json.Delim('['):
			return nil, false, fmt.Errorf("%s is an array, not a string or a number", w.p)
		}
		return tok, true, nil
	}
	switch tok {
	case json.Delim('{'):
		return w.object(depth)
	case json.Delim('['):
		return w.array(depth)
	}
	return nil, false, nil // a scalar has no members
}

// object reads an object's members after its '{', descending into the one
// the path names.
func (w *walker) object(depth int) (v any, found bool, err error) {
	name, seen := w.p.tokens[depth], false
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return nil, false, err
		}
		member, _ := tok.(string)
		switch {
		case member == name && seen:
			return nil, false, fmt.Errorf("%s: the name %q appears twice in one object", w.p, name)
		case member == name:
			seen = true
			if v, found, err = w.value(depth + 1); err != nil {
				return nil, false, err
			}
		case strings.EqualFold(member, name):
			return nil, false, fmt.Errorf("%s: the body names %q where the pointer names %q, and a receiver matching names case-insensitively reads it as that field", w.p, member, name)
		default:
			if err := w.dec.Decode(&w.skip); err != nil {
				return nil, false, err
			}
		}
	}
	_, err = w.dec.Token() // '}'
	return v, found, err
}

// array reads an array's elements after its '[', descending into the one
// the path's index names.
func (w *walker) array(depth int) (v any, found bool, err error) {
	at, isIndex := arrayIndex(w.p.tokens[depth])
	for i := 0; w.dec.More(); i++ {
		if isIndex && i == at {
			if v, found, err = w.value(depth + 1); err != nil {
				return nil, false, err
			}
			continue
		}
		if err := w.dec.Decode(&w.skip); err != nil {
			return nil, false, err
		}
	}
	_, err = w.dec.Token() // ']'
	return v, found, err
}

// canonicalInteger reports whether s is an integer in the one form every
// JSON reader prints back: no fraction, exponent, leading zero or -0, so
// that 1000, 1e3 and 1000.0 cannot be one event's id and another's key.
func canonicalInteger(s string) bool {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || (len(digits) > 1 && digits[0] == '0') || s == "-0" {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}
