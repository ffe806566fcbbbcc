package store

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/idemnode/idemnode/fsm"
)

// TestResponsesLiveInBlobFiles: a completed record's response goes into a
// blob file when the store is flushed, and comes back byte for byte from a
// lookup after a reopen and from a snapshot stream restored elsewhere.
func TestResponsesLiveInBlobFiles(t *testing.T) {
	fs := vfs.NewMem()
	n := openNode(t, fs)
	bodies := map[string][]byte{}
	for i := range 200 {
		k := fsm.RecordKey{Tenant: "t", Scope: "s", Key: fmt.Sprintf("key-%03d", i)}
		won := n.m.Apply(uint64(2*i+1), &fsm.Command{Type: fsm.TypeClaim, Now: t0, Key: k, Fingerprint: []byte("fp"),
			Owner: "o", Lease: 60 * sec, TTL: 600 * sec})
		if won.Outcome != fsm.OutcomeWon {
			t.Fatalf("claim %s: %v", k.Key, won.Outcome)
		}
		body := bytes.Repeat([]byte{byte(i)}, separatedValueBytes+i)
		done := n.m.Apply(uint64(2*i+2), &fsm.Command{Type: fsm.TypeComplete, Now: t0, Key: k, Token: won.Record.Token,
			Response: &fsm.Response{Status: 200, Body: body}})
		if done.Outcome != fsm.OutcomeOK {
			t.Fatalf("complete %s: %v", k.Key, done.Outcome)
		}
		bodies[k.Key] = body
	}
	if err := n.m.Store().Sync(); err != nil {
		t.Fatal(err)
	}
	if blobs := n.m.Store().(*Store).Metrics().BlobFiles.LiveCount; blobs == 0 {
		t.Fatal("no blob file after flushing 200 completed records")
	}
	stream := snapshot(t, n.m)
	if err := n.m.Close(); err != nil {
		t.Fatal(err)
	}

	reopened := openNode(t, fs)
	defer reopened.m.Close()
	restored := openNode(t, vfs.NewMem())
	defer restored.m.Close()
	if err := restored.m.Restore(bytes.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*fsm.Machine{reopened.m, restored.m} {
		for key, body := range bodies {
			r, ok := m.Get(fsm.RecordKey{Tenant: "t", Scope: "s", Key: key})
			if !ok || r.Response == nil || !bytes.Equal(r.Response.Body, body) {
				t.Fatalf("record %s: response not byte-identical (found %v)", key, ok)
			}
		}
	}
	if reopened.m.Digest() != restored.m.Digest() {
		t.Fatal("restored digest differs from the reopened store's")
	}
}
