package fsm

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
)

// Command formats: the first byte of every encoded command says which one
// follows.
const (
	// commandFormatV1 is the command alone. Entries written before commands
	// carried a checksum still decode, so an upgraded node applies the log
	// it already holds.
	commandFormatV1 byte = 1
	// commandFormat, what EncodeCommand writes, ends with a CRC-32C of every
	// byte before it. Raft's log store keeps no checksum of its own, and a
	// byte flipped on disk inside a command would otherwise decode into
	// another valid command (another key, another token) and silently
	// diverge this node; with the checksum it is refused. No single bit flip
	// turns 2 into 1, so a damaged format byte cannot skip the check either.
	commandFormat byte = 2
	commandCRCLen      = 4
)

// EncodeCommand returns the log-entry form of c.
func EncodeCommand(c *Command) []byte {
	e := encoder{buf: make([]byte, 0, 1+commandSize(c)+commandCRCLen)}
	e.byte1(commandFormat)
	e.command(c)
	e.buf = binary.BigEndian.AppendUint32(e.buf, crc32.Checksum(e.buf, crcTable))
	return e.buf
}

// DecodeCommand parses what EncodeCommand wrote, or the checksum-less first
// format. It returns an error, never panics, for any input; a checksum that
// does not match is ErrChecksum.
func DecodeCommand(b []byte) (*Command, error) {
	body, err := commandBody(b)
	if err != nil {
		return nil, fmt.Errorf("decode command: %w", err)
	}
	d := decoder{buf: body}
	c := d.command(true)
	if err := d.finish(); err != nil {
		return nil, fmt.Errorf("decode command: %w", err)
	}
	return c, nil
}

// commandBody checks the format byte and, in the current format, the
// checksum, and returns the encoded command between them.
func commandBody(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, ErrTruncated
	}
	switch b[0] {
	case commandFormatV1:
		return b[1:], nil
	case commandFormat:
		n := len(b) - commandCRCLen
		if n < 1 {
			return nil, ErrTruncated
		}
		if binary.BigEndian.Uint32(b[n:]) != crc32.Checksum(b[:n], crcTable) {
			return nil, ErrChecksum
		}
		return b[1:n], nil
	}
	return nil, fmt.Errorf("%w: command format %d", ErrMalformed, b[0])
}

func (e *encoder) command(c *Command) {
	e.byte1(typeByte(c))
	e.varint(c.Now)
	switch c.Type {
	case TypeClaim:
		e.key(c.Key)
		e.bytes(c.Fingerprint)
		e.string(c.Owner)
		e.varint(c.Lease)
		e.varint(c.TTL)
	case TypeComplete:
		e.key(c.Key)
		e.uvarint(c.Token)
		e.response(c.Response)
	case TypeRelease:
		e.key(c.Key)
		e.uvarint(c.Token)
	case TypeExtend:
		e.key(c.Key)
		e.uvarint(c.Token)
		e.varint(c.Lease)
	case TypeCheckpoint:
		e.key(c.Key)
		e.uvarint(c.Token)
		e.checkpoint(c.Checkpoint)
	case TypeExpire:
		e.uvarint(uint64(c.Limit))
	case TypeIdentify:
		e.bytes(c.Cluster)
	case TypeBatch:
		e.uvarint(uint64(len(c.Batch)))
		for _, sub := range c.Batch {
			e.command(sub)
		}
	}
	e.quota(c)
	e.tombstone(c)
}

// tombstoneFlag is set in the type byte of an encoded Claim or Complete
// that carries a tombstone time, which follows its quota (if any). A
// command without one encodes as before tombstones existed.
const tombstoneFlag byte = 0x40

// watchFlag is set in the type byte of a Claim whose record reports its
// abandonment (Command.WatchAbandon). It has no value.
const watchFlag byte = 0x20

// tombstoneTime is the tombstone time c gives its record, as it decodes.
func tombstoneTime(c *Command) int64 {
	if !carriesTombstone(c) {
		return 0
	}
	return c.Tombstone
}

// carriesTombstone reports whether c's tombstone time is encoded; a time
// that is not positive is none (and would not decode).
func carriesTombstone(c *Command) bool {
	return (c.Type == TypeClaim || c.Type == TypeComplete) && c.Tombstone > 0
}

func (e *encoder) tombstone(c *Command) {
	if carriesTombstone(c) {
		e.varint(c.Tombstone)
	}
}

// stamps reads what the proposing leader stamped into a flagged command:
// its quota, then its tombstone time. A tombstone flag on another type, or
// a time that is not positive, is malformed.
func (d *decoder) stamps(c *Command, quota, tombstone bool) {
	d.quota(c, quota)
	if !tombstone {
		return
	}
	if c.Type != TypeClaim && c.Type != TypeComplete {
		d.fail(fmt.Errorf("%w: tombstone time on a %s command", ErrMalformed, c.Type))
		return
	}
	if c.Tombstone = d.varint(); d.err == nil && c.Tombstone <= 0 {
		d.fail(fmt.Errorf("%w: tombstone time %d", ErrMalformed, c.Tombstone))
	}
}

