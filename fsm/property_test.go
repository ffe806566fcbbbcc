package fsm

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// The small universe random command sequences draw from, so that keys,
// owners and fingerprints collide often.
var (
	propKeys = []RecordKey{
		{Tenant: "t1", Scope: "POST /a", Key: "k1"}, {Tenant: "t1", Scope: "POST /a", Key: "k2"},
		{Tenant: "t1", Scope: "POST /b", Key: "k1"}, {Tenant: "t2", Scope: "POST /a", Key: "k1"},
	}
	propOwners  = []string{"o1", "o2", "o3"}
	propFPs     = [][]byte{[]byte("f1"), []byte("f1"), []byte("f1"), []byte("f2")}
	propLeases  = []int64{1 * sec, 30 * sec, 90 * sec}
	propTTLs    = []int64{60 * sec, 300 * sec, 0}
	propBodies  = [][]byte{nil, {}, []byte("ok"), []byte("declined")}
	propHeaders = [][]Header{nil, {}, {{"A", "1"}}, {{"A", "1"}, {"A", "2"}}}
	propPoints  = []string{"charged", "charged", "receipt-sent"}
	// Most commands of a run carry the same tombstone time, as from one
	// leader; some none, some another.
	propTombstones = []int64{0, 120 * sec, 120 * sec, 30 * sec}
)

// cmdGen draws commands whose Now wanders forward and sometimes back, and
// whose tokens are mostly ones the machine really issued.
type cmdGen struct {
	now    int64
	tokens []uint64
}

func (g *cmdGen) command(t *rapid.T, top bool) *Command {
	g.now += rapid.Int64Range(-20*sec, 60*sec).Draw(t, "dt")
	c := &Command{Now: g.now, Key: rapid.SampledFrom(propKeys).Draw(t, "key")}
	switch kind := rapid.IntRange(0, 10).Draw(t, "kind"); {
	case kind < 4:
		c.Type = TypeClaim
		c.Fingerprint = rapid.SampledFrom(propFPs).Draw(t, "fp")
		c.Owner = rapid.SampledFrom(propOwners).Draw(t, "owner")
		c.Lease = rapid.SampledFrom(propLeases).Draw(t, "lease")
		c.TTL = rapid.SampledFrom(propTTLs).Draw(t, "ttl")
		c.Tombstone = rapid.SampledFrom(propTombstones).Draw(t, "tombstone")
		c.WatchAbandon = rapid.IntRange(0, 3).Draw(t, "watch") > 0
	case kind < 6:
		c.Type, c.Token = TypeComplete, g.token(t)
		c.Tombstone = rapid.SampledFrom(propTombstones).Draw(t, "tombstone")
		if rapid.IntRange(0, 4).Draw(t, "nilResp") > 0 {
			c.Response = &Response{
				Status:  rapid.SampledFrom([]int32{200, 402}).Draw(t, "status"),
				Headers: rapid.SampledFrom(propHeaders).Draw(t, "headers"),
				Body:    rapid.SampledFrom(propBodies).Draw(t, "body"),
			}
		}
	case kind == 6:
		c.Type, c.Token = TypeRelease, g.token(t)
	case kind == 7:
		c.Type, c.Token = TypeExtend, g.token(t)
		c.Lease = rapid.SampledFrom(propLeases).Draw(t, "lease")
	case kind == 9:
		c.Type, c.Token = TypeCheckpoint, g.token(t)
		c.Checkpoint = &Checkpoint{Point: rapid.SampledFrom(propPoints).Draw(t, "point"),
			Data: rapid.SampledFrom(propBodies).Draw(t, "data")}
	case kind == 8 || !top:
		c = &Command{Type: TypeExpire, Now: g.now, Limit: uint32(rapid.IntRange(0, 3).Draw(t, "limit"))}
	default:
		c = &Command{Type: TypeBatch, Now: g.now}
		for range rapid.IntRange(0, 6).Draw(t, "batchLen") {
			c.Batch = append(c.Batch, g.command(t, false))
		}
	}
	return c
}

