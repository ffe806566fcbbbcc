package fsm

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

// snapshotMagic opens every snapshot stream; the version follows it.
// Version 2 orders records as the expiry index does, by expiry time then
// key; version 1, still read, ordered them by key.
const (
	snapshotMagic   = "IDEMSNAP"
	snapshotVersion = 2
	// snapshotVersionKeyOrder is the format from before the key tree was
	// ordered by hash; its records come in key order.
	snapshotVersionKeyOrder = 1
	// maxSnapshotRecord bounds one encoded record (a 1 MiB body plus headers
	// and keys fit easily), so a corrupt length cannot allocate gigabytes.
	maxSnapshotRecord = 8 << 20
)

// WriteSnapshot streams the state: a header (magic, version, FSM time,
// applied index, record count), each record length-prefixed in the expiry
// index's order (expiry time, then key), then a CRC-32C of everything
// before it. That order, not the former key tree's hash order, because records
// are created in time order: the walk reads memory mostly in the order it
// was allocated, and a restore appends to the expiry index instead of
// searching it (at 1 M records, hash order took 4 s longer).
func (s *state) writeSnapshot(w io.Writer) error {
	crc := crc32.New(crcTable)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 64<<10)
	e := encoder{buf: make([]byte, 0, 4096)}
	e.buf = append(e.buf, snapshotMagic...)
	e.uvarint(snapshotVersion)
	e.varint(s.now)
	e.uvarint(s.applied)
	e.uvarint(uint64(s.len()))
	if _, err := bw.Write(e.buf); err != nil {
		return fmt.Errorf("write snapshot header: %w", err)
	}
	var werr error
	var rec encoder
	s.expiry.Ascend(func(item expiring) bool {
		rec.buf = rec.buf[:0]
		rec.record(item.rec)
		e.buf = binary.AppendUvarint(e.buf[:0], uint64(len(rec.buf)))
		if _, werr = bw.Write(e.buf); werr == nil {
			_, werr = bw.Write(rec.buf)
		}
		return werr == nil
	})
	if werr != nil {
		return fmt.Errorf("write snapshot record: %w", werr)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("flush snapshot: %w", err)
	}
	if _, err := w.Write(crc.Sum(nil)); err != nil {
		return fmt.Errorf("write snapshot checksum: %w", err)
	}
	return nil
}

// readSnapshot builds a fresh state from a stream written by writeSnapshot.
// Any defect (truncation, bad checksum, unsorted or duplicate keys) is an
// error, never a panic and never a partial state.
func readSnapshot(r io.Reader) (*state, error) {
	crc := crc32.New(crcTable)
	br := bufio.NewReaderSize(r, 64<<10)
	tee := &hashingReader{r: br, h: crc}
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(tee, magic); err != nil || string(magic) != snapshotMagic {
		return nil, fmt.Errorf("%w: not an idemnode snapshot", ErrMalformed)
	}
	version, err := binary.ReadUvarint(tee)
	if err != nil || (version != snapshotVersion && version != snapshotVersionKeyOrder) {
		return nil, fmt.Errorf("%w: snapshot version %d (err %v)", ErrMalformed, version, err)
	}
	inOrder := func(prev, next *Record) bool {
		return lessExpiring(expiring{at: prev.ExpiresAt, rec: prev}, expiring{at: next.ExpiresAt, rec: next})
	}
	if version == snapshotVersionKeyOrder {
		inOrder = func(prev, next *Record) bool { return prev.RecordKey.compare(next.RecordKey) < 0 }
	}
	now, err := binary.ReadVarint(tee)
	if err != nil {
		return nil, fmt.Errorf("read snapshot time: %w", ErrTruncated)
	}
	applied, err := binary.ReadUvarint(tee)
	if err != nil {
		return nil, fmt.Errorf("read snapshot applied index: %w", ErrTruncated)
	}
	count, err := binary.ReadUvarint(tee)
	if err != nil {
		return nil, fmt.Errorf("read snapshot count: %w", ErrTruncated)
	}
	// count is not trusted until the checksum is: it only caps how much
	// is reserved up front.
	recs := make([]*Record, 0, min(count, 1<<16))
	var buf []byte
	for i := uint64(0); i < count; i++ {
		rec, err := readRecord(tee, &buf)
		if err != nil {
			return nil, fmt.Errorf("snapshot record %d of %d: %w", i, count, err)
		}
		if i > 0 && !inOrder(recs[i-1], rec) {
			return nil, fmt.Errorf("%w: snapshot records out of order at %d", ErrMalformed, i)
		}
		recs = append(recs, rec)
	}
	want := crc.Sum(nil)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(br, got); err != nil {
		return nil, fmt.Errorf("read snapshot checksum: %w", ErrTruncated)
	}
	if string(got) != string(want) {
		return nil, ErrChecksum
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("%w: bytes after snapshot checksum", ErrMalformed)
	}
	s := newState()
	s.now, s.applied = now, applied
	if err := s.load(recs); err != nil {
		return nil, err
	}
	return s, nil
}

func readRecord(r *hashingReader, buf *[]byte) (*Record, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, ErrTruncated
	}
	if n > maxSnapshotRecord {
		return nil, fmt.Errorf("%w: record of %d bytes", ErrMalformed, n)
	}
	if uint64(cap(*buf)) < n {
		*buf = make([]byte, n)
	}
	b := (*buf)[:n]
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, ErrTruncated
	}
	d := decoder{buf: b}
	rec := d.record()
	if err := d.finish(); err != nil {
		return nil, err
	}
	return rec, nil
}

// hashingReader feeds every byte it reads to h; it is a ByteReader so the
// varint helpers can use it.
type hashingReader struct {
	r *bufio.Reader
	h hash.Hash32
}

func (t *hashingReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.h.Write(p[:n])
	return n, err
}

func (t *hashingReader) ReadByte() (byte, error) {
	b, err := t.r.ReadByte()
	if err == nil {
		t.h.Write([]byte{b})
	}
	return b, err
}

// digest is a SHA-256 over FSM time and every record in the snapshot's
// order. Two nodes that applied the same log have the same digest.
func (s *state) digest() string {
	h := sha256.New()
	var e encoder
	e.varint(s.now)
	e.uvarint(uint64(s.len()))
	h.Write(e.buf)
	s.expiry.Ascend(func(item expiring) bool {
		e.buf = e.buf[:0]
		e.record(item.rec)
		h.Write(e.buf)
		return true
	})
	return hex.EncodeToString(h.Sum(nil))
}

// Digest returns the state digest (hex SHA-256) as of the last applied command.
func (m *Machine) Digest() string { return m.view().digest() }

// DigestAt returns the applied index and the digest of the state at that
// index, taken from one consistent view.
func (m *Machine) DigestAt() (uint64, string) {
	v := m.view()
	return v.applied, v.digest()
}

// Backup writes the current state to w in the snapshot format and returns
// the applied index and digest of exactly that state.
func (m *Machine) Backup(w io.Writer) (applied uint64, digest string, records int, err error) {
	v := m.view()
	if err := v.writeSnapshot(w); err != nil {
		return 0, "", 0, err
	}
	return v.applied, v.digest(), v.len(), nil
}

// WriteSnapshot writes the current state to w in the snapshot format.
func (m *Machine) WriteSnapshot(w io.Writer) error { return m.view().writeSnapshot(w) }

// Restore replaces the whole state with the snapshot read from r. On error
// the state is unchanged.
func (m *Machine) Restore(r io.Reader) error {
	s, err := readSnapshot(r)
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	m.swap(s)
	return nil
}
