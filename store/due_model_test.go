package store

import (
	"bytes"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"pgregory.net/rapid"

	"github.com/idemnode/idemnode/fsm"
)

// TestDueAgainstAModel: Due and NextExpiry answer as a map of key → (due
// time, record) does, under random commits that move, delete, re-create
// and keep records' due times, with syncs, hand-offs of every size, the
// records due soon kept or not, and a NextExpiry polling on another
// goroutine; after every step expLow is at or below every live entry.
// (An independent review wrote it for the change that lets Due skip the
// entries the buffer removed.)
func TestDueAgainstAModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s, err := Open("fsm", Options{FS: vfs.NewMem(), MemTableSize: 1 << 20,
			dueSoonSize:        rapid.SampledFrom([]int64{-1, 400, 1 << 20}).Draw(rt, "soon"),
			drainEvery:         rapid.SampledFrom([]int{512, 4 << 10, 1 << 20}).Draw(rt, "drainEvery"),
			beforeHandedCommit: func() { time.Sleep(100 * time.Microsecond) },
			Fatal:              func(err error) { rt.Errorf("fatal: %v", err) }})
		if err != nil {
			rt.Fatal(err)
		}
		defer s.Close()
		if rapid.Bool().Draw(rt, "poll") {
			stop := pollNextExpiry(s)
			defer stop()
		}
		model := dueModel{}
		for step := range rapid.IntRange(1, 80).Draw(rt, "steps") {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0:
				mustNot(s.Sync())
			case 1, 2:
				at, limit := rapid.Int64Range(0, 12).Draw(rt, "t"), rapid.IntRange(0, 6).Draw(rt, "limit")
				got, err := s.Due(at, limit)
				if err != nil {
					rt.Fatal(err)
				}
				if want := model.due(at, limit); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
					rt.Fatalf("step %d: Due(%d, %d) = %q, want %q", step, at, limit, got, want)
				}
			default:
				changes := model.change(rt, uint64(step+1))
				if err := s.Commit(&fsm.Changes{Meta: fsm.Meta{Applied: uint64(step + 1)}, Records: changes}); err != nil {
					rt.Fatal(err)
				}
			}
			// Before this goroutine's NextExpiry, whose endPeek caps
			// expLow at the lowest buffered entry and would hide a raise
			// too far.
			if low := s.expLowNow(); model.below(low) != "" {
				rt.Fatalf("step %d: live entry %s below expLow", step, model.below(low))
			}
			if !rapid.Bool().Draw(rt, "next") {
				continue
			}
			next, ok, err := s.NextExpiry()
			if wantNext, wantOK := model.next(); err != nil || next != wantNext || ok != wantOK {
				rt.Fatalf("step %d: NextExpiry = %d %v %v, want %d %v", step, next, ok, err, wantNext, wantOK)
			}
		}
	})
}

// pollNextExpiry calls s.NextExpiry on another goroutine until stopped.
func pollNextExpiry(s *Store) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !done.Load() {
			s.NextExpiry()
		}
	})
	return func() { done.Store(true); wg.Wait() }
}

func (s *Store) expLowNow() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.expLow)
}

// dueModel is the records by key: due time and encoding.
type dueModel map[string]dueRec

type dueRec struct {
	due int64
	enc []byte
}

// change draws up to three changes of distinct keys, applies them to m
// and returns them.
func (m dueModel) change(rt *rapid.T, index uint64) []fsm.RecordChange {
	var changes []fsm.RecordChange
	used := map[string]bool{}
	for range rapid.IntRange(1, 3).Draw(rt, "n") {
		k := fmt.Sprintf("k%d", rapid.IntRange(0, 5).Draw(rt, "key"))
		if used[k] {
			continue
		}
		used[k] = true
		old, had := m[k]
		rc := fsm.RecordChange{Key: []byte(k), HadOld: had, OldExpiresAt: old.due}
		if had && rapid.IntRange(0, 3).Draw(rt, "delete") == 0 {
			delete(m, k)
		} else {
			due := rapid.Int64Range(1, 12).Draw(rt, "due")
			if had && rapid.Bool().Draw(rt, "keep") {
				due = old.due
			}
			rc.New, rc.NewExpiresAt = fmt.Appendf(nil, "%s@%d#%d", k, due, index), due
			m[k] = dueRec{due, rc.New}
		}
		changes = append(changes, rc)
	}
	return changes
}

// due returns at most limit records due at or before t, in (due, key)
// order.
func (m dueModel) due(t int64, limit int) [][]byte {
	var keys []string
	for k, r := range m {
		if r.due <= t {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := m[keys[i]], m[keys[j]]
		return a.due < b.due || a.due == b.due && keys[i] < keys[j]
	})
	var out [][]byte
	for _, k := range keys[:min(limit, len(keys))] {
		out = append(out, m[k].enc)
	}
	return out
}

// next returns the earliest due time.
func (m dueModel) next() (int64, bool) {
	var next int64
	found := false
	for _, r := range m {
		if !found || r.due < next {
			next, found = r.due, true
		}
	}
	return next, found
}

// below names a live entry below low, or returns "".
func (m dueModel) below(low []byte) string {
	for k, r := range m {
		if bytes.Compare(expiryKey(r.due, []byte(k)), low) < 0 {
			return fmt.Sprintf("(%d, %s)", r.due, k)
		}
	}
	return ""
}
