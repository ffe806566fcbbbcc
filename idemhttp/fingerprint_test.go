package idemhttp_test

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemnode/idemnode/idemhttp"
)

func fingerprint(method, path, contentType, body string) []byte {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	return idemhttp.Fingerprint(r, []byte(body))
}

func TestFingerprint(t *testing.T) {
	base := fingerprint("POST", "/v1/charges", "application/json", `{"amount":100,"currency":"EUR","meta":{"b":1,"a":[1,2]}}`)
	if len(base) != 32 {
		t.Fatalf("fingerprint is %d bytes, want 32 (SHA-256)", len(base))
	}
	same := []struct{ name, method, path, ct, body string }{
		{"key order and whitespace", "POST", "/v1/charges", "application/json; charset=utf-8", "{ \"meta\": {\"a\": [1, 2], \"b\": 1},\n \"currency\": \"EUR\", \"amount\": 100 }"},
		{"escaped string", "POST", "/v1/charges", "application/json", `{"amount":100,"currency":"\u0045UR","meta":{"b":1,"a":[1,2]}}`},
	}
	for _, tc := range same {
		if got := fingerprint(tc.method, tc.path, tc.ct, tc.body); !bytes.Equal(got, base) {
			t.Errorf("%s: fingerprint differs, want the same request", tc.name)
		}
	}
	different := []struct{ name, method, path, ct, body string }{
		{"amount", "POST", "/v1/charges", "application/json", `{"amount":101,"currency":"EUR","meta":{"b":1,"a":[1,2]}}`},
		{"number literal", "POST", "/v1/charges", "application/json", `{"amount":100.0,"currency":"EUR","meta":{"b":1,"a":[1,2]}}`},
		{"array order", "POST", "/v1/charges", "application/json", `{"amount":100,"currency":"EUR","meta":{"b":1,"a":[2,1]}}`},
		{"method", "PATCH", "/v1/charges", "application/json", `{"amount":100,"currency":"EUR","meta":{"b":1,"a":[1,2]}}`},
		{"path", "POST", "/v1/refunds", "application/json", `{"amount":100,"currency":"EUR","meta":{"b":1,"a":[1,2]}}`},
	}
	for _, tc := range different {
		if got := fingerprint(tc.method, tc.path, tc.ct, tc.body); bytes.Equal(got, base) {
			t.Errorf("%s: same fingerprint as another request", tc.name)
		}
	}
	// Other content types, and JSON that does not parse, count byte for byte.
	if bytes.Equal(fingerprint("POST", "/p", "text/plain", `{"a":1, "b":2}`), fingerprint("POST", "/p", "text/plain", `{"b":2,"a":1}`)) {
		t.Error("text/plain bodies were canonicalised")
	}
	if !bytes.Equal(fingerprint("POST", "/p", "application/vnd.api+json", `{"a":1, "b":2}`), fingerprint("POST", "/p", "application/vnd.api+json", `{"b":2,"a":1}`)) {
		t.Error("+json bodies were not canonicalised")
	}
	if bytes.Equal(fingerprint("POST", "/p", "application/json", `{"a":1} {"b":2}`), fingerprint("POST", "/p", "application/json", `{"a":1}{"b":2}`)) {
		t.Error("two JSON values were canonicalised as one")
	}
}

func TestCanonicalJSON(t *testing.T) {
	got, ok := idemhttp.CanonicalJSON([]byte(` {"z": null, "a": {"y": true, "x": "s"}, "m": [3, {"b":1,"a":2}]} `))
	if want := `{"a":{"x":"s","y":true},"m":[3,{"a":2,"b":1}],"z":null}`; !ok || string(got) != want {
		t.Errorf("CanonicalJSON = %s, %v; want %s", got, ok, want)
	}
	for _, bad := range []string{``, `{`, `{"a":1} x`, `nul`} {
		if _, ok := idemhttp.CanonicalJSON([]byte(bad)); ok {
			t.Errorf("CanonicalJSON(%q) ok, want not JSON", bad)
		}
	}
}

// TestFingerprintWithoutBody: the body does not count, the method and the
// path do, and no body is not the empty body of Fingerprint.
func TestFingerprintWithoutBody(t *testing.T) {
	fp := func(method, path, body string) []byte {
		return idemhttp.FingerprintWithoutBody(httptest.NewRequest(method, path, strings.NewReader(body)), []byte(body))
	}
	base := fp("POST", "/hooks", `{"id":"evt_1","pending_webhooks":1}`)
	if !bytes.Equal(fp("POST", "/hooks", `{"id":"evt_1","pending_webhooks":2}`), base) {
		t.Error("another body: fingerprint differs, want the same")
	}
	if bytes.Equal(fp("PUT", "/hooks", ""), base) || bytes.Equal(fp("POST", "/hooks/other", ""), base) {
		t.Error("another method or path: the same fingerprint")
	}
	if bytes.Equal(fingerprint("POST", "/hooks", "application/json", ""), base) {
		t.Error("FingerprintWithoutBody equals Fingerprint of the empty body")
	}
}
