package fsm

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

// Snapshot streams carry a store's records to a follower (InstallSnapshot)
// or a backup file. Version 3, what WriteSnapshot writes:
//
//	"IDEMSNAP" uvarint(3) varint(now) uvarint(applied) uvarint(term) uvarint(count)
//	count × (uvarint(len) record)       records in key order (AppendKey)
//	Sum (32 bytes)                      the records' multiset hash
//	CRC-32C (4 bytes, big-endian)       of every byte before it
//
// A record is EncodeRecord's bytes, which is also what a store keeps, so a
// view streams its values as they are. Key order is the store's own order,
// so writing and reading walk the store sequentially. The reader checks the
// order (no key twice), every record, the Sum and the CRC; nothing reaches
// the store being built unchecked, and a defect aborts the build.
//
// Version 4 is version 3 with the abandoned feed (abandon.go): after the
// count, uvarint(seq) uvarint(pruned through) uvarint(total abandoned)
// uvarint(event count), and after the records the events, length-prefixed
// in order of number, before the Sum (which covers them). A state that
// never had an event is written as version 3 (which releases before the
// feed read, as long as no record in it watches for abandonment).
//
// Version 5 is version 4 with the cluster's identity (identity.go) after
// the feed's fields: uvarint(len) identity. Only a state with an identity
// is written as version 5, and a cluster has one only once every voter
// reads it; a state without one is written as version 3 or 4, as before.
//
// Versions 1 (records in key order) and 2 (records in (expires_at, key)
// order, what the in-memory releases wrote) are still read, so a backup of
// those releases restores and their data dirs migrate.
const (
	snapshotMagic = "IDEMSNAP"
	// SnapshotVersion is the newest stream format WriteSnapshot writes.
	SnapshotVersion = 5
	// snapshotVersionFeed is the format of a state with events and no
	// cluster identity.
	snapshotVersionFeed = 4
	// snapshotVersionNoFeed is the format of a state without either.
	snapshotVersionNoFeed = 3
	// snapshotVersionExpiryOrder is the in-memory releases' format.
	snapshotVersionExpiryOrder = 2
	// snapshotVersionKeyOrder is the format before that.
	snapshotVersionKeyOrder = 1
	// maxSnapshotRecord bounds one encoded record (a 1 MiB body plus headers
	// and keys fit easily), so a corrupt length cannot allocate gigabytes.
	maxSnapshotRecord = 8 << 20
)

// snapshotVersionOf is the version a stream of m is written in.
func snapshotVersionOf(m Meta) int {
	switch {
	case len(m.Cluster) > 0:
		return SnapshotVersion
	case m.Feed == (FeedMeta{}):
		return snapshotVersionNoFeed
	}
	return snapshotVersionFeed
}

// snapshotHeader returns the header of a stream of m.
func snapshotHeader(m Meta) []byte {
	e := encoder{buf: make([]byte, 0, 96+len(m.Cluster))}
	e.buf = append(e.buf, snapshotMagic...)
	version := snapshotVersionOf(m)
	e.uvarint(uint64(version))
	e.varint(m.Now)
	e.uvarint(m.Applied)
	e.uvarint(m.Term)
	e.uvarint(m.Records)
	if version >= snapshotVersionFeed {
		e.uvarint(m.Feed.Seq)
		e.uvarint(m.Feed.PrunedThrough)
		e.uvarint(m.Feed.Total)
		e.uvarint(m.Feed.Events)
	}
	if version >= SnapshotVersion {
		e.bytes(m.Cluster)
	}
	return e.buf
}

// SnapshotSize is the exact size of the stream WriteSnapshot writes of a
// view with metadata m, known before a byte is written (Raft sends it
// ahead of an InstallSnapshot stream).
func SnapshotSize(m Meta) int64 {
	return int64(len(snapshotHeader(m))) + int64(m.StreamBytes) + int64(m.Feed.StreamBytes) + int64(len(m.Sum)) + crc32.Size
}

// WriteSnapshot streams v in the current format.
func WriteSnapshot(w io.Writer, v View) error {
	m := v.Meta()
	crc := crc32.New(crcTable)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 256<<10)
	if _, err := bw.Write(snapshotHeader(m)); err != nil {
		return fmt.Errorf("write snapshot header: %w", err)
	}
	count, err := writeLengthPrefixed(bw, v.Records)
	if err != nil {
		return fmt.Errorf("write snapshot record: %w", err)
	}
	if count != m.Records {
		return fmt.Errorf("write snapshot: the store holds %d records, its metadata says %d", count, m.Records)
	}
	if snapshotVersionOf(m) >= snapshotVersionFeed {
		count, err := writeLengthPrefixed(bw, v.Events)
		if err != nil {
			return fmt.Errorf("write snapshot event: %w", err)
		}
		if count != m.Feed.Events {
			return fmt.Errorf("write snapshot: the store holds %d events, its metadata says %d", count, m.Feed.Events)
		}
	}
	if _, err := bw.Write(m.Sum[:]); err != nil {
		return fmt.Errorf("write snapshot sum: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("flush snapshot: %w", err)
	}
	if _, err := w.Write(crc.Sum(nil)); err != nil {
		return fmt.Errorf("write snapshot checksum: %w", err)
	}
	return nil
}

