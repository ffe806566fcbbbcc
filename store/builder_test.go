package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/idemnode/idemnode/fsm"
)

// legacyStream writes records in the given order as a version 2 stream
// (the in-memory releases' format: expiry order, no sum).
func legacyStream(recs ...*fsm.Record) []byte {
	b := append([]byte("IDEMSNAP"), 2)
	b = binary.AppendVarint(b, t0)
	b = binary.AppendUvarint(b, 7)
	b = binary.AppendUvarint(b, uint64(len(recs)))
	for _, r := range recs {
		enc := fsm.EncodeRecord(r)
		b = binary.AppendUvarint(b, uint64(len(enc)))
		b = append(b, enc...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

func legacyRecord(key string, expires int64) *fsm.Record {
	return &fsm.Record{RecordKey: fsm.RecordKey{Tenant: "t", Scope: "s", Key: key}, State: fsm.StatePending,
		Fingerprint: []byte("fp"), Owner: "o", Token: 1 << 16, Attempt: 1, CreatedAt: t0, ExpiresAt: expires}
}

// TestRestoreOutOfKeyOrder: a version 2 stream comes in expiry order, not
// key order, so the builder cannot keep writing sorted tables; every record
// must still arrive, and a key given twice must still be refused, even
// when its first copy sits in a table not yet ingested.
func TestRestoreOutOfKeyOrder(t *testing.T) {
	var recs []*fsm.Record
	for i := range 50 {
		recs = append(recs, legacyRecord(fmt.Sprintf("k%02d", 49-i), t0+int64(i+1)*sec)) // keys descend as expiry ascends
	}
	n := openNode(t, vfs.NewMem())
	defer n.m.Close()
	if err := n.m.Restore(bytes.NewReader(legacyStream(recs...))); err != nil {
		t.Fatal(err)
	}
	if n.m.Len() != 50 {
		t.Fatalf("restored %d records, want 50", n.m.Len())
	}
	for _, r := range recs {
		if _, ok := n.m.Get(r.RecordKey); !ok {
			t.Fatalf("record %s missing after the restore", r.Key)
		}
	}
	// A key twice, the second copy expiring later: in expiry order, so
	// only the duplicate check can refuse it, whether the first copy sits
	// in a table not yet ingested or in a batch not yet written.
	for name, dup := range map[string][]byte{
		"first in a table": legacyStream(legacyRecord("k05", t0+sec), legacyRecord("k07", t0+2*sec), legacyRecord("k05", t0+3*sec)),
		"first in a batch": legacyStream(legacyRecord("k07", t0+sec), legacyRecord("k05", t0+2*sec), legacyRecord("k05", t0+3*sec)),
	} {
		m := openNode(t, vfs.NewMem()).m
		if err := m.Restore(bytes.NewReader(dup)); !errors.Is(err, fsm.ErrMalformed) {
			t.Fatalf("%s: restore of a stream with a key twice: %v, want ErrMalformed", name, err)
		}
		m.Close()
	}
}

// TestRestoreInKeyOrderIngestsTables: a version 3 stream in key order goes
// into the bottom level through ingested tables, not level 0.
func TestRestoreInKeyOrderIngestsTables(t *testing.T) {
	src := openNode(t, vfs.NewMem())
	defer src.m.Close()
	for i := range 2000 {
		k := fsm.RecordKey{Tenant: "t", Scope: "s", Key: fmt.Sprintf("key-%05d", i)}
		src.m.Apply(uint64(i+1), &fsm.Command{Type: fsm.TypeClaim, Now: t0, Key: k, Fingerprint: []byte("fp"), Owner: "o",
			Lease: sec, TTL: 600 * sec})
	}
	dst := openNode(t, vfs.NewMem())
	defer dst.m.Close()
	if err := dst.m.Restore(bytes.NewReader(snapshot(t, src.m))); err != nil {
		t.Fatal(err)
	}
	if dst.m.Digest() != src.m.Digest() {
		t.Fatal("restored digest differs")
	}
	m := dst.m.Store().(*Store).Metrics()
	if bottom := m.Levels[len(m.Levels)-1].TablesCount; bottom == 0 {
		t.Fatalf("no table in the bottom level after a restore in key order (level 0: %d)", m.Levels[0].TablesCount)
	}
}
