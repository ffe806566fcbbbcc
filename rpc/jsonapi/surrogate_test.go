package jsonapi_test

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// TestLoneSurrogate: a \u escape of half a UTF-16 surrogate pair names no
// character. Such a body is refused as INVALID_JSON with a message that
// says so and where (the field's JSON path and the byte), rather than the
// decoder's "unexpected EOF" or "invalid escape code"; nothing is stored.
// A whole pair, and an escaped backslash before "ud800", are ordinary
// strings.
func TestLoneSurrogate(t *testing.T) {
	base := shared.Nodes[0].JSONURL()
	key := rand.Text()
	for _, tc := range []struct {
		what, path, body string
		want             []string // in the message
	}{
		{"a high half that ends the string", "/v1/claim", `{"id":{"key":"\ud800"},"owner":"o"}`,
			[]string{`lone surrogate \ud800`, `"id.key"`, ", offset 14"}},
		{"a high half before text", "/v1/claim", fmt.Sprintf(`{"id":{"key":%q},"owner":"a\uD800bcdefgh"}`, key),
			[]string{`lone surrogate \uD800`, `"owner"`}},
		{"two high halves", "/v1/claim", fmt.Sprintf(`{"id":{"key":%q},"owner":"\ud800\udbff"}`, key),
			[]string{`lone surrogate \ud800`, `"owner"`}},
		{"a low half alone, in an array", "/v1/complete",
			fmt.Sprintf(`{"id":{"key":%q},"token":"1","response":{"status":200,"headers":[{"name":"a","value":"b"},{"name":"x","value":"\udc00\u0041"}]}}`, key),
			[]string{`lone surrogate \udc00`, `"response.headers[1].value"`}},
		{"a field name", "/v1/claim", fmt.Sprintf(`{"id":{"key":%q},"owner":"o","x\ud800":1}`, key),
			[]string{`lone surrogate \ud800`, "a field name of the body"}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			f := fail(t, base, http.MethodPost, tc.path, tc.body)
			f.want(t, http.StatusBadRequest, codes.InvalidArgument, "INVALID_JSON")
			for _, w := range append(tc.want, "UTF-16") {
				if !strings.Contains(f.st.Message(), w) {
					t.Errorf("message %q does not say %q", f.st.Message(), w)
				}
			}
		})
	}
	var got idempb.GetResponse
	post(t, base, "/v1/get", fmt.Sprintf(`{"id":{"key":%q}}`, key), &got)
	if got.Outcome != idempb.Outcome_OUTCOME_NOT_FOUND {
		t.Fatalf("after the refused calls the key is %v, want NOT_FOUND", got.Outcome)
	}

	var won idempb.ClaimResponse
	post(t, base, "/v1/claim", fmt.Sprintf(`{"id":{"key":%q},"owner":"\ud83d\ude00"}`, key), &won)
	if won.Outcome != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("a claim whose owner is a surrogate pair: %v", won.Outcome)
	}
	post(t, base, "/v1/claim", `{"id":{"key":"\\ud800-`+key+`"},"owner":"o"}`, &won)
	if won.Outcome != idempb.Outcome_OUTCOME_WON {
		t.Fatalf(`a claim of the key \ud800-…, backslash and all: %v`, won.Outcome)
	}
}
