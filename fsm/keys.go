package fsm

import (
	"bytes"
	"fmt"
)

// AppendKey appends the ordered encoding of k to dst: tenant, scope and key,
// each with 0x00 written as 0x00 0xFF and ended by 0x00 0x01. Byte order of
// the encodings is RecordKey.compare's order (a part that is a prefix of
// another ends in 0x00 0x01, which sorts below both 0x00 0xFF and any other
// byte), so a store ordered by it walks records in key order, which is the
// order of snapshot streams.
func AppendKey(dst []byte, k RecordKey) []byte {
	for _, part := range [...]string{k.Tenant, k.Scope, k.Key} {
		for i := 0; i < len(part); i++ {
			if part[i] == 0 {
				dst = append(dst, 0, 0xFF)
				continue
			}
			dst = append(dst, part[i])
		}
		dst = append(dst, 0, 1)
	}
	return dst
}

// EncodeKey returns the ordered encoding of k (AppendKey).
func EncodeKey(k RecordKey) []byte {
	return AppendKey(make([]byte, 0, len(k.Tenant)+len(k.Scope)+len(k.Key)+6), k)
}

// DecodeKey parses what AppendKey wrote.
func DecodeKey(b []byte) (RecordKey, error) {
	var parts [3]string
	for i := range parts {
		var part []byte
		for {
			j := bytes.IndexByte(b, 0)
			if j < 0 || j+1 >= len(b) {
				return RecordKey{}, fmt.Errorf("%w: record key", ErrMalformed)
			}
			part = append(part, b[:j]...)
			esc := b[j+1]
			b = b[j+2:]
			if esc == 1 {
				break
			}
			if esc != 0xFF {
				return RecordKey{}, fmt.Errorf("%w: record key escape %#x", ErrMalformed, esc)
			}
			part = append(part, 0)
		}
		parts[i] = string(part)
	}
	if len(b) != 0 {
		return RecordKey{}, fmt.Errorf("%w: %d bytes after record key", ErrMalformed, len(b))
	}
	return RecordKey{Tenant: parts[0], Scope: parts[1], Key: parts[2]}, nil
}

// EncodeRecord returns the encoding of r that stores keep and snapshot
// streams carry.
func EncodeRecord(r *Record) []byte {
	e := encoder{buf: make([]byte, 0, recordSizeBound(r))}
	e.record(r)
	return e.buf
}

// DecodeRecord parses what EncodeRecord wrote.
func DecodeRecord(b []byte) (*Record, error) {
	d := decoder{buf: b}
	r := d.record()
	if err := d.finish(); err != nil {
		return nil, fmt.Errorf("decode record: %w", err)
	}
	return r, nil
}

// recordSizeBound bounds the encoding of r, so EncodeRecord allocates once.
func recordSizeBound(r *Record) int {
	return 14*10 + len(r.Tenant) + len(r.Scope) + len(r.Key) + len(r.Fingerprint) + len(r.Owner) +
		responseSize(r.Response) + checkpointSize(r.Checkpoint)
}
