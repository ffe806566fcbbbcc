package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/idemnode/idemnode/fsm"
)

// TestMigrateEarlierFormats opens a store in the layout of format 1 (each
// record under its key) and of format 2 (the expiry index above the
// records), as earlier releases wrote them, beside what a migration cut
// short left: Open rewrites it into this release's layout in a new dir,
// and every record, event, usage and the metadata read back the same, in
// the same snapshot stream; the migrated store takes new commits, and
// reopening it migrates nothing.
func TestMigrateEarlierFormats(t *testing.T) {
	t.Run("format 1", func(t *testing.T) { testMigrate(t, toRecordsByKey) })
	t.Run("format 2", func(t *testing.T) { testMigrate(t, toExpiryLast) })
}

func testMigrate(t *testing.T, toEarlierFormat func(*testing.T, vfs.FS) string) {
	fs := vfs.NewMem()
	n := openNode(t, fs)
	for i := range 60 {
		k := fsm.RecordKey{Tenant: fmt.Sprintf("t%d", i%3), Scope: "POST /a", Key: fmt.Sprintf("k%02d", i)}
		res := n.m.Apply(uint64(2*i+1), &fsm.Command{Type: fsm.TypeClaim, Now: t0, Key: k, Owner: "o", Lease: sec,
			TTL: 600 * sec, WatchAbandon: true})
		if i%4 != 0 { // the others stay pending, and are marked abandoned below
			n.m.Apply(uint64(2*i+2), &fsm.Command{Type: fsm.TypeComplete, Now: t0, Key: k, Token: res.Record.Token,
				Response: &fsm.Response{Status: 201, Body: bytes.Repeat([]byte{byte(i)}, 100+i)}})
		}
	}
	if res := n.m.Apply(200, &fsm.Command{Type: fsm.TypeExpire, Now: t0 + 2*sec, Limit: 100}); res.Abandoned != 15 {
		t.Fatalf("Expire marked %d claims abandoned, want 15", res.Abandoned)
	}
	want, wantDigest := snapshot(t, n.m), n.m.Digest()
	mustNot(n.m.Sync())
	mustNot(n.m.Close())

	old := toEarlierFormat(t, fs)
	// A migration cut short by a crash left its dir and a table to ingest
	// behind: the next Open removes both and migrates again.
	next := nextName(old)
	mustNot(fs.MkdirAll(fs.PathJoin("fsm", next), 0o755))
	for _, junk := range []string{fs.PathJoin("fsm", next, "000004.sst"), fs.PathJoin("fsm", ingestPrefix+next+"-000001.sst")} {
		f, err := fs.Create(junk, vfs.WriteCategoryUnspecified)
		mustNot(err)
		_, err = f.Write([]byte("half a table"))
		mustNot(err)
		mustNot(f.Close())
	}
	s, err := Open("fsm", Options{FS: fs})
	if err != nil {
		t.Fatalf("open a store of an earlier format: %v", err)
	}
	if s.name == old {
		t.Fatalf("the store was not migrated into a new dir (%s)", s.name)
	}
	if _, err := fs.Stat(fs.PathJoin("fsm", old)); err == nil {
		t.Fatalf("the store of the earlier format is still there (%s)", old)
	}
	if _, err := fs.Stat(fs.PathJoin("fsm", ingestPrefix+next+"-000001.sst")); err == nil {
		t.Fatal("the cut-short migration's table is still there")
	}
	m, err := fsm.New(s)
	mustNot(err)
	if got := snapshot(t, m); !bytes.Equal(got, want) || m.Digest() != wantDigest {
		t.Fatal("the migrated store's snapshot stream or digest differs from the store's before")
	}
	// New commits replace migrated records (their positions are found)
	// and add new ones.
	k := fsm.RecordKey{Tenant: "t1", Scope: "POST /a", Key: "k04"} // pending and abandoned
	if res := m.Apply(201, &fsm.Command{Type: fsm.TypeRelease, Now: t0 + 3*sec, Key: k, Token: recordOf(t, m, k).Token}); res.Outcome != fsm.OutcomeOK {
		t.Fatalf("release a migrated claim: %+v", res)
	}
	m.Apply(202, &fsm.Command{Type: fsm.TypeClaim, Now: t0 + 3*sec, Key: fsm.RecordKey{Tenant: "t9", Scope: "s", Key: "new"},
		Owner: "o", Lease: sec, TTL: 600 * sec})
	after, afterDigest := snapshot(t, m), m.Digest()
	mustNot(m.Close())

	s, err = Open("fsm", Options{FS: fs})
	mustNot(err)
	m, err = fsm.New(s)
	mustNot(err)
	defer m.Close()
	if !bytes.Equal(snapshot(t, m), after) || m.Digest() != afterDigest {
		t.Fatal("the migrated store reopened differs")
	}
}