func (g *cmdGen) token(t *rapid.T) uint64 {
	if len(g.tokens) > 0 && rapid.IntRange(0, 4).Draw(t, "realToken") > 0 {
		return rapid.SampledFrom(g.tokens).Draw(t, "token")
	}
	return rapid.Uint64Range(0, 1<<20).Draw(t, "token")
}

func (g *cmdGen) learn(res Result) {
	if res.Outcome == OutcomeWon {
		g.tokens = append(g.tokens, res.Record.Token)
	}
	for _, sub := range res.Batch {
		g.learn(sub)
	}
}

// TestPropertyReplicasAgree applies one random log to two machines: a
// applies each entry on its own; b gets them through the codec, in groups
// of random size (as a follower catching up, or a restart replaying the
// log, applies them), with a snapshot/restore half way. Results must be
// equal entry by entry, and the state at the end.
func TestPropertyReplicasAgree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := &cmdGen{now: t0}
		a, b := NewMachine(), NewMachine()
		inv, feed := newSafety(), newFeedCheck()
		steps := rapid.IntRange(1, 150).Draw(t, "steps")
		snapAt := rapid.IntRange(0, steps).Draw(t, "snapAt")
		var index uint64
		var group []Entry
		var want []Result
		flush := func(at int) {
			got := b.ApplyEntries(group)
			for j := range got {
				if !sameResult(want[j], got[j]) {
					t.Fatalf("step %d, entry %d of a group of %d (%v at %d): results differ\n a %+v\n b %+v",
						at, j, len(group), group[j].Cmd.Type, group[j].Index, want[j], got[j])
				}
			}
			group, want = group[:0], want[:0]
		}
		for i := range steps {
			if i == snapAt {
				flush(i)
				b = restored(t, snapshotBytes(t, b))
				if a.Digest() != b.Digest() {
					t.Fatalf("step %d: digest changed by snapshot/restore", i)
				}
			}
			c := g.command(t, true)
			index += uint64(rapid.IntRange(1, 3).Draw(t, "gap"))
			before := inv.capture(a)
			ra := a.Apply(index, c)
			group, want = append(group, Entry{Index: index, Cmd: decoded(t, c)}), append(want, ra)
			if rapid.IntRange(0, 3).Draw(t, "flush") == 0 {
				flush(i)
			}
			if err := inv.check(c, ra, before, inv.capture(a), a.Now()); err != nil {
				t.Fatalf("step %d (%v at %d): %v", i, c.Type, index, err)
			}
			if err := feed.check(a, c, before, inv.capture(a)); err != nil {
				t.Fatalf("step %d (%v at %d): feed: %v", i, c.Type, index, err)
			}
			g.learn(ra)
		}
		flush(steps)
		if a.Digest() != b.Digest() || !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
			t.Fatalf("digests differ after %d steps", steps)
		}
	})
}

func decoded(t *rapid.T, c *Command) *Command {
	d, err := DecodeCommand(EncodeCommand(c))
	if err != nil {
		t.Fatalf("decode %v: %v", c.Type, err)
	}
	return d
}

// safety checks the guarantees of fsm/DESIGN.md ("Safety statements") between two consecutive
// states: a completed record never changes during its TTL lifetime (so at
// most one completion is recorded), a record's token never goes back,
// every newly issued token is larger than any issued before, and a
// recovery point changes only by a Checkpoint of the token that holds the
// record (fenced like a completion, and carried over by a takeover).
type safety struct{ maxToken uint64 }

func newSafety() *safety { return &safety{} }

func (s *safety) capture(m *Machine) map[RecordKey]*Record {
	out := make(map[RecordKey]*Record, len(propKeys))
	for _, k := range propKeys {
		if r, ok := stored(m, k); ok {
			out[k] = r
		}
	}
	return out
}

