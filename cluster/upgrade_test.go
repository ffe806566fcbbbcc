package cluster_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/internal/testaddr"
	"github.com/idemnode/idemnode/internal/testclock"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/store"
)

// legacyRecord is one record of cluster/testdata/legacy-inmem-v1.tar.gz's
// expected.json, as the in-memory release (8f176c4) stored it.
type legacyRecord struct {
	Tenant, Scope, Key, State, Body, Fingerprint, Owner string
	Token                                               uint64
	Attempt                                             uint32
	Status                                              int32
	Headers                                             []struct{ Name, Value string }
	CreatedAt                                           int64 `json:"created_at"`
	ExpiresAt                                           int64 `json:"expires_at"`
	LeaseExpiresAt                                      int64 `json:"lease_expires_at"`
	CompletedAt                                         int64 `json:"completed_at"`
	InSnapshot                                          bool  `json:"in_snapshot"`
}

type legacyFixture struct {
	Len     int
	Digest  string // the digest the writing release showed (store-format1 only)
	Records []legacyRecord
}

// TestUpgradeFromInMemoryRelease opens a data dir written by the in-memory
// release: a one-node cluster with 40 records in a full snapshot (5 of them
// PENDING), the log compacted to 4 entries before it, and 10 more records
// only in the log after it. The first start must load the snapshot into a
// new store and replay the log: every record, token and byte of every
// response survives, the old snapshots are gone, and a second start finds
// the same state in the store alone.
func TestUpgradeFromInMemoryRelease(t *testing.T) {
	t.Parallel()
	t.Run("first start", func(t *testing.T) { testUpgrade(t, false) })
	// A crash during the first start can leave the new, still empty store
	// beside the old snapshots: the next start must migrate again, not
	// take the empty store for a finished migration.
	t.Run("after a migration cut short", func(t *testing.T) { testUpgrade(t, true) })
}