// TestMigrationNeedsRoomForItsCopy opens a store of format 2 on a volume
// with less free space than the store's tables: Open refuses, saying so,
// and leaves the store as it was; with the room, the next Open migrates it.
func TestMigrationNeedsRoomForItsCopy(t *testing.T) {
	fs := vfs.NewMem()
	n := openNode(t, fs)
	for i := range 40 {
		k := fsm.RecordKey{Tenant: "t", Scope: "POST /a", Key: fmt.Sprintf("k%02d", i)}
		n.m.Apply(uint64(i+1), &fsm.Command{Type: fsm.TypeClaim, Now: t0, Key: k, Owner: "o", Lease: sec, TTL: 600 * sec})
	}
	want, wantDigest := snapshot(t, n.m), n.m.Digest()
	mustNot(n.m.Sync())
	mustNot(n.m.Close())
	old := toExpiryLast(t, fs)

	fs.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 100, TotalBytes: 1 << 30, UsedBytes: 1<<30 - 100})
	if _, err := Open("fsm", Options{FS: fs}); err == nil || !strings.Contains(err.Error(), "not enough free space") {
		t.Fatalf("Open with 100 bytes free: %v, want a refusal for want of free space", err)
	}
	if cur, err := readCurrent(fs, "fsm"); err != nil || cur != old {
		t.Fatalf("after the refusal CURRENT names %q (%v), want the store as it was, %q", cur, err, old)
	}
	if _, err := fs.Stat(fs.PathJoin("fsm", nextName(old))); err == nil {
		t.Fatal("the refused migration left a dir behind")
	}

	fs.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 30, TotalBytes: 2 << 30, UsedBytes: 1 << 30})
	s, err := Open("fsm", Options{FS: fs})
	if err != nil {
		t.Fatalf("Open with room: %v", err)
	}
	if s.name == old {
		t.Fatalf("the store was not migrated (%s)", s.name)
	}
	m, err := fsm.New(s)
	mustNot(err)
	defer m.Close()
	if !bytes.Equal(snapshot(t, m), want) || m.Digest() != wantDigest {
		t.Fatal("the store migrated after the refusal differs from the store before")
	}
}

func recordOf(t *testing.T, m *fsm.Machine, k fsm.RecordKey) *fsm.Record {
	r, ok := m.Get(k)
	if !ok {
		t.Fatalf("no record %v", k)
	}
	return r
}

// toExpiryLast rewrites the current store in fs in place into the layout
// of format 2, and returns its dir's name: the expiry index under 'x',
// format 2.
func toExpiryLast(t *testing.T, fs vfs.FS) string {
	return editCurrentDB(fs, func(db *pebble.DB) {
		b := db.NewBatch()
		moveExpiryToX(db, b)
		b.Set(formatKey, binary.AppendUvarint(nil, formatExpiryLast), nil)
		mustNot(b.Commit(pebble.NoSync))
	})
}

// moveExpiryToX adds to b the moves of db's expiry index entries to 'x',
// where formats 1 and 2 keep them.
func moveExpiryToX(db *pebble.DB, b *pebble.Batch) {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixExpiry}, UpperBound: prefixEnd(prefixExpiry)})
	mustNot(err)
	for it.First(); it.Valid(); it.Next() {
		b.Set(append([]byte{prefixExpiryBefore3}, it.Key()[1:]...), it.Value(), nil)
	}
	mustNot(it.Close())
	b.DeleteRange([]byte{prefixExpiry}, prefixEnd(prefixExpiry), nil)
}

