package store

import (
	"encoding/binary"
	"fmt"

	"github.com/idemnode/idemnode/fsm"
)

// The key layout (DESIGN.md has it as a table). One byte of prefix names
// the kind of key; record keys and the expiry index sort by fsm.AppendKey,
// so the records walk in the snapshot stream's order.
//
// A record is stored under its position, the order in which this store
// wrote it, and its key holds only that position (format 2). Positions
// only grow, so each flush adds values above every stored one, and
// compactions move them down a level without rewriting them; stored under
// their keys (format 1), every value was rewritten at every level, three
// to four times its size in compactions (docs/PERFORMANCE.md). Positions
// are this store's own: replicas and a rebuilt store number alike only by
// chance, and nothing outside the store sees them.
//
// The records sort last (format 3: the expiry index moved below them from
// 'x'), so a table of new positions lies above every key the store holds,
// in no table's bounds: the write buffer's hand-off ingests its records
// straight into the bottom level, where no compaction rewrites them
// (buffer.go). Under 'x', some table of every level spanned the records'
// end and the index's start, and an ingest landed above it.
const (
	prefixExpiry = 'd' // 'd' + expires_at (big-endian, sign flipped) + key → empty: the records due, in due order
	prefixEvent  = 'e' // 'e' + seq (big-endian) → encoded fsm.Event
	prefixFormat = 'f' // the store's format version
	prefixMeta   = 'm' // fsm.Meta of the last commit
	prefixLast   = 'p' // the last position given (8 bytes, big-endian)
	prefixRecord = 'r' // 'r' + key → the record's position (8 bytes, big-endian)
	prefixUsage  = 'u' // 'u' + tenant → uvarint keys, uvarint bytes
	prefixValue  = 'v' // 'v' + position (big-endian) → encoded record; the last prefix

	prefixExpiryBefore3 = 'x' // the expiry index in formats 1 and 2
)

// FormatVersion is the version of the on-disk layout this release writes;
// a store of formatRecordsByKey or formatExpiryLast is migrated at open
// (migrate.go), any other refused.
const (
	FormatVersion      = 3
	formatRecordsByKey = 1 // records under their keys, the expiry index under 'x'
	formatExpiryLast   = 2 // records at positions, the expiry index under 'x'
)

var (
	formatKey   = []byte{prefixFormat}
	metaKey     = []byte{prefixMeta}
	positionKey = []byte{prefixLast}
)

func recordKey(key []byte) []byte { return appendRecordKey(make([]byte, 0, 1+len(key)), key) }

func appendRecordKey(dst, key []byte) []byte { return append(append(dst, prefixRecord), key...) }

// expiryKey orders by expires_at, then key. Flipping the sign bit makes
// big-endian bytes of an int64 sort as the number does.
func expiryKey(at int64, key []byte) []byte {
	return appendExpiryKey(make([]byte, 0, 9+len(key)), at, key)
}

func appendExpiryKey(dst []byte, at int64, key []byte) []byte {
	dst = binary.BigEndian.AppendUint64(append(dst, prefixExpiry), uint64(at)^(1<<63))
	return append(dst, key...)
}

// parseExpiryKey returns the time and record key of an expiry key.
func parseExpiryKey(b []byte) (int64, []byte, error) {
	if len(b) < 9 || b[0] != prefixExpiry {
		return 0, nil, fmt.Errorf("expiry index key %x is malformed", b)
	}
	return int64(binary.BigEndian.Uint64(b[1:9]) ^ (1 << 63)), b[9:], nil
}

// valueKey is where the record at position pos is stored.
func valueKey(pos uint64) []byte { return appendValueKey(make([]byte, 0, 9), pos) }

func appendValueKey(dst []byte, pos uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, prefixValue), pos)
}

// encodePosition and decodePosition are a record key's value.
func encodePosition(pos uint64) []byte { return binary.BigEndian.AppendUint64(nil, pos) }

func decodePosition(v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: a record's position is %d bytes, not 8", ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
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
