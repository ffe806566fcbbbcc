package store

import (
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

// Records walks the records in key order.
func (v *view) Records(fn func(enc []byte) error) error {
	return v.walk(prefixRecord, "read records", fn)
}

// Events walks the feed's events in order of number.
func (v *view) Events(fn func(enc []byte) error) error {
	return v.walk(prefixEvent, "read the feed", fn)
}

func (v *view) walk(prefix byte, what string, fn func(enc []byte) error) error {
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return v.s.fail(what, err)
	}
	for it.First(); it.Valid(); it.Next() {
		if err := fn(it.Value()); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return v.s.fail(what, err)
	}
	return nil
}

func (v *view) Close() error {
	err := v.snap.Close()
	v.s.release()
	return err
}
