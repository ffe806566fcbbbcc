package client

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"regexp"
	"testing"
)

var canonicalUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-([0-9a-f])[0-9a-f]{3}-([89ab])[0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewKey(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		k := NewKey()
		m := canonicalUUID.FindStringSubmatch(k)
		if m == nil || m[1] != "4" {
			t.Fatalf("NewKey() = %q, want a canonical version 4 UUID", k)
		}
		if seen[k] {
			t.Fatalf("NewKey() returned %q twice", k)
		}
		seen[k] = true
	}
}

// TestUUIDv5 checks the name-based UUID against the RFC 9562 namespace
// example (Python: uuid.uuid5(uuid.NAMESPACE_DNS, "python.org")).
func TestUUIDv5(t *testing.T) {
	if got, want := keyNamespace.String(), "0ca042e4-99d5-52d3-9f74-1e26d027f2b6"; got != want {
		t.Errorf("key namespace = %s, want uuid5(NAMESPACE_URL, https://idemnode.io/keys) = %s", got, want)
	}
	dns := uuid{0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}
	if got, want := uuidV5(dns, []byte("python.org")).String(), "886313e1-3b8a-5372-9b90-0c9aee199e5d"; got != want {
		t.Errorf("uuidV5(DNS, python.org) = %s, want %s", got, want)
	}
}

func TestDeriveKey(t *testing.T) {
	k := DeriveKey("payments/charge", "acme", "order-42", "v1")
	if m := canonicalUUID.FindStringSubmatch(k); m == nil || m[1] != "5" {
		t.Fatalf("DeriveKey = %q, want a canonical version 5 UUID", k)
	}
	// A golden value, computed independently (Python's uuid and hashlib):
	// a change of the algorithm would re-key every client.
	if want := "a9f7f429-334c-5ed1-92ce-c7ced9cacb27"; k != want {
		t.Errorf("DeriveKey = %s, want %s", k, want)
	}
	if again := DeriveKey("payments/charge", "acme", "order-42", "v1"); again != k {
		t.Errorf("DeriveKey is not stable: %s then %s", k, again)
	}
	for _, other := range [][]string{
		{"payments/charge", "acme", "order-42", "v2"},
		{"payments/charge", "acme", "order-4", "2v1"},
		{"payments/charge", "acmeorder-42", "v1"},
		{"payments/refund", "acme", "order-42", "v1"},
		{"payments/charge", "acme", "order-42", "v1", ""},
	} {
		if got := DeriveKey(other[0], other[1:]...); got == k {
			t.Errorf("DeriveKey(%q) = DeriveKey of another operation: %s", other, got)
		}
	}
}

func TestFingerprint(t *testing.T) {
	// Golden values, computed independently (Python's hashlib over the
	// uvarint-prefixed parts): a change of the encoding would make every
	// retry in flight a MISMATCH.
	for _, tc := range []struct {
		parts [][]byte
		want  string
	}{
		{[][]byte{[]byte("charge"), []byte("acme"), []byte(`{"amount":100}`)}, "d55ceced28010866a7e840240e5ae0cb76f1954a5a8b97bc33bc2729e7dd7aa3"},
		{[][]byte{bytes.Repeat([]byte("x"), 200)}, "948cdefb43779b0b015ecba112d64d8b1dc71bb3bddd14b9bd3ac509c0894676"}, // a two-byte length
	} {
		if got := hex.EncodeToString(Fingerprint(tc.parts...)); got != tc.want {
			t.Errorf("Fingerprint(%q) = %s, want %s", tc.parts, got, tc.want)
		}
	}
	// Parts that concatenate alike are different requests.
	seen := map[string]string{}
	for _, parts := range [][]string{{}, {""}, {"", ""}, {"abc"}, {"ab", "c"}, {"a", "bc"}, {"a", "b", "c"}, {"abc", ""}, {"", "abc"}} {
		var b [][]byte
		for _, p := range parts {
			b = append(b, []byte(p))
		}
		fp := Fingerprint(b...)
		if len(fp) != 32 {
			t.Fatalf("Fingerprint(%q) has %d bytes, want 32", parts, len(fp))
		}
		if other, dup := seen[string(fp)]; dup {
			t.Errorf("Fingerprint(%q) = Fingerprint(%s)", parts, other)
		}
		seen[string(fp)] = fmt.Sprintf("%q", parts)
	}
}

func TestEnumNames(t *testing.T) {
	for _, tc := range []struct {
		v    fmt.Stringer
		want string
	}{
		{Action(0), "none"}, {Complete, "complete"}, {Release, "release"}, {Action(9), "action(9)"},
		{OutcomeWon, "won"}, {OutcomeNotFound, "not_found"}, {Outcome(42), "outcome(42)"},
		{StatePending, "pending"}, {StateCompleted, "completed"}, {State(7), "state(7)"},
	} {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.v, got, tc.want)
		}
		if got := fmt.Sprint(tc.v); got != tc.want {
			t.Errorf("fmt.Sprint(%#v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