// writeLengthPrefixed writes every item walk gives, each after its length,
// and counts them.
func writeLengthPrefixed(w io.Writer, walk func(func([]byte) error) error) (uint64, error) {
	var count uint64
	var prefix [binary.MaxVarintLen64]byte
	err := walk(func(enc []byte) error {
		count++
		if _, err := w.Write(prefix[:binary.PutUvarint(prefix[:], uint64(len(enc)))]); err != nil {
			return err
		}
		_, err := w.Write(enc)
		return err
	})
	return count, err
}

// SnapshotInfo describes a stream ReadSnapshot read.
type SnapshotInfo struct {
	// Meta is the metadata of the store built (as Finish was given it).
	Meta Meta
	// Version is the stream's format version.
	Version int
	// LegacyDigest is, for a version 2 stream, the digest the release
	// that wrote it showed (digest version 1), so a backup taken before the
	// upgrade can be compared with what that release reported.
	LegacyDigest string
}

// ReadSnapshot reads a stream into b and finishes it. base gives what the
// stream does not carry: the Raft configuration, and the term for version
// 1 and 2 streams. The cluster identity is the stream's, unless base names
// one: a restored backup seeds a new cluster (cluster.RestoreBackup). Any defect (truncation, a bad checksum or Sum, records
// out of order or twice) is an error, never a panic; the caller aborts b.
func ReadSnapshot(r io.Reader, b Builder, base Meta) (SnapshotInfo, error) {
	crc := crc32.New(crcTable)
	br := bufio.NewReaderSize(r, 256<<10)
	tee := &hashingReader{r: br, h: crc}
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(tee, magic); err != nil || string(magic) != snapshotMagic {
		return SnapshotInfo{}, fmt.Errorf("%w: not an idemnode snapshot", ErrMalformed)
	}
	version, err := binary.ReadUvarint(tee)
	if err != nil || version < snapshotVersionKeyOrder || version > SnapshotVersion {
		return SnapshotInfo{}, fmt.Errorf("%w: snapshot version %d (err %v)", ErrMalformed, version, err)
	}
	hdr, err := readHeader(tee, int(version))
	if err != nil {
		return SnapshotInfo{}, err
	}
	meta := Meta{Applied: hdr.applied, Term: base.Term, Now: hdr.now, ConfigIndex: base.ConfigIndex, Config: base.Config}
	if version >= snapshotVersionNoFeed {
		meta.Term = hdr.term
	}
	meta.Feed = FeedMeta{Seq: hdr.feed.Seq, PrunedThrough: hdr.feed.PrunedThrough, Total: hdr.feed.Total}
	meta.Cluster = hdr.cluster
	if len(base.Cluster) > 0 {
		meta.Cluster = base.Cluster
	}
	if meta.ConfigIndex == 0 && len(meta.Config) > 0 {
		meta.ConfigIndex = meta.Applied // a configuration given without an index holds as of the snapshot
	}
	ld := newLoad(b, int(version), hdr)
	if err := ld.records(tee, hdr.count, &meta); err != nil {
		return SnapshotInfo{}, err
	}
	if err := ld.events(tee, hdr.feed, &meta); err != nil {
		return SnapshotInfo{}, err
	}
	if version >= snapshotVersionNoFeed {
		var sum Sum
		if _, err := io.ReadFull(tee, sum[:]); err != nil {
			return SnapshotInfo{}, fmt.Errorf("read snapshot sum: %w", ErrTruncated)
		}
		if sum != meta.Sum {
			return SnapshotInfo{}, fmt.Errorf("%w: the records do not add up to the snapshot's sum", ErrChecksum)
		}
	}
	want := crc.Sum(nil)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(br, got); err != nil {
		return SnapshotInfo{}, fmt.Errorf("read snapshot checksum: %w", ErrTruncated)
	}
	if !bytes.Equal(got, want) {
		return SnapshotInfo{}, ErrChecksum
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return SnapshotInfo{}, fmt.Errorf("%w: bytes after snapshot checksum", ErrMalformed)
	}
	if err := b.Finish(meta, ld.usage); err != nil {
		return SnapshotInfo{}, fmt.Errorf("finish restored store: %w", err)
	}
	info := SnapshotInfo{Meta: meta, Version: int(version)}
	if ld.legacy != nil {
		info.LegacyDigest = hex.EncodeToString(ld.legacy.Sum(nil))
	}
	return info, nil
}

