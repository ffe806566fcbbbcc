package jsonapi

import (
	"strings"
	"testing"
)

// TestLoneSurrogateScan: every place a string can be, and the escapes
// around a surrogate that make it whole, lone or no escape at all.
func TestLoneSurrogateScan(t *testing.T) {
	for _, tc := range []struct {
		body string
		want string // in the error; "" for none
	}{
		{`{"a":"plain"}`, ""},
		{`{"a":"\u00e9\ud83d\ude00\uDBFF\uDFFF"}`, ""},
		{`{"a":"\\ud800"}`, ""},                                         // a backslash, then text
		{`{"a":"\\\ud800"}`, `at "a", offset 8: lone surrogate \ud800`}, // a backslash, then an escape
		{`{"a":"\"\ud800"}`, `lone surrogate \ud800`},
		{`"\udfff"`, `at the body's top level, offset 1: lone surrogate \udfff`},
		{`{"a":"\ude00\ud83d"}`, `lone surrogate \ude00`}, // a pair the wrong way round
		{`{"a":"\ud83d"}`, `lone surrogate \ud83d`},
		{`{"a":[1,{"b":["x","\ud800"]}]}`, `"a[1].b[1]"`},
		{`[{"a":1},{"b\udc00":2}]`, `a field name of "[1]"`},
		{`{"a":{"b":1},"c":"\ud800"}`, `"c"`},
	} {
		err := loneSurrogate([]byte(tc.body))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.body, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.body, err, tc.want)
		}
	}
}
