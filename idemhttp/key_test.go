package idemhttp

import (
	"errors"
	"strings"
	"testing"
)

// keyCase is one header's values and what reading the key from them gives.
type keyCase struct {
	name   string
	values []string
	want   string
	err    string // "" for success; errMissingKey as "missing"
}

func TestParseKey(t *testing.T) {
	runKeyCases(t, "parseKey", parseKey, []keyCase{
		{"missing", nil, "", "missing"},
		{"bare", []string{"8e03978e-40d5-43e8-bc93-6894a57f9324"}, "8e03978e-40d5-43e8-bc93-6894a57f9324", ""},
		{"sf-string", []string{`"8e03978e-40d5"`}, "8e03978e-40d5", ""},
		{"sf-string escapes", []string{`"a\"b\\c"`}, `a"b\c`, ""},
		{"surrounding space", []string{"  k1\t"}, "k1", ""},
		{"inner space", []string{"a b"}, "a b", ""},
		{"max length", []string{strings.Repeat("k", 255)}, strings.Repeat("k", 255), ""},
		{"too long", []string{strings.Repeat("k", 256)}, "", "longer than 255"},
		{"quoted too long", []string{`"` + strings.Repeat("k", 256) + `"`}, "", "longer than 255"},
		{"twice", []string{"a", "b"}, "", "appears 2 times"},
		{"empty", []string{""}, "", "empty"},
		{"empty quoted", []string{`""`}, "", "empty"},
		{"unterminated", []string{`"abc`}, "", "unterminated"},
		{"after quote", []string{`"abc";x=1`}, "", "after the quoted key"},
		{"bad escape", []string{`"a\qb"`}, "", "bad escape"},
		{"non-ASCII", []string{"clé"}, "", "not printable ASCII"},
		{"control", []string{"a\x01b"}, "", "not printable ASCII"},
	})
}

// TestSenderKey: a sender's event id is the header's value as sent, quotes
// and spaces included, and still 1-255 bytes of printable ASCII.
func TestSenderKey(t *testing.T) {
	runKeyCases(t, "senderKey", senderKey, []keyCase{
		{"missing", nil, "", "missing"},
		{"bare", []string{"72d3162e-cc78-11e3-81ab-4c9367dc0958"}, "72d3162e-cc78-11e3-81ab-4c9367dc0958", ""},
		{"quotes kept", []string{`"msg_1"`}, `"msg_1"`, ""},
		{"spaces kept", []string{" msg 1 "}, " msg 1 ", ""},
		{"max length", []string{strings.Repeat("k", 255)}, strings.Repeat("k", 255), ""},
		{"too long", []string{strings.Repeat("k", 256)}, "", "longer than 255"},
		{"twice", []string{"a", "b"}, "", "appears 2 times"},
		{"empty", []string{""}, "", "empty"},
		{"tab", []string{"a\tb"}, "", "not printable ASCII"},
		{"non-ASCII", []string{"clé"}, "", "not printable ASCII"},
	})
}

func runKeyCases(t *testing.T, name string, read func([]string, int) (string, error), cases []keyCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := read(tc.values, 255)
			switch {
			case tc.err == "missing":
				if !errors.Is(err, errMissingKey) {
					t.Errorf("%s(%q) = %q, %v; want errMissingKey", name, tc.values, got, err)
				}
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("%s(%q) = %q, %v; want an error containing %q", name, tc.values, got, err, tc.err)
				}
			case err != nil || got != tc.want:
				t.Errorf("%s(%q) = %q, %v; want %q", name, tc.values, got, err, tc.want)
			}
		})
	}
}

