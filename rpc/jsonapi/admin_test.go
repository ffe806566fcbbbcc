package jsonapi_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// TestStatus: GET /v1/status answers the node's status.
func TestStatus(t *testing.T) {
	var st idempb.StatusResponse
	a := call(t, shared.Nodes[0].JSONURL(), http.MethodGet, "/v1/status", "")
	if a.status != http.StatusOK {
		t.Fatalf("HTTP %d %s", a.status, a.body)
	}
	if err := protojson.Unmarshal(a.body, &st); err != nil {
		t.Fatal(err)
	}
	if st.NodeId != "node1" || st.LeaderId == "" || st.Digest == "" {
		t.Fatalf("status %v", &st)
	}
}

// TestSnapshotStream: a server stream is newline-delimited JSON, each line
// {"result": message}; the chunks put together match the summary's SHA-256.
// (A snapshot is taken on the leader; a follower answers NOT_LEADER.)
func TestSnapshotStream(t *testing.T) {
	a := call(t, shared.WaitLeader(30e9).JSONURL(), http.MethodPost, "/v1/snapshot", `{}`)
	if a.status != http.StatusOK {
		t.Fatalf("HTTP %d %s", a.status, a.body)
	}
	h := sha256.New()
	var summary *idempb.SnapshotSummary
	sc := bufio.NewScanner(bytes.NewReader(a.body))
	sc.Buffer(nil, 16<<20)
	lines := 0
	for sc.Scan() {
		lines++
		var line struct {
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Error != nil || line.Result == nil {
			t.Fatalf("line %d %.200s: %v", lines, sc.Bytes(), err)
		}
		var chunk idempb.SnapshotChunk
		if err := protojson.Unmarshal(line.Result, &chunk); err != nil {
			t.Fatal(err)
		}
		h.Write(chunk.Data)
		if chunk.Summary != nil {
			summary = chunk.Summary
		}
	}
	if summary == nil || summary.Sha256 != hex.EncodeToString(h.Sum(nil)) {
		t.Fatalf("%d lines, summary %v, chunks' SHA-256 %x", lines, summary, h.Sum(nil))
	}
}

// TestEveryMethodHasItsPath: the rule of docs/API.md, POST
// /v1/<method in lower snake case> (GET for Status), holds for every method
// of the public services, in the served OpenAPI document and in the
// gateway's routes, so a method added to the proto without its path (or a
// stale idem.pb.gw.go) fails here. The calls name no server, so none
// changes the cluster.
func TestEveryMethodHasItsPath(t *testing.T) {
	a := call(t, shared.Nodes[0].JSONURL(), http.MethodGet, "/v1/openapi.json", "")
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(a.body, &doc); err != nil || a.status != http.StatusOK {
		t.Fatalf("HTTP %d: %v", a.status, err)
	}
	upper := regexp.MustCompile(`([a-z0-9])([A-Z])`)
	for _, sd := range []string{"Idempotency", "Admin"} {
		svc := idempb.File_idem_proto.Services().ByName(protoreflect.Name(sd))
		for i := range svc.Methods().Len() {
			name := string(svc.Methods().Get(i).Name())
			path := "/v1/" + strings.ToLower(upper.ReplaceAllString(name, "${1}_${2}"))
			verb := "post"
			if name == "Status" {
				verb = "get"
			}
			if _, ok := doc.Paths[path][verb]; !ok {
				t.Errorf("%s.%s: no %s %s in the OpenAPI document", sd, name, strings.ToUpper(verb), path)
			}
			body := ""
			if verb == "post" {
				body = `{"id":{"key":""}}`
				if sd == "Admin" {
					body = `{"id":"no-such-server"}`
					if name == "Members" || name == "Snapshot" {
						body = `{}`
					}
				}
			}
			routed := call(t, shared.Nodes[0].JSONURL(), strings.ToUpper(verb), path, body)
			if routed.status == http.StatusMethodNotAllowed || strings.Contains(string(routed.body), "no such path") {
				t.Errorf("%s.%s: %s %s is not routed: HTTP %d %s", sd, name, strings.ToUpper(verb), path, routed.status, routed.body)
			}
		}
	}
}

// TestStreamFromFollower: a stream that fails before its first message is
// answered with the error's HTTP status (503 for NOT_LEADER: a snapshot is
// taken on the leader) and one {"error": …} line.
func TestStreamFromFollower(t *testing.T) {
	leader := shared.WaitLeader(30e9)
	for _, nd := range shared.Running() {
		if nd == leader {
			continue
		}
		a := call(t, nd.JSONURL(), http.MethodPost, "/v1/snapshot", `{}`)
		var line struct {
			Error struct {
				Code    int
				Details []struct{ Reason string }
			}
		}
		if a.status != http.StatusServiceUnavailable || json.Unmarshal(a.body, &line) != nil ||
			line.Error.Code != 14 || len(line.Error.Details) == 0 || line.Error.Details[0].Reason != "NOT_LEADER" {
			t.Fatalf("snapshot from follower %s: HTTP %d %s", nd.ID, a.status, a.body)
		}
		return
	}
	t.Fatal("no follower")
}