func (s *safety) check(c *Command, res Result, before, after map[RecordKey]*Record, now int64) error {
	// Tokens issued by this step (a batch may issue several) must all exceed
	// those seen before it.
	floor := s.maxToken
	for _, k := range propKeys {
		prev, cur := before[k], after[k]
		// A completed record stays until its tombstone ends (the same
		// lifetime, cut down or not): a late retry can never run it again.
		if prev != nil && prev.State == StateCompleted && now < prev.deleteAt() && (cur == nil || cur.CreatedAt != prev.CreatedAt) {
			return fmt.Errorf("completed record %q replaced or deleted before its tombstone ended at %d:\n%+v\n-> %+v", k.Key, prev.deleteAt(), prev, cur)
		}
		if cur != nil && cur.ExpiresAt <= now {
			cur = nil // past TTL: absent for every command
		}
		switch {
		// Time only grows, so a completed record live at the end of the step
		// was live throughout it: nothing may have touched it.
		case prev != nil && prev.State == StateCompleted && prev.ExpiresAt > now &&
			!bytes.Equal(recordBytes(prev), recordBytes(cur)):
			return fmt.Errorf("completed record %q changed within its lifetime:\n%+v\n-> %+v", k.Key, prev, cur)
		case cur == nil:
		case prev != nil && cur.Token == prev.Token:
			// A release that keeps the record for its recovery point drops
			// the owner: nobody holds it until the next claim.
			if (cur.Owner != prev.Owner && !released(cur)) || cur.Attempt != prev.Attempt || cur.CreatedAt != prev.CreatedAt {
				return fmt.Errorf("record %q changed holder without a new token", k.Key)
			}
		case cur.Token <= floor:
			return fmt.Errorf("record %q holds new token %d, not above %d", k.Key, cur.Token, floor)
		}
		if prev != nil && cur != nil && prev.CreatedAt == cur.CreatedAt && cur.State == StatePending &&
			!sameCheckpoint(prev.Checkpoint, cur.Checkpoint) && !checkpointedBy(c, k, holders(k, prev, res)) {
			return fmt.Errorf("recovery point of %q changed without a Checkpoint by a holder: %+v -> %+v",
				k.Key, prev.Checkpoint, cur.Checkpoint)
		}
		if cur != nil {
			s.maxToken = max(s.maxToken, cur.Token)
		}
	}
	return nil
}

func sameCheckpoint(a, b *Checkpoint) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Point == b.Point && bytes.Equal(a.Data, b.Data)
}

// holders are the tokens that held k during a step: before it, and every
// claim of k the step won (a batch may check a point in, then lose the
// record to a takeover that carries the point over).
func holders(k RecordKey, prev *Record, res Result) map[uint64]bool {
	out := map[uint64]bool{prev.Token: true}
	var walk func(Result)
	walk = func(r Result) {
		if r.Outcome == OutcomeWon && r.Record.RecordKey == k {
			out[r.Record.Token] = true
		}
		for _, sub := range r.Batch {
			walk(sub)
		}
	}
	walk(res)
	return out
}

// checkpointedBy reports whether c is, or a batch c holds, a Checkpoint of
// k by one of tokens.
func checkpointedBy(c *Command, k RecordKey, tokens map[uint64]bool) bool {
	if c == nil {
		return false
	}
	if c.Type == TypeCheckpoint && c.Key == k && tokens[c.Token] {
		return true
	}
	for _, sub := range c.Batch {
		if checkpointedBy(sub, k, tokens) {
			return true
		}
	}
	return false
}

