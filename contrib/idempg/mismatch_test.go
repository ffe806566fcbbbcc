package idempg_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemnode/idemnode/client"
)

// TestRowWithAnotherFingerprint: a key's row is committed, and its record in
// idemnode is gone (here: Complete lost, then the claim released, as after
// an unknown outcome or an expired TTL). A call with the same key and
// another fingerprint gets client.ErrMismatch from the row, not the other
// request's response, and the key is released; the same fingerprint still
// replays the row.
func TestRowWithAnotherFingerprint(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := completeLostRunner(t, e)
	id := testID("other-fingerprint")
	first, err := r.Do(ctx, id, fingerprint, effect("first"))
	if err != nil || !first.Executed {
		t.Fatalf("first Do: %+v, %v", first, err)
	}
	var token int64
	if err := e.db.QueryRowContext(ctx, "SELECT token FROM idempg_effects WHERE key = $1", id.Key).Scan(&token); err != nil {
		t.Fatal(err)
	}
	if out, err := e.cl.Release(ctx, id, uint64(token)); err != nil {
		t.Fatalf("release the record: %v, %v", out, err)
	}
	other, err := e.r.Do(ctx, id, client.Fingerprint([]byte("another request")), effect("second"))
	if !errors.Is(err, client.ErrMismatch) || other.Executed || other.Replayed {
		t.Fatalf("Do with another fingerprint: %+v (%q), %v; want client.ErrMismatch", other, other.Response.Body, err)
	}
	if _, err := e.cl.Get(ctx, id); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("record after the mismatch: %v; want released", err)
	}
	same, err := e.r.Do(ctx, id, fingerprint, effect("third"))
	if err != nil || !same.Replayed {
		t.Fatalf("Do with the row's fingerprint: %+v, %v; want replayed", same, err)
	}
	checkEffects(t, e.db, map[string][]string{id.Key: {string(first.Response.Body), string(same.Response.Body)}})
}