type snapshotHeaderFields struct {
	now                  int64
	applied, term, count uint64
	// feed holds, of a version 4 or 5 stream, the feed's numbering, the
	// abandoned total and (in Events) the event count.
	feed FeedMeta
	// cluster is a version 5 stream's cluster identity.
	cluster []byte
}

func readHeader(r *hashingReader, version int) (snapshotHeaderFields, error) {
	var h snapshotHeaderFields
	var err error
	if h.now, err = binary.ReadVarint(r); err != nil {
		return h, fmt.Errorf("read snapshot time: %w", ErrTruncated)
	}
	if h.applied, err = binary.ReadUvarint(r); err != nil {
		return h, fmt.Errorf("read snapshot applied index: %w", ErrTruncated)
	}
	if version >= snapshotVersionNoFeed {
		if h.term, err = binary.ReadUvarint(r); err != nil {
			return h, fmt.Errorf("read snapshot term: %w", ErrTruncated)
		}
	}
	if h.count, err = binary.ReadUvarint(r); err != nil {
		return h, fmt.Errorf("read snapshot count: %w", ErrTruncated)
	}
	if version < snapshotVersionFeed {
		return h, nil
	}
	for _, v := range [...]*uint64{&h.feed.Seq, &h.feed.PrunedThrough, &h.feed.Total, &h.feed.Events} {
		if *v, err = binary.ReadUvarint(r); err != nil {
			return h, fmt.Errorf("read snapshot feed: %w", ErrTruncated)
		}
	}
	// Pruning goes oldest first, so the events kept are every event after
	// PrunedThrough.
	if h.feed.PrunedThrough > h.feed.Seq || h.feed.Events != h.feed.Seq-h.feed.PrunedThrough {
		return h, fmt.Errorf("%w: snapshot feed: %d events after %d up to %d", ErrMalformed, h.feed.Events, h.feed.PrunedThrough, h.feed.Seq)
	}
	if version < SnapshotVersion {
		return h, nil
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return h, fmt.Errorf("read snapshot cluster identity: %w", ErrTruncated)
	}
	if n == 0 || n > MaxClusterID {
		return h, fmt.Errorf("%w: snapshot cluster identity of %d bytes", ErrMalformed, n)
	}
	h.cluster = make([]byte, n)
	if _, err := io.ReadFull(r, h.cluster); err != nil {
		return h, fmt.Errorf("read snapshot cluster identity: %w", ErrTruncated)
	}
	return h, nil
}

// load feeds a stream's records to a builder, checking their order and
// counting what the store's metadata and usage hold.
type load struct {
	b       Builder
	version int
	usage   map[string]Usage
	// legacy hashes a version 2 stream as the old digest did.
	legacy  hash.Hash
	prevKey []byte
	prev    *Record
	// marks maps the events that mark records abandoned to their records,
	// until events finds each.
	marks map[uint64]RecordKey
}

func newLoad(b Builder, version int, hdr snapshotHeaderFields) *load {
	ld := &load{b: b, version: version, usage: map[string]Usage{}, marks: map[uint64]RecordKey{}}
	if version == snapshotVersionExpiryOrder {
		ld.legacy = sha256.New()
		var e encoder
		e.varint(hdr.now)
		e.uvarint(hdr.count)
		ld.legacy.Write(e.buf)
	}
	return ld
}

func (ld *load) records(r *hashingReader, count uint64, meta *Meta) error {
	var buf []byte
	for i := uint64(0); i < count; i++ {
		enc, rec, err := readRecord(r, &buf)
		if err != nil {
			return fmt.Errorf("snapshot record %d of %d: %w", i, count, err)
		}
		key := EncodeKey(rec.RecordKey)
		if err := ld.check(i, key, rec); err != nil {
			return err
		}
		if err := ld.b.Put(key, enc, rec.dueAt()); err != nil {
			return fmt.Errorf("store snapshot record %d: %w", i, err)
		}
		meta.account(rec, enc, 1)
		if rec.Abandoned != 0 {
			ld.marks[rec.Abandoned] = rec.RecordKey
		}
		u, c := ld.usage[rec.Tenant], cost(rec)
		u.Keys += c.Keys
		u.Bytes += c.Bytes
		ld.usage[rec.Tenant] = u
		if ld.legacy != nil {
			ld.legacy.Write(enc)
		}
		ld.prevKey, ld.prev = key, rec
	}
	return nil
}

