package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Sentinel errors of decoding. A log entry that fails to decode is fatal to
// the node (see FSM.Apply); a snapshot that fails to decode is refused.
var (
	// ErrTruncated means the input ended inside a field.
	ErrTruncated = errors.New("truncated input")
	// ErrMalformed means a field holds a value no encoder writes.
	ErrMalformed = errors.New("malformed input")
	// ErrChecksum means a command's or a snapshot's checksum does not match
	// its bytes: they were damaged after they were written.
	ErrChecksum = errors.New("checksum mismatch")
)

// crcTable is CRC-32C (Castagnoli), which commands and snapshots end with.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// encoder appends a compact binary form: unsigned varints, zig-zag varints
// for signed values, and length-prefixed byte strings.
type encoder struct{ buf []byte }

func (e *encoder) uvarint(v uint64) { e.buf = binary.AppendUvarint(e.buf, v) }
func (e *encoder) varint(v int64)   { e.buf = binary.AppendVarint(e.buf, v) }
func (e *encoder) byte1(b byte)     { e.buf = append(e.buf, b) }

func (e *encoder) bytes(b []byte) {
	e.uvarint(uint64(len(b)))
	e.buf = append(e.buf, b...)
}

func (e *encoder) string(s string) {
	e.uvarint(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

// decoder reads what encoder wrote. The first error sticks and every later
// read returns a zero value, so callers check err once at the end.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail(ErrTruncated)
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		d.fail(ErrTruncated)
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) byte1() byte {
	if d.err != nil {
		return 0
	}
	if len(d.buf) == 0 {
		d.fail(ErrTruncated)
		return 0
	}
	b := d.buf[0]
	d.buf = d.buf[1:]
	return b
}

// raw returns the next length-prefixed field without copying. The length is
// checked against what is left before anything is allocated, so a hostile
// length cannot make the decoder allocate more than the input's size.
func (d *decoder) raw() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.buf)) {
		d.fail(ErrTruncated)
		return nil
	}
	b := d.buf[:n:n]
	d.buf = d.buf[n:]
	return b
}

// bytes returns a copy of the next field (nil when empty), so a decoded value
// never aliases a buffer the caller may reuse.
func (d *decoder) bytes() []byte {
	b := d.raw()
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

func (d *decoder) string() string { return string(d.raw()) }

// count reads a repetition count and refuses one larger than the bytes left
// could possibly hold (each element takes at least minSize bytes).
func (d *decoder) count(minSize int) int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.buf)/minSize) {
		d.fail(fmt.Errorf("%w: count %d exceeds input", ErrMalformed, n))
		return 0
	}
	return int(n)
}

func (d *decoder) finish() error {
	if d.err == nil && len(d.buf) != 0 {
		d.fail(fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.buf)))
	}
	return d.err
}
