package idemhttp

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzParseKey: any header value is either refused or yields a key of 1 to
// 255 bytes of printable ASCII; nothing panics.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"order-42", `"order-42"`, `"a\"b"`, `"unterminated`, " ", "\x00", `"\\"`, "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		key, err := parseKey([]string{v}, 255)
		if err != nil {
			return
		}
		if len(key) == 0 || len(key) > 255 {
			t.Fatalf("parseKey(%q) = %q: length %d", v, key, len(key))
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("parseKey(%q) = %q: byte %d not printable", v, key, i)
			}
		}
	})
}

// FuzzCanonicalJSON: canonicalisation accepts exactly one JSON value, is
// idempotent, and keeps the value: the canonical form parses to the same
// value as the input.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,null,"x"]}`, ` { "a" : 1.0 } `, `[]`, `"s"`, `{"a":1}{"b":2}`, `{`, `1e400`, `{"a":{"c":1,"b":2}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		canon, ok := CanonicalJSON(body)
		if !ok {
			return
		}
		again, ok := CanonicalJSON(canon)
		if !ok || !bytes.Equal(again, canon) {
			t.Fatalf("not idempotent: %q -> %q -> %q", body, canon, again)
		}
		var a, b any
		da, db := json.NewDecoder(bytes.NewReader(body)), json.NewDecoder(bytes.NewReader(canon))
		da.UseNumber()
		db.UseNumber()
		if da.Decode(&a) != nil || db.Decode(&b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("value changed: %q -> %q", body, canon)
		}
	})
}
