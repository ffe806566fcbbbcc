package idemhttp

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// rfc6901Doc is the document of RFC 6901's section 5 examples.
const rfc6901Doc = `{"foo": ["bar", "baz"], "": 0, "a/b": 1, "c%d": 2, "e^f": 3, "g|h": 4,
	"i\\j": 5, "k\"l": 6, " ": 7, "m~n": 8, "data": {"object": {"id": "evt_1"}}, "n": null}`

// TestPointer: the RFC's own examples, the escapes, array indices, and
// what names nothing.
func TestPointer(t *testing.T) {
	for _, tc := range []struct {
		ptr  string
		want string // the value's JSON; "" when absent
	}{
		{"/foo", `an array`},
		{"/foo/0", `"bar"`},
		{"/foo/1", `"baz"`},
		{"/", `0`},
		{"/a~1b", `1`},
		{"/c%d", `2`},
		{"/e^f", `3`},
		{"/g|h", `4`},
		{"/i\\j", `5`},
		{"/k\"l", `6`},
		{"/ ", `7`},
		{"/m~0n", `8`},
		{"/data/object/id", `"evt_1"`},
		{"/n", `null`},
		{"/foo/2", ""},  // past the end
		{"/foo/-", ""},  // the element after the last never exists
		{"/foo/01", ""}, // a leading zero is not an index
		{"/foo/+1", ""}, // nor a sign
		{"/foo/", ""},   // nor nothing
		{"/data/object/x", ""},
		{"/data/object/id/0", ""}, // a string has no fields
		{"/missing", ""},
		{"/a~1b/c", ""},
	} {
		p, err := ParsePointer(tc.ptr)
		if err != nil {
			t.Errorf("ParsePointer(%q): %v", tc.ptr, err)
			continue
		}
		if got := lookup(t, p, rfc6901Doc); got != tc.want {
			t.Errorf("%q: %s, want %q", tc.ptr, got, tc.want)
		}
	}
}

// lookup walks body to what p names: the value's JSON, "" when absent, or
// "an array" and "an object" for what the walk refuses as keys.
func lookup(t *testing.T, p Pointer, body string) string {
	t.Helper()
	w := walker{dec: json.NewDecoder(strings.NewReader(body)), p: p}
	w.dec.UseNumber()
	v, found, err := w.value(0)
	switch {
	case err != nil && strings.Contains(err.Error(), "is an array"):
		return "an array"
	case err != nil && strings.Contains(err.Error(), "is an object"):
		return "an object"
	case err != nil:
		t.Fatalf("%s: %v", p, err)
	case !found:
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestParsePointerRefuses: a pointer that is empty, relative or has a
// stray ~ is refused, saying why.
func TestParsePointerRefuses(t *testing.T) {
	for _, tc := range []struct{ ptr, err string }{
		{"", "empty"},
		{"id", "does not start with /"},
		{"/a~", "~ must be followed by 0 or 1"},
		{"/a~2", "~ must be followed by 0 or 1"},
		{"/ok/~x", "~ must be followed by 0 or 1"},
	} {
		if _, err := ParsePointer(tc.ptr); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParsePointer(%q): %v, want %q", tc.ptr, err, tc.err)
		}
	}
	// ~01 is "~1", not "/": the escapes decode in one pass.
	p, err := ParsePointer("/~01")
	if err != nil || len(p.tokens) != 1 || p.tokens[0] != "~1" {
		t.Fatalf("/~01: %q %v, want the token ~1", p.tokens, err)
	}
}

// escapeToken is the RFC's encoding of a member name into a token.
func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// FuzzPointer: a pointer that parses is rebuilt exactly from its tokens,
// and finds the key at the end of a document nested along them; against
// any body, fieldKey never panics.
func FuzzPointer(f *testing.F) {
	for _, s := range []string{"/id", "/data/object/id", "/a~1b", "/m~0n", "/~01", "/", "//", "/foo/0", "/~", "x"} {
		f.Add(s, `{"id":"evt_1","foo":[1,2]}`)
	}
	f.Fuzz(func(t *testing.T, s, body string) {
		p, err := ParsePointer(s)
		if err != nil {
			return
		}
		var b strings.Builder
		for _, tok := range p.tokens {
			b.WriteString("/" + escapeToken(tok))
		}
		if b.String() != s || p.String() != s {
			t.Fatalf("%q parsed to %q, which escapes back to %q", s, p.tokens, b.String())
		}
		var doc any = "leaf"
		for i := len(p.tokens) - 1; i >= 0; i-- {
			doc = map[string]any{p.tokens[i]: doc}
		}
		for _, tok := range p.tokens {
			if !utf8.ValidString(tok) {
				return // JSON would name another member
			}
		}
		nested, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if key, err := fieldKey(nested, p, 255); err != nil || key != "leaf" {
			t.Fatalf("%q in %s: %q %v, want leaf", s, nested, key, err)
		}
		_, _ = fieldKey([]byte(body), p, 255)
	})
}
