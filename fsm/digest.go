package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/bits"
)

// Sum is a multiset hash of the stored records and events: the sum, modulo
// 2^256, of the SHA-256 of every record's encoding (and of every event's,
// tagged apart, eventHash). Storing a record adds its hash,
// deleting one subtracts it, so the Machine keeps the sum on every apply in
// O(1) and the digest costs nothing to read at any size. Sums are equal when
// the records are equal, and a replica holding one record different holds a
// different sum unless SHA-256 collides.
type Sum [32]byte

func (s *Sum) add(h [32]byte) {
	var carry uint64
	for i := 0; i < 32; i += 8 {
		var v uint64
		v, carry = bits.Add64(binary.LittleEndian.Uint64(s[i:]), binary.LittleEndian.Uint64(h[i:]), carry)
		binary.LittleEndian.PutUint64(s[i:], v)
	}
}

func (s *Sum) sub(h [32]byte) {
	var borrow uint64
	for i := 0; i < 32; i += 8 {
		var v uint64
		v, borrow = bits.Sub64(binary.LittleEndian.Uint64(s[i:]), binary.LittleEndian.Uint64(h[i:]), borrow)
		binary.LittleEndian.PutUint64(s[i:], v)
	}
}

// AddRecord adds the record encoded as enc (EncodeRecord), for tools that
// write a stream of records they made themselves (cmd/idemgen).
func (s *Sum) AddRecord(enc []byte) { s.add(recordHash(enc)) }

// recordHash is a record's term in the Sum: the hash of its encoding.
func recordHash(enc []byte) [32]byte { return sha256.Sum256(enc) }

// digestTag names the digest's algorithm inside its hash, so the digest of
// version 2 (this one) never equals one of version 1 (a SHA-256 over FSM
// time and every record in expiry order), which older releases showed.
const digestTag = "idemnode digest 2"

// DigestVersion is the version of the digest Machine.Digest returns.
const DigestVersion = 2

// digest is the hex SHA-256 over the tag, FSM time, the record count and
// the records' Sum: O(1), and equal on two replicas exactly when they hold
// the same FSM time and records.
func (m *Meta) digest() string {
	e := encoder{buf: make([]byte, 0, len(digestTag)+24+len(m.Sum))}
	e.buf = append(e.buf, digestTag...)
	e.varint(m.Now)
	e.uvarint(m.Records)
	e.buf = append(e.buf, m.Sum[:]...)
	if f := m.Feed; f != (FeedMeta{}) {
		// The events are in the Sum; their numbering and the count of
		// records ever abandoned are not.
		e.uvarint(f.Seq)
		e.uvarint(f.PrunedThrough)
		e.uvarint(f.Total)
	}
	h := sha256.Sum256(e.buf)
	return hex.EncodeToString(h[:])
}
