package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"testing"
)

// seedCommands holds one valid command of every type, and the edge forms
// (nil response, empty batch, empty strings) the codec must keep apart.
func seedCommands() []*Command {
	return []*Command{
		claim("k", "o1", at(0)),
		claimWith("", "", "", 0, 0, -1),
		complete("k", tok(1), charged, at(1)),
		complete("k", tok(1), nil, at(1)),
		complete("k", tok(1), &Response{}, at(1)),
		release("k", tok(1), at(2)),
		extend("k", tok(1), 60*sec, at(3)),
		checkpoint("k", tok(1), "charged", "ch_1", at(3)),
		checkpoint("k", tok(1), "", "", at(3)),
		expire(1<<32-1, at(4)),
		batch(),
		batch(claim("a", "o1", at(5)), complete("a", TokenFor(9, 0), resp(402, "declined"), at(5)),
			release("b", 7, at(5)), extend("c", 8, sec, at(5)), checkpoint("a", TokenFor(9, 0), "p", "d", at(5)),
			expire(100, at(6))),
	}
}

// sentinel reports whether err wraps one of the package's decoding errors.
func sentinel(err error) bool {
	return errors.Is(err, ErrTruncated) || errors.Is(err, ErrMalformed) || errors.Is(err, ErrChecksum)
}

func FuzzDecodeCommand(f *testing.F) {
	// Seeds in both formats: random bytes rarely carry a valid checksum, so
	// the checksum-less first format is where the fuzzer reaches the
	// decoder behind it.
	for _, c := range seedCommands() {
		f.Add(EncodeCommand(c))
		f.Add(legacy(c))
	}
	f.Add([]byte{})
	f.Add([]byte{commandFormat})
	f.Add([]byte{commandFormatV1, byte(TypeBatch), 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add(sealed(byte(TypeBatch), 0, 0xff, 0xff, 0xff, 0xff, 0x0f))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			if c != nil || !sentinel(err) {
				t.Fatalf("decode error %v with command %+v", err, c)
			}
			return
		}
		enc := EncodeCommand(c)
		again, err := DecodeCommand(enc)
		if err != nil {
			t.Fatalf("re-encoded command does not decode: %v", err)
		}
		if !reflect.DeepEqual(c, again) || !bytes.Equal(EncodeCommand(again), enc) {
			t.Fatalf("round trip changed the command\n got %+v\nwant %+v", again, c)
		}
		// Whatever decodes must also apply, on any node, without panicking.
		a, b2 := NewMachine(), NewMachine()
		if !sameResult(a.Apply(1, c), b2.Apply(1, again)) || a.Digest() != b2.Digest() {
			t.Fatal("equal commands applied differently")
		}
	})
}

// encodedBody returns the encoded form of c without the format byte and
// the checksum, to build inputs the decoder must refuse after the checksum.
func encodedBody(c *Command) []byte {
	enc := EncodeCommand(c)
	return enc[1 : len(enc)-commandCRCLen]
}

