package fsm

import (
	"fmt"
)

// Meta is what a store keeps beside the records, written by every Commit:
// how far the log was applied, FSM time, the counts and the running digest
// of the records, and the Raft configuration as of the applied index.
// Everything in it is derived from the log, so every replica that applied
// the same log holds the same Meta (the configuration included).
type Meta struct {
	// Applied and Term are the index and term of the last log entry applied.
	Applied uint64
	Term    uint64
	// Now is FSM time in Unix nanoseconds.
	Now int64
	// Records counts the stored records, Pending those that are PENDING.
	Records uint64
	Pending uint64
	// Sum is the multiset hash of the records (digest.go).
	Sum Sum
	// StreamBytes is what the records take in a snapshot stream (each
	// record's length prefix and encoding), so a stream's size is known
	// before it is written.
	StreamBytes uint64
	// ConfigIndex is the log index of Config, the encoded Raft
	// configuration (raft.EncodeConfiguration) last applied; empty before
	// the first.
	ConfigIndex uint64
	Config      []byte
	// Feed is the state of the abandoned feed (abandon.go).
	Feed FeedMeta
	// Cluster is the cluster's identity (identity.go); nil before the
	// first Identify is applied.
	Cluster []byte
}

// FeedMeta is the abandoned feed's part of the metadata. A state that
// never had an event holds the zero value, and its Meta encodes exactly as
// before the feed existed.
type FeedMeta struct {
	// Seq is the number of the last event; PrunedThrough the highest number
	// pruned: every event up to it is gone, every later one is kept.
	Seq, PrunedThrough uint64
	// Events counts the stored events; StreamBytes is what they take in a
	// snapshot stream.
	Events, StreamBytes uint64
	// Abandoned counts the records abandoned now; Total every record ever
	// marked abandoned.
	Abandoned, Total uint64
}

// metaVersion is the first byte of an encoded Meta.
const metaVersion = 1

// Optional fields follow the configuration, each after its tag, in the
// order of their tags, and only when set, so a Meta without them encodes
// exactly as before they existed: the feed's fields once the feed had an
// event, the cluster's identity once it has one.
const (
	metaFieldFeed    = 1
	metaFieldCluster = 2
)

// MarshalBinary encodes m for a store.
func (m Meta) MarshalBinary() ([]byte, error) {
	e := encoder{buf: make([]byte, 0, 64+len(m.Sum)+len(m.Config)+len(m.Cluster))}
	e.byte1(metaVersion)
	e.uvarint(m.Applied)
	e.uvarint(m.Term)
	e.varint(m.Now)
	e.uvarint(m.Records)
	e.uvarint(m.Pending)
	e.buf = append(e.buf, m.Sum[:]...)
	e.uvarint(m.StreamBytes)
	e.uvarint(m.ConfigIndex)
	e.bytes(m.Config)
	if m.Feed != (FeedMeta{}) {
		e.byte1(metaFieldFeed)
		f := m.Feed
		for _, v := range [...]uint64{f.Seq, f.PrunedThrough, f.Events, f.StreamBytes, f.Abandoned, f.Total} {
			e.uvarint(v)
		}
	}
	if len(m.Cluster) > 0 {
		e.byte1(metaFieldCluster)
		e.bytes(m.Cluster)
	}
	return e.buf, nil
}

// UnmarshalBinary decodes what MarshalBinary wrote.
func (m *Meta) UnmarshalBinary(b []byte) error {
	d := decoder{buf: b}
	if v := d.byte1(); d.err == nil && v != metaVersion {
		return fmt.Errorf("%w: store metadata version %d", ErrMalformed, v)
	}
	var out Meta
	out.Applied, out.Term, out.Now = d.uvarint(), d.uvarint(), d.varint()
	out.Records, out.Pending = d.uvarint(), d.uvarint()
	if len(d.buf) < len(out.Sum) {
		d.fail(ErrTruncated)
	} else {
		copy(out.Sum[:], d.buf)
		d.buf = d.buf[len(out.Sum):]
	}
	out.StreamBytes, out.ConfigIndex = d.uvarint(), d.uvarint()
	out.Config = d.bytes()
	for last := 0; len(d.buf) > 0 && d.err == nil; {
		tag := int(d.byte1())
		if tag <= last {
			d.fail(fmt.Errorf("%w: store metadata field %d after %d", ErrMalformed, tag, last))
			break
		}
		switch last = tag; tag {
		case metaFieldFeed:
			f := &out.Feed
			for _, v := range [...]*uint64{&f.Seq, &f.PrunedThrough, &f.Events, &f.StreamBytes, &f.Abandoned, &f.Total} {
				*v = d.uvarint()
			}
		case metaFieldCluster:
			if out.Cluster = d.bytes(); d.err == nil && (len(out.Cluster) == 0 || len(out.Cluster) > MaxClusterID) {
				d.fail(fmt.Errorf("%w: cluster identity of %d bytes", ErrMalformed, len(out.Cluster)))
			}
		default:
			d.fail(fmt.Errorf("%w: store metadata field %d", ErrMalformed, tag))
		}
	}
	if err := d.finish(); err != nil {
		return fmt.Errorf("decode store metadata: %w", err)
	}
	*m = out
	return nil
}
