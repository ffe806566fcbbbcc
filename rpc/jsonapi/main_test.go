package jsonapi_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testmain"
)

// shared is a three-node cluster, each node serving
// the JSON API, without authentication.
var shared *testcluster.Cluster

func TestMain(m *testing.M) {
	tb := testmain.New("jsonapi")
	if f := flag.Lookup("test.fuzz"); f == nil || f.Value.String() == "" {
		shared = testcluster.Start(tb, 3, testcluster.Options{JSON: true})
	}
	code := m.Run()
	tb.Close()
	os.Exit(code)
}

// answer is one HTTP exchange with the JSON API.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// call sends body (a JSON string, or "" for none) to path on base.
func call(t testing.TB, base, method, path, body string, header ...string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// post calls a method with the request as JSON and decodes a 200 answer
// into out, as protojson (a client in any language reads the same bytes).
func post(t testing.TB, base, path, body string, out proto.Message, header ...string) {
	t.Helper()
	a := call(t, base, http.MethodPost, path, body, header...)
	if a.status != http.StatusOK {
		t.Fatalf("POST %s %s: HTTP %d %s", path, body, a.status, a.body)
	}
	if err := protojson.Unmarshal(a.body, out); err != nil {
		t.Fatalf("POST %s: decode %s: %v", path, a.body, err)
	}
}

// failure is an error answer decoded: the google.rpc.Status and its
// ErrorInfo.
type failure struct {
	http int
	st   *status.Status
	info *errdetails.ErrorInfo
}

// fail calls path expecting an error answer.
func fail(t testing.TB, base, method, path, body string, header ...string) failure {
	t.Helper()
	a := call(t, base, method, path, body, header...)
	if a.status == http.StatusOK {
		t.Fatalf("%s %s %s: HTTP 200 %s, want an error", method, path, body, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	var sp spb.Status
	if err := protojson.Unmarshal(a.body, &sp); err != nil {
		t.Fatalf("%s %s: HTTP %d body %s is not a google.rpc.Status: %v", method, path, a.status, a.body, err)
	}
	f := failure{http: a.status, st: status.FromProto(&sp)}
	for _, d := range f.st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			f.info = info
		}
	}
	return f
}

func (f failure) want(t testing.TB, httpStatus int, code codes.Code, reason string) {
	t.Helper()
	if f.http != httpStatus || f.st.Code() != code {
		t.Fatalf("HTTP %d %s %q, want HTTP %d %s", f.http, f.st.Code(), f.st.Message(), httpStatus, code)
	}
	if got := f.info.GetReason(); got != reason {
		t.Fatalf("reason %q (%q), want %q", got, f.st.Message(), reason)
	}
}

// jsonObject decodes a body as a generic JSON object, the way a client in
// another language sees it.
func jsonObject(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return m
}