func testUpgrade(t *testing.T, cutShort bool) {
	dir := t.TempDir()
	want := unpackLegacyFixture(t, filepath.Join("testdata", "legacy-inmem-v1.tar.gz"), dir)
	data := filepath.Join(dir, "data")
	if cutShort {
		s, err := store.Open(filepath.Join(data, "fsm"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	cfg := soloConfig(data, testaddr.New(t).IP(1))
	cfg.Clock = clockAfter(want)

	n := openSolo(t, cfg)
	checkLegacyRecords(t, n.Machine(), want)
	if _, err := os.Stat(filepath.Join(data, "snapshots")); !os.IsNotExist(err) {
		t.Fatalf("the migrated snapshots are still there (stat: %v)", err)
	}
	digest := n.Machine().Digest()
	n.Close()

	again := openSolo(t, cfg)
	checkLegacyRecords(t, again.Machine(), want)
	if again.Machine().Digest() != digest {
		t.Fatal("the second start holds another state than the first")
	}
	checkGetsIdentity(t, again, digest)
	checkRetryAnswered(t, again, want.Records[0])
}

// clockAfter is a clock that stands a minute after the fixture's latest
// record: its records were written in November 2026 with a 30-day TTL, and
// stay live whenever the test runs.
func clockAfter(want legacyFixture) *testclock.Clock {
	var latest int64
	for _, r := range want.Records {
		latest = max(latest, r.CreatedAt, r.CompletedAt)
	}
	return testclock.New(time.Unix(0, latest).Add(time.Minute))
}

// checkRetryAnswered: a retry of the completed request r is answered from
// the migrated record.
func checkRetryAnswered(t *testing.T, n *cluster.Node, r legacyRecord) {
	t.Helper()
	res, err := n.Apply(ctxFor(t, 10*time.Second), &fsm.Command{Type: fsm.TypeClaim,
		Key: fsm.RecordKey{Tenant: r.Tenant, Scope: r.Scope, Key: r.Key}, Fingerprint: []byte(r.Fingerprint),
		Owner: "a-retry", Lease: int64(time.Minute), TTL: int64(time.Hour)})
	if err != nil || res.Outcome != fsm.OutcomeCompleted || string(res.Record.Response.Body) != r.Body {
		t.Fatalf("retry of %s after the upgrade: %v %+v", r.Key, err, res)
	}
}

func checkLegacyRecords(t *testing.T, m *fsm.Machine, want legacyFixture) {
	t.Helper()
	if m.Len() != want.Len {
		t.Fatalf("%d records after the upgrade, want %d", m.Len(), want.Len)
	}
	for _, w := range want.Records {
		r, ok := m.Get(fsm.RecordKey{Tenant: w.Tenant, Scope: w.Scope, Key: w.Key})
		if !ok {
			t.Fatalf("record %s (in the snapshot: %v) lost in the upgrade", w.Key, w.InSnapshot)
		}
		got := legacyRecord{Tenant: r.Tenant, Scope: r.Scope, Key: r.Key, State: r.State.String(),
			Fingerprint: string(r.Fingerprint), Owner: r.Owner, Token: r.Token, Attempt: r.Attempt,
			CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, LeaseExpiresAt: r.LeaseExpiresAt,
			CompletedAt: r.CompletedAt, InSnapshot: w.InSnapshot, Headers: w.Headers[:0:0]}
		if r.Response != nil {
			got.Status, got.Body = r.Response.Status, string(r.Response.Body)
			for _, h := range r.Response.Headers {
				got.Headers = append(got.Headers, struct{ Name, Value string }{h.Name, h.Value})
			}
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(w)
		if !bytes.Equal(a, b) {
			t.Fatalf("record %s changed in the upgrade:\n got %s\nwant %s", w.Key, a, b)
		}
	}
}

// unpackLegacyFixture extracts the archive into dir and returns its expected.json.
func unpackLegacyFixture(t *testing.T, archive, dir string) legacyFixture {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.Clean(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o700)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				if err = os.MkdirAll(filepath.Dir(path), 0o700); err == nil {
					err = os.WriteFile(path, b, 0o600)
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var want legacyFixture
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err == nil {
		err = json.Unmarshal(b, &want)
	}
	if err != nil || len(want.Records) == 0 {
		t.Fatalf("expected.json: %v (%d records)", err, len(want.Records))
	}
	return want
}

// TestUpgradeFromStoreFormat1 opens a data dir written by the release
// before records were stored at their positions (store format 1, 5a37c70;
// cluster/testdata/README.md): 50 records, 5 of them PENDING and watched,
// the log compacted once. The first start rewrites the store into format 2
// in a new dir: every record, token and byte of every response survives
// with the digest the old release showed, and a second start finds the
// same state without migrating again.
func TestUpgradeFromStoreFormat1(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	want := unpackLegacyFixture(t, filepath.Join("testdata", "store-format1.tar.gz"), dir)
	data := filepath.Join(dir, "data")
	before := currentStore(t, data)
	cfg := soloConfig(data, testaddr.New(t).IP(1))
	cfg.Clock = clockAfter(want)

	n := openSolo(t, cfg)
	checkLegacyRecords(t, n.Machine(), want)
	if got := n.Machine().Digest(); got != want.Digest {
		t.Fatalf("digest after the upgrade %s, the old release showed %s", got, want.Digest)
	}
	migrated := currentStore(t, data)
	if migrated == before {
		t.Fatalf("the store was not migrated (CURRENT still names %s)", before)
	}
	n.Close()

	again := openSolo(t, cfg)
	checkLegacyRecords(t, again.Machine(), want)
	if again.Machine().Digest() != want.Digest || currentStore(t, data) != migrated {
		t.Fatal("the second start holds another state or store than the first")
	}
	checkRetryAnswered(t, again, want.Records[0])
	checkGetsIdentity(t, again, again.Machine().Digest())
}

// checkGetsIdentity: a data dir written before cluster identities gets
// one, through the log, and keeps its state (the digest stays).
func checkGetsIdentity(t *testing.T, n *cluster.Node, digest string) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, "an identity for the upgraded state", func() error {
		if n.ClusterID() == "" {
			return fmt.Errorf("no identity yet")
		}
		return nil
	})
	if got := n.Machine().Digest(); got != digest {
		t.Fatalf("the identity changed the state: digest %s, was %s", got, digest)
	}
}

// currentStore returns the store dir the data dir's CURRENT names.
func currentStore(t *testing.T, data string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "fsm", "CURRENT"))
	if err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSpace(b))
}
