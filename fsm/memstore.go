package fsm

import (
	"bytes"
	"sync"

	"github.com/google/btree"
)

// NewMemStore returns an empty in-memory Store. It is the reference model
// of the store's contract: the fsm tests run on it, and the Pebble store's
// differential test compares itself with it. Nodes never use it.
func NewMemStore() Store { return newMemStore() }

// memStore keeps records in two B-trees, by key and by (expiry, key); its
// views are O(1) copy-on-write clones.
type memStore struct {
	mu    sync.RWMutex
	recs  *btree.BTreeG[memRecord]
	exp   *btree.BTreeG[memExpiry]
	evs   *btree.BTreeG[memEvent]
	meta  Meta
	usage map[string]Usage
}

type memRecord struct{ key, enc []byte }

type memEvent struct {
	seq uint64
	enc []byte
}

func lessMemEvent(a, b memEvent) bool { return a.seq < b.seq }

type memExpiry struct {
	at  int64
	key []byte
}

func lessMemRecord(a, b memRecord) bool { return bytes.Compare(a.key, b.key) < 0 }

func lessMemExpiry(a, b memExpiry) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return bytes.Compare(a.key, b.key) < 0
}

func newMemStore() *memStore {
	return &memStore{recs: btree.NewG(32, lessMemRecord), exp: btree.NewG(32, lessMemExpiry),
		evs: btree.NewG(32, lessMemEvent), usage: map[string]Usage{}}
}

func (s *memStore) Get(key []byte) ([]byte, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.recs.Get(memRecord{key: key})
	return r.enc, ok, nil
}

func (s *memStore) Due(t int64, limit int) ([][]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out [][]byte
	s.exp.Ascend(func(e memExpiry) bool {
		if e.at > t || len(out) >= limit {
			return false
		}
		r, _ := s.recs.Get(memRecord{key: e.key})
		out = append(out, r.enc)
		return true
	})
	return out, nil
}

func (s *memStore) Events(after uint64, limit int) ([][]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out [][]byte
	s.evs.AscendGreaterOrEqual(memEvent{seq: after + 1}, func(e memEvent) bool {
		if len(out) >= limit {
			return false
		}
		out = append(out, e.enc)
		return true
	})
	return out, nil
}

func (s *memStore) NextExpiry() (int64, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.exp.Min()
	return e.at, ok, nil
}

func (s *memStore) Meta() Meta {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.meta
}

func (s *memStore) Usages() (map[string]Usage, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]Usage, len(s.usage))
	for t, u := range s.usage {
		out[t] = u
	}
	return out, nil
}

func (s *memStore) Commit(c *Changes) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rc := range c.Records {
		s.apply(rc)
	}
	for _, u := range c.Usage {
		if u.Usage == (Usage{}) {
			delete(s.usage, u.Tenant)
		} else {
			s.usage[u.Tenant] = u.Usage
		}
	}
	for _, ev := range c.Events {
		s.applyEvent(ev)
	}
	s.meta = c.Meta
	return nil
}

func (s *memStore) apply(rc RecordChange) {
	key := bytes.Clone(rc.Key)
	if rc.HadOld {
		s.exp.Delete(memExpiry{at: rc.OldExpiresAt, key: key})
	}
	if rc.New == nil {
		s.recs.Delete(memRecord{key: key})
		return
	}
	s.recs.ReplaceOrInsert(memRecord{key: key, enc: bytes.Clone(rc.New)})
	s.exp.ReplaceOrInsert(memExpiry{at: rc.NewExpiresAt, key: key})
}

func (s *memStore) applyEvent(ev EventChange) {
	if ev.New == nil {
		s.evs.Delete(memEvent{seq: ev.Seq})
		return
	}
	s.evs.ReplaceOrInsert(memEvent{seq: ev.Seq, enc: bytes.Clone(ev.New)})
}

func (s *memStore) Sync() error { return nil }

func (s *memStore) View() (View, error) {
	// Clone writes to the trees' copy-on-write bookkeeping, so it needs the
	// write lock even though it changes no record.
	s.mu.Lock()
	defer s.mu.Unlock()
	return &memView{recs: s.recs.Clone(), evs: s.evs.Clone(), meta: s.meta}, nil
}

func (s *memStore) NewBuilder() (Builder, error) { return &memBuilder{s: newMemStore()}, nil }

func (s *memStore) Close() error { return nil }

type memView struct {
	recs *btree.BTreeG[memRecord]
	evs  *btree.BTreeG[memEvent]
	meta Meta
}

func (v *memView) Meta() Meta { return v.meta }

func (v *memView) Records(fn func(enc []byte) error) error {
	var err error
	v.recs.Ascend(func(r memRecord) bool {
		err = fn(r.enc)
		return err == nil
	})
	return err
}

func (v *memView) Events(fn func(enc []byte) error) error {
	var err error
	v.evs.Ascend(func(e memEvent) bool {
		err = fn(e.enc)
		return err == nil
	})
	return err
}

func (v *memView) Close() error { return nil }

type memBuilder struct{ s *memStore }

func (b *memBuilder) Has(key []byte) (bool, error) { return b.s.recs.Has(memRecord{key: key}), nil }

func (b *memBuilder) Put(key, enc []byte, expiresAt int64) error {
	b.s.apply(RecordChange{Key: key, New: enc, NewExpiresAt: expiresAt})
	return nil
}

func (b *memBuilder) PutEvent(seq uint64, enc []byte) error {
	b.s.applyEvent(EventChange{Seq: seq, New: enc})
	return nil
}

func (b *memBuilder) Finish(m Meta, usage map[string]Usage) error {
	b.s.meta, b.s.usage = m, usage
	return nil
}

func (b *memBuilder) Install() (Store, error) { return b.s, nil }

func (b *memBuilder) Abort() {}
