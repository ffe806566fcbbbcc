package store

import (
	"encoding/binary"
	"fmt"

	"github.com/idemnode/idemnode/fsm"
)

// The key layout (DESIGN.md has it as a table). One byte of prefix names
// the kind of key; records and the expiry index sort by fsm.AppendKey, so
// the records walk in the snapshot stream's order.
const (
	prefixEvent  = 'e' // 'e' + seq (big-endian) → encoded fsm.Event
	prefixFormat = 'f' // the store's format version
	prefixMeta   = 'm' // fsm.Meta of the last commit
	prefixRecord = 'r' // 'r' + key → encoded record
	prefixExpiry = 'x' // 'x' + expires_at (big-endian, sign flipped) + key → empty
	prefixUsage  = 'u' // 'u' + tenant → uvarint keys, uvarint bytes
)

// FormatVersion is the version of the on-disk layout this release writes
// and reads; a store of another version is refused at open.
const FormatVersion = 1

var (
	formatKey = []byte{prefixFormat}
	metaKey   = []byte{prefixMeta}
)

func recordKey(key []byte) []byte {
	return append(append(make([]byte, 0, 1+len(key)), prefixRecord), key...)
}

// expiryKey orders by expires_at, then key. Flipping the sign bit makes
// big-endian bytes of an int64 sort as the number does.
func expiryKey(at int64, key []byte) []byte {
	b := make([]byte, 9, 9+len(key))
	b[0] = prefixExpiry
	binary.BigEndian.PutUint64(b[1:], uint64(at)^(1<<63))
	return append(b, key...)
}

// parseExpiryKey returns the time and record key of an expiry key.
func parseExpiryKey(b []byte) (int64, []byte, error) {
	if len(b) < 9 || b[0] != prefixExpiry {
		return 0, nil, fmt.Errorf("expiry index key %x is malformed", b)
	}
	return int64(binary.BigEndian.Uint64(b[1:9]) ^ (1 << 63)), b[9:], nil
}

func eventKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixEvent}, seq)
}

func usageKey(tenant string) []byte {
	return append([]byte{prefixUsage}, tenant...)
}

// prefixEnd is the first key after every key starting with prefix p.
func prefixEnd(p byte) []byte { return []byte{p + 1} }

func encodeUsage(u fsm.Usage) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(nil, u.Keys), u.Bytes)
}

func decodeUsage(v []byte) (fsm.Usage, error) {
	keys, n := binary.Uvarint(v)
	if n <= 0 {
		return fsm.Usage{}, ErrCorrupt
	}
	b, m := binary.Uvarint(v[n:])
	if m <= 0 || n+m != len(v) {
		return fsm.Usage{}, ErrCorrupt
	}
	return fsm.Usage{Keys: keys, Bytes: b}, nil
}
