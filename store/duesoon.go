package store

import (
	"bytes"
	"time"

	"github.com/idemnode/idemnode/fsm"
)

// dueSoon keeps, in memory, the records the last commits wrote that come
// due within dueSoonHorizon of the FSM time that wrote them: a claim that
// watches for abandonment is due at the end of its lease, seconds away.
// Due takes them from here rather than from the sstables, where a record
// written a lease ago sits in a block the compactions have rewritten since,
// so its read misses the block cache: a read of the disk and a block's
// decompression per lease end. A profile of claim alone over two minutes
// put Due at 8.7 s of the leader's 61.5 s, 1.4 s with the records kept
// (docs/PERFORMANCE.md).
//
// Every commit passes each record it changes through note, so an entry
// always holds the record's last change: Due may use one whose due time is
// the index entry's it walks. Only the committing goroutine, holding the
// write buffer's wmu, reads or writes it (Commit and Due), so it needs no
// lock of its own. It is bounded by bytes (Options.MemoryBound counts
// them); a record that finds it full is read from Pebble when due, as
// before. A new store (opened, built, installed) starts it empty.
type dueSoon struct {
	budget int64
	bytes  int64
	recs   map[string]soonRecord
}

// soonRecord is a record's last change, the due time and the position it
// was written with.
type soonRecord struct {
	due int64
	pos uint64
	enc []byte
}

// dueSoonHorizon is how far past the commit's FSM time a record may be due
// and still be kept: a lease's length, not a TTL's.
const dueSoonHorizon = int64(5 * time.Minute)

// soonEntryOverhead is what a kept record costs besides its key and
// encoding: the map's slot, its growth, the allocations' rounding up.
// Measured: 337 bytes of heap for a benchmark claim's 157-byte record
// under its 68-byte key, 112; and 8 more since the slot holds the
// record's position.
const soonEntryOverhead = 120

func soonCost(key, enc []byte) int64 { return int64(len(key) + len(enc) + soonEntryOverhead) }

// note passes one commit's record changes, written at FSM time now: each
// one drops what was kept for its key, and keeps a copy of the new record
// if it is due soon and fits. A copy, sized to the record: the commit's
// own has the room of its size bound to spare (fsm.EncodeRecord), which
// would double what a kept claim holds.
func (d *dueSoon) note(changes []fsm.RecordChange, at []placement, now int64) {
	if d.budget <= 0 {
		return
	}
	for i, rc := range changes {
		if old, ok := d.recs[string(rc.Key)]; ok {
			d.bytes -= soonCost(rc.Key, old.enc)
			delete(d.recs, string(rc.Key))
		}
		if rc.New == nil || rc.NewExpiresAt-now > dueSoonHorizon {
			continue
		}
		if cost := soonCost(rc.Key, rc.New); d.bytes+cost <= d.budget {
			if d.recs == nil {
				d.recs = map[string]soonRecord{}
			}
			d.recs[string(rc.Key)] = soonRecord{due: rc.NewExpiresAt, pos: at[i].new, enc: bytes.Clone(rc.New)}
			d.bytes += cost
		}
	}
}

// get returns key's record if it is kept with due time due: the record an
// expiry index entry (due, key) stands for.
func (d *dueSoon) get(key []byte, due int64) ([]byte, bool) {
	r, ok := d.recs[string(key)]
	if !ok || r.due != due {
		return nil, false
	}
	return r.enc, true
}

// position returns the position of key's record, if it is kept: the
// record's last change, so its current position.
func (d *dueSoon) position(key []byte) (uint64, bool) {
	r, ok := d.recs[string(key)]
	return r.pos, ok
}