// command decodes one command; a Batch may not nest (top is false inside one).
func (d *decoder) command(top bool) *Command {
	typ := d.byte1()
	c := &Command{Type: CommandType(typ &^ (quotaFlag | tombstoneFlag | watchFlag)), Now: d.varint()}
	if typ&watchFlag != 0 {
		if c.Type != TypeClaim {
			d.fail(fmt.Errorf("%w: abandonment watch on a %s command", ErrMalformed, c.Type))
			return c
		}
		c.WatchAbandon = true
	}
	// A flagged command's quota and tombstone time follow its own fields,
	// in that order: read them on every return path below.
	defer d.stamps(c, typ&quotaFlag != 0, typ&tombstoneFlag != 0)
	switch c.Type {
	case TypeClaim:
		c.Key = d.key()
		c.Fingerprint = d.bytes()
		c.Owner = d.string()
		c.Lease = d.varint()
		c.TTL = d.varint()
	case TypeComplete:
		c.Key = d.key()
		c.Token = d.uvarint()
		c.Response = d.response()
	case TypeRelease:
		c.Key = d.key()
		c.Token = d.uvarint()
	case TypeExtend:
		c.Key = d.key()
		c.Token = d.uvarint()
		c.Lease = d.varint()
	case TypeCheckpoint:
		c.Key = d.key()
		c.Token = d.uvarint()
		c.Checkpoint = d.checkpoint()
	case TypeExpire:
		limit := d.uvarint()
		if limit > 1<<32-1 {
			d.fail(fmt.Errorf("%w: expire limit %d", ErrMalformed, limit))
		}
		c.Limit = uint32(limit)
	case TypeIdentify:
		if c.Cluster = d.bytes(); d.err == nil && (len(c.Cluster) == 0 || len(c.Cluster) > MaxClusterID) {
			d.fail(fmt.Errorf("%w: cluster identity of %d bytes", ErrMalformed, len(c.Cluster)))
		}
	case TypeBatch:
		if !top {
			d.fail(fmt.Errorf("%w: nested batch", ErrMalformed))
			return c
		}
		n := d.count(2)
		if n > MaxBatch {
			d.fail(fmt.Errorf("%w: batch of %d commands, limit %d", ErrMalformed, n, MaxBatch))
			return c
		}
		c.Batch = make([]*Command, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			c.Batch = append(c.Batch, d.command(false))
		}
	default:
		d.fail(fmt.Errorf("%w: command type %d", ErrMalformed, c.Type))
	}
	return c
}

// commandSize bounds the encoded size of c, a batch's members included, so
// that EncodeCommand allocates once: a batch of 20 claims grew its buffer
// five times, and encoding was 11 % of the leader's allocations.
func commandSize(c *Command) int {
	// type, then at most eleven varints: time, three key lengths,
	// fingerprint and owner lengths, two of lease/TTL/token/limit/count, the
	// quota's two, the tombstone time.
	n := 1 + 11*binary.MaxVarintLen64 + len(c.Key.Tenant) + len(c.Key.Scope) + len(c.Key.Key) +
		len(c.Owner) + len(c.Fingerprint) + len(c.Cluster) + responseSize(c.Response) + checkpointSize(c.Checkpoint)
	for _, sub := range c.Batch {
		n += commandSize(sub)
	}
	return n
}

func (e *encoder) key(k RecordKey) {
	e.string(k.Tenant)
	e.string(k.Scope)
	e.string(k.Key)
}

func (d *decoder) key() RecordKey {
	return RecordKey{Tenant: d.string(), Scope: d.string(), Key: d.string()}
}

// response encodes a presence byte first, so "no response" and "an empty
// response" stay different.
func (e *encoder) response(r *Response) {
	if r == nil {
		e.byte1(0)
		return
	}
	e.byte1(1)
	e.varint(int64(r.Status))
	e.uvarint(uint64(len(r.Headers)))
	for _, h := range r.Headers {
		e.string(h.Name)
		e.string(h.Value)
	}
	e.bytes(r.Body)
}

func (d *decoder) response() *Response {
	switch d.byte1() {
	case 0:
		return nil
	case 1:
	default:
		d.fail(fmt.Errorf("%w: response presence byte", ErrMalformed))
		return nil
	}
	status := d.varint()
	if status != int64(int32(status)) {
		d.fail(fmt.Errorf("%w: response status %d", ErrMalformed, status))
		return nil
	}
	r := &Response{Status: int32(status)}
	if n := d.count(2); n > 0 {
		r.Headers = make([]Header, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			r.Headers = append(r.Headers, Header{Name: d.string(), Value: d.string()})
		}
	}
	r.Body = d.bytes()
	return r
}

// responseSize bounds the encoded size of r: presence, status, header
// count, each header's two lengths and bytes, the body's length and bytes.
func responseSize(r *Response) int {
	n := 1
	if r == nil {
		return n
	}
	n += 3*binary.MaxVarintLen64 + len(r.Body)
	for _, h := range r.Headers {
		n += 2*binary.MaxVarintLen64 + len(h.Name) + len(h.Value)
	}
	return n
}

