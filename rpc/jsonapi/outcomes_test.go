package jsonapi_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"

	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// follower returns a running node that does not lead, so every write in a
// test sent to it is forwarded to the leader.
func follower(t *testing.T) *testcluster.Node {
	t.Helper()
	leader := shared.WaitLeader(30e9)
	for _, nd := range shared.Running() {
		if nd != leader {
			return nd
		}
	}
	t.Fatal("no follower")
	return nil
}

func recordID(key string) string {
	return fmt.Sprintf(`{"tenant":"acme","scope":"POST /v1/charges","key":%q}`, key)
}

// TestOutcomesOverHTTP walks the outcome table of docs/API.md over the
// JSON API of a follower, which forwards every write to the leader: each
// operation's outcomes are HTTP 200 answers with the outcome in the body,
// and the stored body comes back byte for byte through base64.
func TestOutcomesOverHTTP(t *testing.T) {
	base := follower(t).JSONURL()
	key := rand.Text()
	id := recordID(key)
	fp := base64.StdEncoding.EncodeToString([]byte("fingerprint-1"))
	claim := func(owner, fp string) *idempb.ClaimResponse {
		var r idempb.ClaimResponse
		post(t, base, "/v1/claim", fmt.Sprintf(`{"id":%s,"fingerprint":%q,"owner":%q,"lease":"30s","ttl":"3600s"}`, id, fp, owner), &r)
		return &r
	}
	// Absent: WON, token, attempt 1. The same owner again: WON, same token.
	won := claim("owner-a", fp)
	if won.Outcome != idempb.Outcome_OUTCOME_WON || won.Token == 0 || won.Attempt != 1 {
		t.Fatalf("first claim: %v", won)
	}
	if again := claim("owner-a", fp); again.Outcome != idempb.Outcome_OUTCOME_WON || again.Token != won.Token {
		t.Fatalf("the owner's retried claim: %v, want WON with token %d", again, won.Token)
	}
	// PENDING, lease live: IN_PROGRESS without the token; another request: MISMATCH.
	if busy := claim("owner-b", fp); busy.Outcome != idempb.Outcome_OUTCOME_IN_PROGRESS || busy.Token != 0 {
		t.Fatalf("claim of a held key: %v", busy)
	}
	otherFP := base64.StdEncoding.EncodeToString([]byte("fingerprint-2"))
	if mm := claim("owner-b", otherFP); mm.Outcome != idempb.Outcome_OUTCOME_MISMATCH {
		t.Fatalf("claim with another fingerprint: %v", mm)
	}
	// Extend: the holder OK, another token FENCED, an absent key NOT_FOUND.
	extend := func(id string, token uint64) idempb.Outcome {
		var r idempb.ExtendResponse
		post(t, base, "/v1/extend", fmt.Sprintf(`{"id":%s,"token":"%d","lease":"60s"}`, id, token), &r)
		return r.Outcome
	}
	if got := extend(id, won.Token); got != idempb.Outcome_OUTCOME_OK {
		t.Fatalf("extend by the holder: %v", got)
	}
	if got := extend(id, won.Token+1); got != idempb.Outcome_OUTCOME_FENCED {
		t.Fatalf("extend with another token: %v", got)
	}
	if got := extend(recordID(key+"-absent"), won.Token); got != idempb.Outcome_OUTCOME_NOT_FOUND {
		t.Fatalf("extend of an absent key: %v", got)
	}
	// Complete: another token FENCED, absent NOT_FOUND, the holder OK, its
	// retry OK, another response MISMATCH. The body holds every byte value.
	body := make([]byte, 256)
	for i := range body {
		body[i] = byte(i)
	}
	complete := func(id string, token uint64, body []byte) idempb.Outcome {
		var r idempb.CompleteResponse
		post(t, base, "/v1/complete", fmt.Sprintf(`{"id":%s,"token":"%d","response":{"status":201,"headers":[{"name":"Content-Type","value":"application/json"}],"body":%q}}`,
			id, token, base64.StdEncoding.EncodeToString(body)), &r)
		return r.Outcome
	}
	for _, tc := range []struct {
		what  string
		id    string
		token uint64
		body  []byte
		want  idempb.Outcome
	}{
		{"another token", id, won.Token + 1, body, idempb.Outcome_OUTCOME_FENCED},
		{"an absent key", recordID(key + "-absent"), won.Token, body, idempb.Outcome_OUTCOME_NOT_FOUND},
		{"the holder", id, won.Token, body, idempb.Outcome_OUTCOME_OK},
		{"the holder again", id, won.Token, body, idempb.Outcome_OUTCOME_OK},
		{"another response", id, won.Token, []byte("other"), idempb.Outcome_OUTCOME_MISMATCH},
	} {
		if got := complete(tc.id, tc.token, tc.body); got != tc.want {
			t.Fatalf("complete by %s: %v, want %v", tc.what, got, tc.want)
		}
	}
	// COMPLETED: the replay carries the token and the body byte for byte.
	replay := claim("owner-c", fp)
	if replay.Outcome != idempb.Outcome_OUTCOME_COMPLETED || replay.Token != won.Token ||
		!bytes.Equal(replay.Response.GetBody(), body) || replay.Response.GetStatus() != 201 {
		t.Fatalf("replay: %v, want COMPLETED, token %d and the stored body", replay, won.Token)
	}
	// Get and Wait of the completed record; Get of an absent one.
	var got idempb.GetResponse
	post(t, base, "/v1/get", fmt.Sprintf(`{"id":%s}`, id), &got)
	if got.Outcome != idempb.Outcome_OUTCOME_OK || got.Record.GetState() != idempb.State_STATE_COMPLETED ||
		!bytes.Equal(got.Record.GetResponse().GetBody(), body) {
		t.Fatalf("get: %v", &got)
	}
	post(t, base, "/v1/get", fmt.Sprintf(`{"id":%s,"consistency":"CONSISTENCY_STALE"}`, recordID(key+"-absent")), &got)
	if got.Outcome != idempb.Outcome_OUTCOME_NOT_FOUND {
		t.Fatalf("stale get of an absent key: %v", &got)
	}
	var waited idempb.WaitResponse
	post(t, base, "/v1/wait", fmt.Sprintf(`{"id":%s,"timeout":"1s"}`, id), &waited)
	if waited.Outcome != idempb.Outcome_OUTCOME_COMPLETED {
		t.Fatalf("wait on a completed record: %v", &waited)
	}
	// Release: COMPLETED is FENCED, absent OK; a held key released is gone.
	release := func(id string, token uint64) idempb.Outcome {
		var r idempb.ReleaseResponse
		post(t, base, "/v1/release", fmt.Sprintf(`{"id":%s,"token":"%d"}`, id, token), &r)
		return r.Outcome
	}
	if got := release(id, won.Token); got != idempb.Outcome_OUTCOME_FENCED {
		t.Fatalf("release of a completed record: %v", got)
	}
	if got := release(recordID(key+"-absent"), 7); got != idempb.Outcome_OUTCOME_OK {
		t.Fatalf("release of an absent key: %v", got)
	}
	held := recordID(key + "-held")
	var h idempb.ClaimResponse
	post(t, base, "/v1/claim", fmt.Sprintf(`{"id":%s,"fingerprint":%q,"owner":"o"}`, held, fp), &h)
	post(t, base, "/v1/wait", fmt.Sprintf(`{"id":%s,"timeout":"0.2s"}`, held), &waited)
	if waited.Outcome != idempb.Outcome_OUTCOME_IN_PROGRESS {
		t.Fatalf("wait on a held key: %v", &waited)
	}
	if got := release(held, h.Token); got != idempb.Outcome_OUTCOME_OK {
		t.Fatalf("release by the holder: %v", got)
	}
	post(t, base, "/v1/wait", fmt.Sprintf(`{"id":%s}`, held), &waited)
	if waited.Outcome != idempb.Outcome_OUTCOME_NOT_FOUND {
		t.Fatalf("wait on a released key: %v", &waited)
	}
}

// TestCanonicalJSON: what a client in another language reads is canonical
// protojson: lowerCamelCase names, enum names, 64-bit integers as strings,
// every field present (null for an absent message).
func TestCanonicalJSON(t *testing.T) {
	base := shared.Nodes[0].JSONURL()
	a := call(t, base, http.MethodPost, "/v1/claim", fmt.Sprintf(`{"id":%s,"fingerprint":"AQI=","owner":"o"}`, recordID(rand.Text())))
	if a.status != http.StatusOK {
		t.Fatalf("HTTP %d %s", a.status, a.body)
	}
	m := jsonObject(t, a.body)
	if m["outcome"] != "OUTCOME_WON" {
		t.Errorf("outcome %v, want the enum's name OUTCOME_WON", m["outcome"])
	}
	if _, ok := m["token"].(string); !ok {
		t.Errorf("token %#v, want a string (a uint64)", m["token"])
	}
	for _, name := range []string{"leaseExpiresAt", "expiresAt", "attempt", "response"} {
		if _, ok := m[name]; !ok {
			t.Errorf("field %q missing from %s", name, a.body)
		}
	}
	if m["response"] != nil {
		t.Errorf("response %v, want null on WON", m["response"])
	}
}
