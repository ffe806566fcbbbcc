package store

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/idemnode/idemnode/fsm"
)

// view is a Pebble snapshot: the records and the metadata of one commit,
// read together, so a stream's index, time, Sum and records always agree.
type view struct {
	s    *Store
	snap *pebble.Snapshot
	meta fsm.Meta
}

// View returns a point-in-time view; it keeps the database open until closed.
func (s *Store) View() (fsm.View, error) {
	if !s.acquire() {
		return nil, errBroken
	}
	if err := s.drainNow(); err != nil {
		s.release()
		return nil, err
	}
	snap := s.db.NewSnapshot()
	v := &view{s: s, snap: snap}
	enc, ok, err := get(snap, metaKey, s.fail)
	if err == nil && ok {
		err = v.meta.UnmarshalBinary(enc)
	}
	if err != nil {
		v.Close()
		return nil, fmt.Errorf("read the view's metadata: %w", err)
	}
	return v, nil
}

func (v *view) Meta() fsm.Meta { return v.meta }

// Records walks the records in key order: each key's position, then the
// record at it.
func (v *view) Records(fn func(enc []byte) error) error {
	return v.walk(prefixRecord, "read records", true, fn)
}

// Events walks the feed's events in order of number.
func (v *view) Events(fn func(enc []byte) error) error {
	return v.walk(prefixEvent, "read the feed", false, fn)
}

// defaultWalkChunk is the bytes of values a walk reads per iterator.
const defaultWalkChunk = 1 << 20

// walk calls fn with each value under prefix in key order, or, when
// placed, with the record at the position each value holds. It reads a
// chunk at a time and calls fn with no iterator open: an iterator holds
// every memtable that existed when it opened, even once flushed, and a
// stream read from a view (a follower's InstallSnapshot, a backup) can take
// minutes at the pace of its reader while commits go on. The view's Pebble
// snapshot keeps every chunk at the same commit.
func (v *view) walk(prefix byte, what string, placed bool, fn func(enc []byte) error) error {
	var c chunk
	from := []byte{prefix}
	for from != nil {
		var err error
		if from, err = v.readChunk(&c, from, prefixEnd(prefix), placed); err != nil {
			return v.s.fail(what, err)
		}
		for i := range c.ends {
			if err := fn(c.value(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// chunk holds the values of one of walk's reads, end to end.
type chunk struct {
	bytes []byte
	ends  []int
}

func (c *chunk) value(i int) []byte {
	start := 0
	if i > 0 {
		start = c.ends[i-1]
	}
	return c.bytes[start:c.ends[i]]
}

// readChunk reads values from the key from on into c (for placed ones,
// the records they place), until c holds the store's walkChunk bytes or
// the keys reach upper; it returns the key to read on from, nil at the end.
func (v *view) readChunk(c *chunk, from, upper []byte, placed bool) (next []byte, err error) {
	c.bytes, c.ends = c.bytes[:0], c.ends[:0]
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: from, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	var records *pebble.Iterator
	if placed {
		if records, err = v.snap.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixValue}, UpperBound: prefixEnd(prefixValue)}); err != nil {
			it.Close()
			return nil, err
		}
	}
	for it.First(); it.Valid(); it.Next() {
		value := it.Value()
		if placed {
			if value, err = placedRecord(records, value); err != nil {
				break
			}
		}
		c.bytes = append(c.bytes, value...)
		c.ends = append(c.ends, len(c.bytes))
		if len(c.bytes) >= v.s.opts.walkChunk {
			// The next chunk starts at the key's immediate successor.
			next = append(append([]byte(nil), it.Key()...), 0)
			break
		}
	}
	if records != nil {
		if cerr := records.Close(); err == nil {
			err = cerr
		}
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return next, nil
}

// placedRecord reads, through records, the record at the position pos
// encodes.
func placedRecord(records *pebble.Iterator, pos []byte) ([]byte, error) {
	p, err := decodePosition(pos)
	if err != nil {
		return nil, err
	}
	key := valueKey(p)
	if !records.SeekGE(key) || !bytes.Equal(records.Key(), key) {
		if err := records.Error(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: no record at position %d", ErrCorrupt, p)
	}
	return records.ValueAndErr()
}

func (v *view) Close() error {
	err := v.snap.Close()
	v.s.release()
	return err
}