// TestSafetyCheckerCatchesPlantedBugs shows the checker above can fail.
func TestSafetyCheckerCatchesPlantedBugs(t *testing.T) {
	k := propKeys[0]
	mk := func(edit func(r *Record)) map[RecordKey]*Record {
		r := &Record{RecordKey: k, State: StateCompleted, Token: tok(5), Attempt: 1, ExpiresAt: at(100),
			Response: resp(200, "first")}
		edit(r)
		return map[RecordKey]*Record{k: r}
	}
	fin := mk(func(*Record) {})
	planted := map[string]map[RecordKey]*Record{
		"second completion": mk(func(r *Record) { r.Response = resp(200, "second") }),
		"re-claimed":        mk(func(r *Record) { r.State, r.Token = StatePending, tok(9) }),
		"released":          {},
	}
	for name, after := range planted {
		if err := newSafety().check(nil, Result{}, fin, after, at(10)); err == nil {
			t.Errorf("%s: not caught", name)
		}
	}
	pending := mk(func(r *Record) { r.State, r.Response = StatePending, nil })
	s := &safety{maxToken: tok(5)}
	if err := s.check(nil, Result{}, pending, mk(func(r *Record) { r.State, r.Owner = StatePending, "thief" }), at(10)); err == nil {
		t.Error("holder changed without a new token: not caught")
	}
	if err := s.check(nil, Result{}, nil, mk(func(r *Record) { r.Token = tok(4) }), at(10)); err == nil {
		t.Error("token going back: not caught")
	}
	atStep := mk(func(r *Record) { r.State, r.Response, r.Checkpoint = StatePending, nil, &Checkpoint{Point: "charged"} })
	lost := mk(func(r *Record) { r.State, r.Response, r.Token, r.Owner = StatePending, nil, tok(9), "o2" })
	takeover := claim(k.Key, "o2", at(10))
	takeover.Key = k
	if err := newSafety().check(takeover, Result{Outcome: OutcomeWon, Record: lost[k]}, atStep, lost, at(10)); err == nil {
		t.Error("takeover that lost the recovery point: not caught")
	}
	stale := checkpoint(k.Key, tok(4), "charged", "", at(10))
	stale.Key = k
	if err := newSafety().check(stale, Result{Outcome: OutcomeOK}, pending, atStep, at(10)); err == nil {
		t.Error("recovery point stored by another token: not caught")
	}
	stale.Token = tok(5)
	if err := newSafety().check(stale, Result{Outcome: OutcomeOK}, pending, atStep, at(10)); err != nil {
		t.Errorf("the holder's checkpoint reported as %v", err)
	}
	if err := newSafety().check(nil, Result{}, fin, fin, at(10)); err != nil {
		t.Errorf("no change reported as %v", err)
	}
}

// TestPropertySnapshotRoundTrip: write, restore, write again gives the same
// bytes, digest, time and records.
func TestPropertySnapshotRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := &cmdGen{now: t0}
		m := NewMachine()
		for i := range rapid.IntRange(0, 80).Draw(t, "steps") {
			g.learn(m.Apply(uint64(i+1), g.command(t, true)))
		}
		snap := snapshotBytes(t, m)
		r := restored(t, snap)
		if again := snapshotBytes(t, r); !bytes.Equal(snap, again) {
			t.Fatalf("snapshot of the restored state differs (%d vs %d bytes)", len(snap), len(again))
		}
		if r.Digest() != m.Digest() || r.Now() != m.Now() || r.Len() != m.Len() {
			t.Fatalf("restored digest/time/len differ")
		}
		for _, k := range propKeys {
			x, _ := m.Get(k)
			y, _ := r.Get(k)
			if !bytes.Equal(recordBytes(x), recordBytes(y)) {
				t.Fatalf("record %v: %+v restored as %+v", k, x, y)
			}
		}
	})
}

// anyCommand draws a command with arbitrary values in the fields its type uses.
func anyCommand(t *rapid.T, top bool) *Command {
	types := []CommandType{TypeClaim, TypeComplete, TypeRelease, TypeExtend, TypeExpire, TypeCheckpoint}
	if top {
		types = append(types, TypeBatch)
	}
	c := &Command{Type: rapid.SampledFrom(types).Draw(t, "type"), Now: rapid.Int64().Draw(t, "now")}
	bytesGen := rapid.SliceOfN(rapid.Byte(), 0, 40)
	str := func(label string) string { return string(bytesGen.Draw(t, label)) }
	if c.Type != TypeExpire && c.Type != TypeBatch {
		c.Key = RecordKey{Tenant: str("tenant"), Scope: str("scope"), Key: str("key")}
	}
	switch c.Type {
	case TypeClaim:
		c.Fingerprint, c.Owner = bytesGen.Draw(t, "fp"), str("owner")
		c.Lease, c.TTL = rapid.Int64().Draw(t, "lease"), rapid.Int64().Draw(t, "ttl")
		c.Tombstone = rapid.Int64Min(0).Draw(t, "tombstone")
		c.WatchAbandon = rapid.Bool().Draw(t, "watch")
	case TypeComplete:
		c.Token = rapid.Uint64().Draw(t, "token")
		if rapid.Bool().Draw(t, "hasResp") {
			c.Response = &Response{Status: rapid.Int32().Draw(t, "status"), Body: bytesGen.Draw(t, "body")}
			for range rapid.IntRange(0, 3).Draw(t, "nHeaders") {
				c.Response.Headers = append(c.Response.Headers, Header{str("name"), str("value")})
			}
		}
	case TypeRelease:
		c.Token = rapid.Uint64().Draw(t, "token")
	case TypeExtend:
		c.Token, c.Lease = rapid.Uint64().Draw(t, "token"), rapid.Int64().Draw(t, "lease")
	case TypeExpire:
		c.Limit = rapid.Uint32().Draw(t, "limit")
	case TypeCheckpoint:
		c.Token = rapid.Uint64().Draw(t, "token")
		c.Checkpoint = &Checkpoint{Point: str("point"), Data: bytesGen.Draw(t, "data")}
	case TypeBatch:
		for range rapid.IntRange(0, 5).Draw(t, "batchLen") {
			c.Batch = append(c.Batch, anyCommand(t, false))
		}
	}
	return c
}