// sealed frames body in the current format with a valid checksum.
func sealed(body ...byte) []byte {
	b := append([]byte{commandFormat}, body...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// legacy returns c in the first format, without a checksum.
func legacy(c *Command) []byte { return append([]byte{commandFormatV1}, encodedBody(c)...) }

func TestDecodeCommandRefusesMalformed(t *testing.T) {
	valid := encodedBody(complete("k", tok(1), charged, at(1)))
	withResponseByte := func(v byte) []byte {
		b := encodedBody(complete("k", 1, nil, 0))
		b[len(b)-1] = v // the presence byte is the last one of a nil response
		return sealed(b...)
	}
	// A status beyond int32: no encoder writes it, so it must not decode to
	// a truncated (here negative) status.
	bigStatus := encodedBody(complete("k", 1, &Response{}, 0))
	bigStatus = sealed(append(bigStatus[:len(bigStatus)-4], 1, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0)...)
	huge := &Command{Type: TypeBatch}
	for range MaxBatch + 1 {
		huge.Batch = append(huge.Batch, expire(1, 0))
	}
	// Every input but the first two has a valid checksum, so the refusal
	// comes from the check each case is named for.
	cases := map[string][]byte{
		"empty":                 {},
		"unknown format":        append([]byte{3}, valid...),
		"type unknown":          sealed(byte(TypeUnknown), 0),
		"type past the last":    sealed(byte(typeEnd), 0),
		"truncated":             sealed(valid[:len(valid)-1]...),
		"trailing bytes":        sealed(append(append([]byte(nil), valid...), 0)...),
		"nested batch":          EncodeCommand(batch(batch())),
		"batch count too large": sealed(byte(TypeBatch), 0, 0xff, 0xff, 0x03),
		"batch over MaxBatch":   EncodeCommand(huge),
		"response presence 2":   withResponseByte(2),
		"status beyond int32":   bigStatus,
		"expire limit > 2^32":   sealed(byte(TypeExpire), 0, 0x80, 0x80, 0x80, 0x80, 0x10),
		"string past the end":   sealed(byte(TypeRelease), 0, 0x7f, 'a'),
		"varint overflow":       sealed(byte(TypeRelease), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"v1 trailing bytes":     append(legacy(release("k", 1, 0)), 0),
	}
	for name, b := range cases {
		c, err := DecodeCommand(b)
		if err == nil || !sentinel(err) {
			t.Errorf("%s: decoded %+v, err %v; want a decoding error", name, c, err)
		}
		if errors.Is(err, ErrChecksum) {
			t.Errorf("%s: refused by the checksum, not by the check it names: %v", name, err)
		}
	}
}

func TestDecodeCommandRefusesEveryFlippedByte(t *testing.T) {
	for _, c := range seedCommands() {
		enc := EncodeCommand(c)
		for i := range enc {
			for _, mask := range []byte{0x01, 0x80, 0xff} {
				bad := append([]byte(nil), enc...)
				bad[i] ^= mask
				if got, err := DecodeCommand(bad); err == nil || !sentinel(err) {
					t.Fatalf("%s: byte %d of %d xor %#x decoded to %+v, err %v", c.Type, i, len(enc), mask, got, err)
				}
			}
		}
		for _, n := range []int{0, 1, len(enc) - 1} {
			if _, err := DecodeCommand(enc[:n]); err == nil || !sentinel(err) {
				t.Fatalf("%s: truncated to %d bytes: err %v", c.Type, n, err)
			}
		}
	}
}

// TestDecodeCommandReadsFormat1 keeps logs written before commands carried
// a checksum readable: the same command, decoded from either format.
func TestDecodeCommandReadsFormat1(t *testing.T) {
	for _, c := range seedCommands() {
		v1, err := DecodeCommand(legacy(c))
		if err != nil {
			t.Fatalf("%s in format 1: %v", c.Type, err)
		}
		v2, err := DecodeCommand(EncodeCommand(c))
		if err != nil {
			t.Fatalf("%s: %v", c.Type, err)
		}
		if !reflect.DeepEqual(v1, v2) {
			t.Fatalf("%s: format 1 decodes to %+v, format 2 to %+v", c.Type, v1, v2)
		}
	}
}

// fuzzState is a small state with both kinds of record and a stored response.
func fuzzState(t tb) *harness {
	h := newHarness(t)
	h.applyAll(claim("a", "o1", at(0)), complete("a", tok(1), charged, at(1)),
		claimWith("b", "fp-B", "o2", 10*sec, 60*sec, at(2)), checkpoint("b", tok(3), "charged", "ch_1", at(2)))
	return h
}

func seedSnapshots(t tb) [][]byte {
	return [][]byte{snapshotBytes(t, NewMachine()), snapshotBytes(t, fuzzState(t).m), snapshotBytes(t, feedState(t))}
}

// feedState holds an abandoned record, a resolved one and their events: a
// version 4 stream.
func feedState(t tb) *Machine {
	h := newHarness(t)
	h.apply(watched("a", "o1", 10*sec, 100*sec, at(0)))
	token := h.apply(watched("b", "o1", 10*sec, 100*sec, at(0))).Record.Token
	h.apply(checkpoint("a", tok(1), "charged", "ch_1", at(1)))
	h.apply(expire(10, at(10)))
	h.apply(complete("b", token, resp(201, "ok"), at(11)))
	return h.m
}

// FuzzDecodeEvent: an event of the feed decodes from any bytes without a
// panic, and what decodes encodes to bytes that decode to the same event
// (a varint may be spelled longer than EncodeEvent spells it).
func FuzzDecodeEvent(f *testing.F) {
	for _, ev := range events(f, feedState(f)) {
		f.Add(EncodeEvent(ev))
	}
	f.Add([]byte{})
	f.Add([]byte{eventVersion, 1, byte(EventResolved), byte(ResolvedExpired), 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeEvent(b)
		if err != nil {
			if !sentinel(err) {
				t.Fatalf("decode error %v wraps no sentinel", err)
			}
			return
		}
		again, err := DecodeEvent(EncodeEvent(ev))
		if err != nil || *again != *ev {
			t.Fatalf("event %+v re-encodes to %+v (%v)", ev, again, err)
		}
	})
}

func FuzzRestore(f *testing.F) {
	for _, snap := range seedSnapshots(f) {
		f.Add(snap)
		f.Add(snap[:len(snap)-1])
		f.Add(snap[:len(snap)/2])
		f.Add(snap[:len(snapshotMagic)+1])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := fuzzState(t).m
		before := m.Digest()
		if err := m.Restore(bytes.NewReader(b)); err != nil {
			if !sentinel(err) {
				t.Fatalf("restore error %v wraps no sentinel", err)
			}
			if m.Digest() != before || m.Len() != 2 {
				t.Fatalf("refused snapshot changed the state: %v", err)
			}
			return
		}
		if r := restored(t, snapshotBytes(t, m)); r.Digest() != m.Digest() {
			t.Fatal("accepted snapshot does not round-trip")
		}
	})
}

func TestRestoreRefusesEveryTruncation(t *testing.T) {
	snap := snapshotBytes(t, fuzzState(t).m)
	for n := range len(snap) {
		mustRefuse(t, snap[:n], "truncated to %d of %d bytes", n, len(snap))
	}
	mustRefuse(t, append(append([]byte(nil), snap...), 0), "one trailing byte")
}

func TestRestoreRefusesEveryFlippedByte(t *testing.T) {
	snap := snapshotBytes(t, fuzzState(t).m)
	for i := range snap {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			bad := append([]byte(nil), snap...)
			bad[i] ^= mask
			mustRefuse(t, bad, "byte %d xor %#x", i, mask)
		}
	}
}

// mustRefuse restores b over a non-empty state and requires a sentinel
// error and the state untouched.
func mustRefuse(t *testing.T, b []byte, format string, args ...any) {
	t.Helper()
	h := fuzzState(t)
	before := h.m.Digest()
	_, _, ch := h.m.GetWatch(rk("b"))
	err := h.m.Restore(bytes.NewReader(b))
	if err == nil || !sentinel(err) {
		t.Fatalf("%s: restore returned %v, want a decoding error", fmt.Sprintf(format, args...), err)
	}
	if h.m.Digest() != before || isClosed(ch) {
		t.Fatalf("%s: refused snapshot changed the state or woke waiters", fmt.Sprintf(format, args...))
	}
}

// craftSnapshot writes records as given, in the given order, in the current
// format with a valid sum and checksum, so that only the record-level
// checks can refuse it.
func craftSnapshot(now int64, recs ...*Record) []byte {
	return craftSnapshotVersion(snapshotVersionNoFeed, now, recs...)
}

// craftSnapshotVersion is craftSnapshot with the format version given.
func craftSnapshotVersion(version uint64, now int64, recs ...*Record) []byte {
	var e encoder
	e.buf = append(e.buf, snapshotMagic...)
	e.uvarint(version)
	e.varint(now)
	e.uvarint(0) // applied index
	if version >= snapshotVersionNoFeed {
		e.uvarint(0) // term
	}
	e.uvarint(uint64(len(recs)))
	var sum Sum
	for _, r := range recs {
		enc := EncodeRecord(r)
		sum.add(recordHash(enc))
		e.bytes(enc)
	}
	if version >= snapshotVersionNoFeed {
		e.buf = append(e.buf, sum[:]...)
	}
	return binary.BigEndian.AppendUint32(e.buf, crc32.Checksum(e.buf, crcTable))
}

func TestRestoreRefusesInvalidRecords(t *testing.T) {
	a, b := base(), rec(func(r *Record) { r.Key = "l" })
	if got, want := craftSnapshot(at(0), a, b), snapshotBytes(t, restored(t, craftSnapshot(at(0), a, b))); !bytes.Equal(got, want) {
		t.Fatal("craftSnapshot does not write the snapshot format")
	}
	// a's key again, expiring later: in expiry order, so in format 2 only
	// the check for a key stored twice can refuse it.
	aLater := rec(func(r *Record) { r.ExpiresAt++ })
	// Expiring first but with the larger key: in order for format 2 only.
	bFirst := rec(func(r *Record) { r.Key = "l"; r.ExpiresAt-- })
	bigLen := append([]byte(snapshotMagic), snapshotVersionNoFeed, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f)
	wrongSum := craftSnapshot(at(0), a, b)
	wrongSum[len(wrongSum)-5] ^= 1 // the sum's last byte, checksum recomputed
	wrongSum = binary.BigEndian.AppendUint32(wrongSum[:len(wrongSum)-4], crc32.Checksum(wrongSum[:len(wrongSum)-4], crcTable))
	v2 := uint64(snapshotVersionExpiryOrder)
	cases := map[string][]byte{
		"out of order":                         craftSnapshot(at(0), b, a),
		"duplicate key":                        craftSnapshot(at(0), a, a),
		"sum does not match":                   wrongSum,
		"format 2 out of expiry order":         craftSnapshotVersion(v2, at(0), a, bFirst),
		"format 2 duplicate key":               craftSnapshotVersion(v2, at(0), a, a),
		"format 2 duplicate key, two expiries": craftSnapshotVersion(v2, at(0), a, aLater),
		"format 1 out of key order":            craftSnapshotVersion(snapshotVersionKeyOrder, at(0), bFirst, a),
		"format 1 duplicate key":               craftSnapshotVersion(snapshotVersionKeyOrder, at(0), a, a),
		"state unknown":                        craftSnapshot(at(0), rec(func(r *Record) { r.State = StateUnknown })),
		"state past the end":                   craftSnapshot(at(0), rec(func(r *Record) { r.State = 3 })),
		"record too large":                     bigLen,
		"version 5":                            craftSnapshotVersion(SnapshotVersion+1, at(0), a),
	}
	for name, snap := range cases {
		mustRefuse(t, snap, "%s", name)
	}
}

// TestRestoreReadsOlderFormats: snapshots of the in-memory releases, format
// 1 (records in key order) and 2 (in expiry order), restore to the state
// format 3 holds.
func TestRestoreReadsOlderFormats(t *testing.T) {
	a := base()
	bFirst := rec(func(r *Record) { r.Key = "l"; r.ExpiresAt-- })
	cur := restored(t, craftSnapshot(at(0), a, bFirst))
	for name, snap := range map[string][]byte{
		"format 1": craftSnapshotVersion(snapshotVersionKeyOrder, at(0), a, bFirst),
		"format 2": craftSnapshotVersion(snapshotVersionExpiryOrder, at(0), bFirst, a),
	} {
		old := restored(t, snap)
		if old.Digest() != cur.Digest() || old.Len() != 2 {
			t.Fatalf("%s restored %d records, digest %s; format 3 gives %s", name, old.Len(), old.Digest(), cur.Digest())
		}
		for _, k := range []RecordKey{a.RecordKey, bFirst.RecordKey} {
			if _, ok := old.Get(k); !ok {
				t.Fatalf("%s restore lost %v", name, k)
			}
		}
	}
}