// toRecordsByKey rewrites the current store in fs in place into the
// layout of format 1, and returns its dir's name: each record under its
// key, no positions, the expiry index under 'x', format 1.
func toRecordsByKey(t *testing.T, fs vfs.FS) string {
	return editCurrentDB(fs, func(db *pebble.DB) {
		b := db.NewBatch()
		moveExpiryToX(db, b)
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixRecord}, UpperBound: prefixEnd(prefixRecord)})
		mustNot(err)
		for it.First(); it.Valid(); it.Next() {
			pos, err := decodePosition(it.Value())
			mustNot(err)
			enc, closer, err := db.Get(valueKey(pos))
			mustNot(err)
			b.Set(it.Key(), enc, nil)
			closer.Close()
		}
		mustNot(it.Close())
		b.DeleteRange([]byte{prefixValue}, prefixEnd(prefixValue), nil)
		b.Delete(positionKey, nil)
		b.Set(formatKey, binary.AppendUvarint(nil, formatRecordsByKey), nil)
		mustNot(b.Commit(pebble.NoSync))
	})
}

// editCurrentDB opens the current store's Pebble database in fs as it is,
// lets edit change it, and flushes and compacts it (no trace of what was
// overwritten left) before closing it; it returns the store's dir name.
func editCurrentDB(fs vfs.FS, edit func(db *pebble.DB)) string {
	name, err := readCurrent(fs, "fsm")
	mustNot(err)
	db, err := pebble.Open(fs.PathJoin("fsm", name), &pebble.Options{FS: fs, DisableWAL: true})
	mustNot(err)
	edit(db)
	mustNot(db.Flush())
	mustNot(db.Compact(context.Background(), []byte{0}, []byte{0xff}, true))
	mustNot(db.Close())
	return name
}

// TestMigrationKeepsTheStoreCurrentNames: when syncing the fsm dir fails
// after CURRENT was renamed to name the migrated store, that store is the
// store now. Removing it (as a failure before the rename does) would leave
// CURRENT naming nothing, and the next Open would reap the old store: both
// copies gone.
func TestMigrationKeepsTheStoreCurrentNames(t *testing.T) {
	mem := vfs.NewMem()
	n := openNode(t, mem)
	k := fsm.RecordKey{Tenant: "t", Scope: "s", Key: "k"}
	n.m.Apply(1, &fsm.Command{Type: fsm.TypeClaim, Now: t0, Key: k, Owner: "o", Lease: sec, TTL: 600 * sec})
	want := snapshot(t, n.m)
	mustNot(n.m.Sync())
	mustNot(n.m.Close())
	toRecordsByKey(t, mem)

	fs := &failSyncAfterCurrent{FS: mem}
	s, err := Open("fsm", Options{FS: fs})
	if !fs.failed {
		t.Fatal("the test failed no sync of the fsm dir after CURRENT was renamed")
	}
	if err != nil {
		t.Fatalf("open after a failed sync of the renamed CURRENT: %v", err)
	}
	m, err := fsm.New(s)
	mustNot(err)
	defer m.Close()
	if !bytes.Equal(snapshot(t, m), want) {
		t.Fatal("the migrated store differs")
	}
}

// failSyncAfterCurrent fails the first sync of the fsm dir after CURRENT
// was renamed into it.
type failSyncAfterCurrent struct {
	vfs.FS
	renamed, failed bool
}

func (f *failSyncAfterCurrent) Rename(oldname, newname string) error {
	if newname == f.PathJoin("fsm", currentFile) {
		f.renamed = true
	}
	return f.FS.Rename(oldname, newname)
}

func (f *failSyncAfterCurrent) OpenDir(name string) (vfs.File, error) {
	d, err := f.FS.OpenDir(name)
	if err != nil || !f.renamed || f.failed || name != "fsm" {
		return d, err
	}
	f.failed = true
	return failingSync{d}, nil
}

type failingSync struct{ vfs.File }

func (failingSync) Sync() error { return errors.New("injected: sync failed") }
