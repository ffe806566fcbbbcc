package main

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/internal/tlsconfig"
)

// TestJSONAPIOverTLS: the JSON API's port has the gRPC port's TLS and
// authentication: the client certificate decides the tenant, over HTTP/1.1
// (what Python's http.client speaks) and HTTP/2; no certificate, or asking
// for the peer server name that selects node-to-node TLS on the gRPC port,
// fails the handshake.
func TestJSONAPIOverTLS(t *testing.T) {
	t.Parallel()
	p := newServePKI(t)
	s := newServer(t, append(p.serveFlags(), "--auth", "--auth-cert-tenant", "cn"), p.clientFlags)
	s.api = testutil.FreeAddr(t)
	s.start()
	acme := p.clients.IssueClient(t, "acme").TLS(t)
	base := "https://" + s.api

	client := func(cfg *tls.Config, h2 bool) *http.Client {
		tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: h2}
		if !h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // HTTP/1.1 only
		}
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}
	post := func(hc *http.Client, path, body string) (int, string, string) {
		t.Helper()
		resp, err := hc.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Proto
	}
	for _, h2 := range []bool{false, true} {
		hc := client(&tls.Config{RootCAs: p.cluster.Pool(), Certificates: []tls.Certificate{acme}}, h2)
		code, body, got := post(hc, "/v1/claim", `{"id":{"scope":"POST /v1/charges","key":"k-`+keySuffix(h2)+`"},"owner":"o"}`)
		if code != http.StatusOK || !strings.Contains(body, "OUTCOME_WON") || got != protoName(h2) {
			t.Fatalf("%s: claim as acme: HTTP %d %s over %s", protoName(h2), code, body, got)
		}
		code, body, _ = post(hc, "/v1/get", `{"id":{"tenant":"acme","scope":"POST /v1/charges","key":"k-`+keySuffix(h2)+`"}}`)
		if code != http.StatusOK || !strings.Contains(body, `"tenant":"acme"`) {
			t.Fatalf("%s: get of acme's record: HTTP %d %s", protoName(h2), code, body)
		}
		if code, body, _ = post(hc, "/v1/get", `{"id":{"tenant":"globex","key":"k"}}`); code != http.StatusForbidden || !strings.Contains(body, "TENANT_MISMATCH") {
			t.Fatalf("%s: get naming another tenant: HTTP %d %s", protoName(h2), code, body)
		}
	}
	for name, cfg := range map[string]*tls.Config{
		"no client certificate": {RootCAs: p.cluster.Pool()},
		"the peer server name":  {RootCAs: p.cluster.Pool(), Certificates: []tls.Certificate{acme}, ServerName: tlsconfig.PeerServerName, InsecureSkipVerify: true},
	} {
		if _, err := client(cfg, false).Post(base+"/v1/status", "application/json", nil); err == nil {
			t.Errorf("%s: the request went through", name)
		}
	}
}

func keySuffix(h2 bool) string {
	if h2 {
		return "h2"
	}
	return "h1"
}

func protoName(h2 bool) string {
	if h2 {
		return "HTTP/2.0"
	}
	return "HTTP/1.1"
}