// normalise makes empty slices nil, the only difference a round trip may make.
func normalise(c *Command) *Command {
	if c == nil {
		return nil
	}
	n := *c
	if len(n.Fingerprint) == 0 {
		n.Fingerprint = nil
	}
	if n.Response != nil {
		r := *n.Response
		if len(r.Headers) == 0 {
			r.Headers = nil
		}
		if len(r.Body) == 0 {
			r.Body = nil
		}
		n.Response = &r
	}
	if n.Checkpoint != nil && len(n.Checkpoint.Data) == 0 {
		n.Checkpoint = &Checkpoint{Point: n.Checkpoint.Point}
	}
	n.Batch = nil
	for _, sub := range c.Batch {
		n.Batch = append(n.Batch, normalise(sub))
	}
	return &n
}

func TestPropertyCommandRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := anyCommand(t, true)
		b := EncodeCommand(c)
		if bound := 1 + commandSize(c) + commandCRCLen; len(b) > bound {
			t.Fatalf("%v encodes to %d bytes, over commandSize's bound %d: EncodeCommand reallocates", c.Type, len(b), bound)
		}
		d, err := DecodeCommand(b)
		if err != nil {
			t.Fatalf("decode %v: %v", c.Type, err)
		}
		if !reflect.DeepEqual(normalise(c), normalise(d)) {
			t.Fatalf("round trip\n got %+v\nwant %+v", d, c)
		}
		if !bytes.Equal(EncodeCommand(d), b) {
			t.Fatal("re-encoding the decoded command gives other bytes")
		}
	})
}

// TestPropertyInsertionOrderIrrelevant stores one set of records in two
// different orders, a commit each: digests and snapshot bytes must not
// differ (the Sum adds up in any order, and views walk in key order).
func TestPropertyInsertionOrderIrrelevant(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var recs []*Record
		for i := range rapid.IntRange(1, 40).Draw(t, "keys") {
			r := rec(func(r *Record) {
				r.RecordKey = RecordKey{Tenant: fmt.Sprintf("t%d", i%3), Scope: "POST /x", Key: fmt.Sprintf("key-%02d", i)}
				r.ExpiresAt = at(rapid.Int64Range(60, 70).Draw(t, "expires"))
			})
			recs = append(recs, r)
		}
		build := func(label string) *Machine {
			m := NewMachine()
			for i, r := range rapid.Permutation(recs).Draw(t, label) {
				commitRecord(m, uint64(i+1), r)
			}
			return m
		}
		a, b := build("orderA"), build("orderB")
		if a.Digest() != b.Digest() || !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
			t.Fatal("insertion order changed the state")
		}
	})
}

// commitRecord stores r in m as the log entry at index would, without a command.
func commitRecord(m *Machine, index uint64, r *Record) {
	tx := m.begin()
	tx.meta.Applied = index
	tx.put(r)
	m.commit(tx)
}
