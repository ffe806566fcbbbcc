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
}

// metaVersion is the first byte of an encoded Meta.
const metaVersion = 1

// MarshalBinary encodes m for a store.
func (m Meta) MarshalBinary() ([]byte, error) {
	e := encoder{buf: make([]byte, 0, 64+len(m.Sum)+len(m.Config))}
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
	if err := d.finish(); err != nil {
		return fmt.Errorf("decode store metadata: %w", err)
	}
	*m = out
	return nil
}