// TestFieldKey: the key from a JSON body's field: strings as they are,
// numbers as written; what is absent, null or empty is missing; any other
// body or value is refused, naming the field.
func TestFieldKey(t *testing.T) {
	for _, tc := range []struct {
		name, ptr, body string
		want, err       string // err "missing" is errMissingKey
	}{
		{"top-level id", "/id", `{"id":"evt_1","type":"charge.succeeded"}`, "evt_1", ""},
		{"nested", "/data/object/id", `{"data":{"object":{"id":"ch_9"}}}`, "ch_9", ""},
		{"in an array", "/events/1/id", `{"events":[{"id":"a"},{"id":"b"}]}`, "b", ""},
		{"escaped name", "/meta~1id", `{"meta/id":"m1"}`, "m1", ""},
		{"a number", "/id", `{"id":12345678901234567890}`, "12345678901234567890", ""},
		{"absent", "/id", `{"type":"x"}`, "", "missing"},
		{"null", "/id", `{"id":null}`, "", "missing"},
		{"empty", "/id", `{"id":""}`, "", "missing"},
		{"an object", "/data", `{"data":{}}`, "", "/data is an object"},
		{"a boolean", "/id", `{"id":true}`, "", "/id is a boolean"},
		{"an array", "/id", `{"id":[1]}`, "", "/id is an array"},
		{"too long", "/id", `{"id":"` + strings.Repeat("k", 256) + `"}`, "", "/id: the key is 256 bytes"},
		{"not ASCII", "/id", `{"id":"clé"}`, "", "/id: byte 2"},
		{"a negative number", "/id", `{"id":-42}`, "-42", ""},
		{"an exponent", "/id", `{"id":1e3}`, "", "/id is the number 1e3"},
		{"a fraction", "/id", `{"id":1000.0}`, "", "/id is the number 1000.0"},
		{"minus zero", "/id", `{"id":-0}`, "", "/id is the number -0"},
		{"twice", "/id", `{"id":"a","id":"b"}`, "", `the name "id" appears twice`},
		{"twice on the path", "/data/id", `{"data":{"id":"a"},"data":{"id":"b"}}`, "", `the name "data" appears twice`},
		{"twice, once null", "/id", `{"id":null,"id":"b"}`, "", `the name "id" appears twice`},
		{"another case", "/id", `{"ID":"evt_2","id":"evt_1"}`, "", `names "ID" where the pointer names "id"`},
		{"another case on the path", "/data/id", `{"data":{"id":"a"},"Data":{"id":"b"}}`, "", `names "Data"`},
		{"Kelvin sign", "/kind", `{"kind":"a","\u212aind":"b"}`, "", `where the pointer names "kind"`},
		{"twice off the path", "/id", `{"id":"a","x":1,"x":2}`, "a", ""},
		{"after the field", "/data/id", `{"data":{"id":"a","n":[1,{"id":2}]},"more":{"id":"c"}}`, "a", ""},
		{"not JSON", "/id", `id=evt_1`, "", "not JSON"},
		{"trailing data", "/id", `{"id":"a"} {"id":"b"}`, "", "not JSON"},
		{"empty body", "/id", ``, "", "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePointer(tc.ptr)
			if err != nil {
				t.Fatal(err)
			}
			got, err := fieldKey([]byte(tc.body), p, 255)
			switch {
			case tc.err == "missing":
				if !errors.Is(err, errMissingKey) {
					t.Errorf("fieldKey = %q, %v; want errMissingKey", got, err)
				}
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("fieldKey = %q, %v; want an error containing %q", got, err, tc.err)
				}
			case err != nil || got != tc.want:
				t.Errorf("fieldKey = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// oneMiBArray is a 1 MiB body of tiny values beside the key field: what
// an unauthenticated caller can send to make a decode into any allocate
// dozens of times the body.
func oneMiBArray() []byte {
	return []byte(`{"id":"evt_1","data":[` + strings.Repeat("0,", 1<<19-20) + `0]}`)
}

// TestFieldKeyAllocations: fieldKey skips what is off the pointer's path
// without building it: a few hundred allocations for a 1 MiB body, where
// decoding it into any makes one per element (over a million). The bound
// is loose, 50 times below that: AllocsPerRun counts the whole process's
// allocations, this package's test cluster's included, and -race adds
// its own. It counts allocations, never time.
func TestFieldKeyAllocations(t *testing.T) {
	body, p := oneMiBArray(), Pointer{text: "/id", tokens: []string{"id"}}
	allocs := testing.AllocsPerRun(3, func() {
		if key, err := fieldKey(body, p, 255); err != nil || key != "evt_1" {
			t.Fatalf("fieldKey = %q, %v", key, err)
		}
	})
	if allocs > 20000 {
		t.Fatalf("fieldKey made %.0f allocations for a 1 MiB body, want at most 20000", allocs)
	}
}

// BenchmarkFieldKey compares fieldKey with decoding the body into any, as
// it once did, on the 1 MiB body (B/op is the figure that matters).
func BenchmarkFieldKey(b *testing.B) {
	body, p := oneMiBArray(), Pointer{text: "/id", tokens: []string{"id"}}
	b.Run("walk", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for range b.N {
			if _, err := fieldKey(body, p, 255); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-any", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for range b.N {
			if _, ok := decodeJSON(body); !ok {
				b.Fatal("does not decode")
			}
		}
	})
}
