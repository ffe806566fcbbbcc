package fsm

import (
	"crypto/sha256"
	"fmt"
)

// EventKind says what an event of the abandoned feed reports.
type EventKind uint8

const (
	// EventAbandoned: a PENDING record's lease ran out without a
	// completion or release; nobody knows whether the side effect ran.
	EventAbandoned EventKind = 1
	// EventResolved: a record reported abandoned was completed, released,
	// taken over or expired (Resolution says which).
	EventResolved EventKind = 2
)

// Resolution says how an abandoned record was resolved.
type Resolution uint8

const (
	ResolutionNone Resolution = iota
	// ResolvedCompleted: the holder completed it after all.
	ResolvedCompleted
	// ResolvedReleased: the holder released it.
	ResolvedReleased
	// ResolvedTakenOver: a new claim took it over.
	ResolvedTakenOver
	// ResolvedExpired: its TTL ran out while it was PENDING.
	ResolvedExpired
)

var (
	eventKindNames  = [...]string{"unknown", "abandoned", "resolved"}
	resolutionNames = [...]string{"", "completed", "released", "taken_over", "expired"}
)

func (k EventKind) String() string {
	if int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return "unknown"
}

func (r Resolution) String() string {
	if int(r) < len(resolutionNames) {
		return resolutionNames[r]
	}
	return "unknown"
}

// Event is one entry of the abandoned feed. Seq numbers every event of the
// cluster in one sequence, in log order, so every replica holds the same
// events under the same numbers.
type Event struct {
	Seq        uint64
	Kind       EventKind
	Resolution Resolution
	// Resolves is, on a resolved event, the number of the abandoned event
	// it settles.
	Resolves uint64
	RecordKey
	// Token and Attempt are the holder's as the record stood at the event.
	Token   uint64
	Attempt uint32
	// Point is the record's last recovery point ("" when none).
	Point string
	// LeaseExpiresAt is when the holder's lease ended (or ends).
	LeaseExpiresAt int64
	// At is the FSM time of the event.
	At int64
	// KeepUntil is the FSM time before which the event is never pruned:
	// the end of the record it describes (its TTL and tombstone), and at
	// least the record's TTL after the event.
	KeepUntil int64
}

const eventVersion = 1

// EncodeEvent returns an event's stored (and streamed) form.
func EncodeEvent(ev *Event) []byte {
	e := encoder{buf: make([]byte, 0, 48+len(ev.Tenant)+len(ev.Scope)+len(ev.Key)+len(ev.Point))}
	e.byte1(eventVersion)
	e.uvarint(ev.Seq)
	e.byte1(byte(ev.Kind))
	e.byte1(byte(ev.Resolution))
	e.uvarint(ev.Resolves)
	e.key(ev.RecordKey)
	e.uvarint(ev.Token)
	e.uvarint(uint64(ev.Attempt))
	e.string(ev.Point)
	e.varint(ev.LeaseExpiresAt)
	e.varint(ev.At)
	e.varint(ev.KeepUntil)
	return e.buf
}

// DecodeEvent parses what EncodeEvent wrote; any other input is an error.
func DecodeEvent(b []byte) (*Event, error) {
	d := decoder{buf: b}
	if v := d.byte1(); d.err == nil && v != eventVersion {
		return nil, fmt.Errorf("%w: event version %d", ErrMalformed, v)
	}
	ev := &Event{Seq: d.uvarint(), Kind: EventKind(d.byte1()), Resolution: Resolution(d.byte1()), Resolves: d.uvarint()}
	ev.RecordKey = d.key()
	ev.Token = d.uvarint()
	attempt := d.uvarint()
	ev.Point = d.string()
	ev.LeaseExpiresAt, ev.At, ev.KeepUntil = d.varint(), d.varint(), d.varint()
	if err := d.finish(); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	valid := (ev.Kind == EventAbandoned && ev.Resolution == ResolutionNone && ev.Resolves == 0) ||
		(ev.Kind == EventResolved && ev.Resolution >= ResolvedCompleted && ev.Resolution <= ResolvedExpired &&
			ev.Resolves != 0 && ev.Resolves < ev.Seq)
	if !valid || ev.Seq == 0 || attempt > 1<<32-1 {
		return nil, fmt.Errorf("%w: event %d: kind %d, resolution %d, attempt %d", ErrMalformed, ev.Seq, ev.Kind, ev.Resolution, attempt)
	}
	ev.Attempt = uint32(attempt)
	return ev, nil
}

// eventHash is an event's term in the state's Sum. Its tag keeps it apart
// from every record's hash.
func eventHash(enc []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte("idemnode event\x00"))
	h.Write(enc)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func mustEvent(enc []byte) *Event {
	ev, err := DecodeEvent(enc)
	if err != nil {
		panic(fmt.Sprintf("fsm: stored event: %v", err))
	}
	return ev
}