// record encodes every field of a record; snapshots and the digest use it,
// so two equal records always encode to equal bytes.
func (e *encoder) record(r *Record) {
	e.key(r.RecordKey)
	e.byte1(byte(r.State))
	e.bytes(r.Fingerprint)
	e.string(r.Owner)
	e.uvarint(r.Token)
	e.uvarint(uint64(r.Attempt))
	e.varint(r.LeaseExpiresAt)
	e.varint(r.CreatedAt)
	e.varint(r.ExpiresAt)
	e.varint(r.CompletedAt)
	e.response(r.Response)
	if r.Checkpoint != nil {
		e.byte1(fieldCheckpoint)
		e.checkpoint(r.Checkpoint)
	}
	if r.TombstoneFor != 0 {
		e.byte1(fieldTombstoneFor)
		e.varint(r.TombstoneFor)
	}
	if r.Tombstone {
		e.byte1(fieldTombstone)
	}
	if r.Watched {
		e.byte1(fieldWatched)
	}
	if r.Abandoned != 0 {
		e.byte1(fieldAbandoned)
		e.uvarint(r.Abandoned)
	}
}

// Optional fields of a record follow its response, each a tag byte and its
// value, in tag order; a record without them encodes exactly as records
// did before they existed, so stores, snapshots and digests of older
// releases read and compare unchanged.
const (
	fieldCheckpoint   byte = 1
	fieldTombstoneFor byte = 2
	// fieldTombstone has no value: present, the record is a tombstone.
	fieldTombstone byte = 3
	// fieldWatched has no value: present, abandonment is reported.
	fieldWatched byte = 4
	// fieldAbandoned holds the number of the event that reported the
	// record abandoned.
	fieldAbandoned byte = 5
)

// checkpoint encodes a recovery point; nil encodes as an empty one, which
// is what a Checkpoint command without one applies as.
func (e *encoder) checkpoint(c *Checkpoint) {
	if c == nil {
		c = &Checkpoint{}
	}
	e.string(c.Point)
	e.bytes(c.Data)
}

func (d *decoder) checkpoint() *Checkpoint {
	return &Checkpoint{Point: d.string(), Data: d.bytes()}
}

// checkpointSize bounds the encoded size of c.
func checkpointSize(c *Checkpoint) int {
	if c == nil {
		return 0
	}
	return 1 + 2*binary.MaxVarintLen64 + len(c.Point) + len(c.Data)
}

// optionalFields decodes the tagged fields after a record's response,
// which run to the end of its encoding.
func (d *decoder) optionalFields(r *Record) {
	last := byte(0)
	for d.err == nil && len(d.buf) > 0 {
		tag := d.byte1()
		if tag <= last {
			d.fail(fmt.Errorf("%w: record field %d after %d", ErrMalformed, tag, last))
			return
		}
		last = tag
		switch tag {
		case fieldCheckpoint:
			r.Checkpoint = d.checkpoint()
		case fieldTombstoneFor:
			if r.TombstoneFor = d.varint(); d.err == nil && r.TombstoneFor <= 0 {
				d.fail(fmt.Errorf("%w: tombstone time %d", ErrMalformed, r.TombstoneFor))
			}
		case fieldTombstone:
			r.Tombstone = true
		case fieldWatched:
			r.Watched = true
		case fieldAbandoned:
			if r.Abandoned = d.uvarint(); d.err == nil && r.Abandoned == 0 {
				d.fail(fmt.Errorf("%w: abandoned by event 0", ErrMalformed))
			}
		default:
			d.fail(fmt.Errorf("%w: record field %d", ErrMalformed, tag))
		}
	}
}

// record decodes what encoder.record wrote; the key strings and the owner
// share one allocation, as they do in a record that Apply stored.
func (d *decoder) record() *Record {
	tenant, scope, key := d.raw(), d.raw(), d.raw()
	r := &Record{State: State(d.byte1())}
	r.Fingerprint = d.bytes()
	owner := d.raw()
	var all strings.Builder
	all.Grow(len(tenant) + len(scope) + len(key) + len(owner))
	for _, part := range [...][]byte{tenant, scope, key, owner} {
		all.Write(part)
	}
	r.RecordKey, r.Owner = splitKey(all.String(), len(tenant), len(scope), len(key))
	r.Token = d.uvarint()
	attempt := d.uvarint()
	r.LeaseExpiresAt = d.varint()
	r.CreatedAt = d.varint()
	r.ExpiresAt = d.varint()
	r.CompletedAt = d.varint()
	r.Response = d.response()
	d.optionalFields(r)
	if d.err != nil {
		return nil
	}
	if attempt > 1<<32-1 || (r.State != StatePending && r.State != StateCompleted) {
		d.fail(fmt.Errorf("%w: record %q: state %d, attempt %d", ErrMalformed, r.Key, r.State, attempt))
		return nil
	}
	r.Attempt = uint32(attempt)
	return r
}