// events feeds a version 4 stream's events to the builder, checking that
// they are in order of number, after the pruned ones and up to the last.
func (ld *load) events(r *hashingReader, feed FeedMeta, meta *Meta) error {
	var buf []byte
	prev := feed.PrunedThrough
	for i := uint64(0); i < feed.Events; i++ {
		enc, err := readItem(r, &buf)
		if err != nil {
			return fmt.Errorf("snapshot event %d of %d: %w", i, feed.Events, err)
		}
		ev, err := DecodeEvent(enc)
		if err != nil {
			return fmt.Errorf("snapshot event %d of %d: %w", i, feed.Events, err)
		}
		if ev.Seq != prev+1 {
			return fmt.Errorf("%w: snapshot event %d numbered %d after %d", ErrMalformed, i, ev.Seq, prev)
		}
		if k, marked := ld.marks[ev.Seq]; marked {
			if ev.Kind != EventAbandoned || k != ev.RecordKey {
				return fmt.Errorf("%w: record %q is marked by event %d, which is not its abandonment", ErrMalformed, k.Key, ev.Seq)
			}
			delete(ld.marks, ev.Seq)
		}
		if err := ld.b.PutEvent(ev.Seq, enc); err != nil {
			return fmt.Errorf("store snapshot event %d: %w", i, err)
		}
		meta.accountEvent(enc, 1)
		prev = ev.Seq
	}
	for seq, k := range ld.marks {
		return fmt.Errorf("%w: record %q is marked by event %d, which the stream does not hold", ErrMalformed, k.Key, seq)
	}
	return nil
}

// check refuses a record out of the stream's order; in a version 2 stream,
// ordered by expiry, a key given twice is found by asking the builder.
func (ld *load) check(i uint64, key []byte, rec *Record) error {
	if i == 0 && ld.version != snapshotVersionExpiryOrder {
		return nil
	}
	if ld.version != snapshotVersionExpiryOrder {
		if bytes.Compare(ld.prevKey, key) >= 0 {
			return fmt.Errorf("%w: snapshot records out of order at %d", ErrMalformed, i)
		}
		return nil
	}
	if i > 0 && !lessExpiry(ld.prev, rec) {
		return fmt.Errorf("%w: snapshot records out of order at %d", ErrMalformed, i)
	}
	dup, err := ld.b.Has(key)
	if err != nil {
		return fmt.Errorf("snapshot record %d: %w", i, err)
	}
	if dup {
		return fmt.Errorf("%w: key %q/%q/%q stored twice", ErrMalformed, rec.Tenant, rec.Scope, rec.Key)
	}
	return nil
}

// readItem reads one length-prefixed record or event; it aliases *buf.
func readItem(r *hashingReader, buf *[]byte) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, ErrTruncated
	}
	if n > maxSnapshotRecord {
		return nil, fmt.Errorf("%w: item of %d bytes", ErrMalformed, n)
	}
	if uint64(cap(*buf)) < n {
		*buf = make([]byte, n)
	}
	b := (*buf)[:n]
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, ErrTruncated
	}
	return b, nil
}

// readRecord reads one length-prefixed record; enc aliases *buf.
func readRecord(r *hashingReader, buf *[]byte) ([]byte, *Record, error) {
	b, err := readItem(r, buf)
	if err != nil {
		return nil, nil, err
	}
	rec, err := DecodeRecord(b)
	if err != nil {
		return nil, nil, err
	}
	return b, rec, nil
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

// Backup writes the current state to w in the snapshot format and returns
// the metadata of exactly the state written.
func (m *Machine) Backup(w io.Writer) (Meta, error) {
	v, err := m.View()
	if err != nil {
		return Meta{}, fmt.Errorf("open a view: %w", err)
	}
	defer v.Close()
	if err := WriteSnapshot(w, v); err != nil {
		return Meta{}, err
	}
	return v.Meta(), nil
}

// WriteSnapshot writes the current state to w in the snapshot format.
func (m *Machine) WriteSnapshot(w io.Writer) error {
	_, err := m.Backup(w)
	return err
}

// Restore replaces the whole state with the snapshot read from r, built in
// a fresh store. The Raft configuration and term the stream lacks are
// kept from the current state; the cluster identity is the stream's. On
// error the state is unchanged.
func (m *Machine) Restore(r io.Reader) error {
	base := m.Meta()
	base.Cluster = nil
	_, err := m.RestoreWith(r, base)
	return err
}

// RestoreWith is Restore with the configuration and term (for version 1
// and 2 streams) taken from base.
func (m *Machine) RestoreWith(r io.Reader, base Meta) (SnapshotInfo, error) {
	b, err := m.NewBuilder()
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("restore snapshot: %w", err)
	}
	info, err := ReadSnapshot(r, b, base)
	if err != nil {
		b.Abort()
		return SnapshotInfo{}, fmt.Errorf("restore snapshot: %w", err)
	}
	return info, m.Install(b)
}

// Digest of a Meta, for callers holding one (a backup's).
func (m Meta) Digest() string { return m.digest() }
