package fsm

import "bytes"

// The handlers below implement the outcome tables of docs/API.md. Each runs
// with FSM time already advanced to the command's Now, reads and writes only
// t, and returns its result: no clock, no randomness, no map iteration.

// applyClaim decides a claim; token is what the claim holds if it wins.
func (t *tx) applyClaim(c *Command, token uint64) Result {
	now := t.meta.Now
	r, ok, tomb := t.at(c.Key)
	if tomb {
		// The operation ran, or may have, and its response is gone: a late
		// retry must not run it again.
		if !bytes.Equal(r.Fingerprint, c.Fingerprint) {
			return Result{Outcome: OutcomeMismatch}
		}
		return Result{Outcome: OutcomeExpired, Record: tombstoneOf(r)}
	}
	switch {
	case !ok:
		key, owner := joinKey(c.Key, c.Owner)
		won := &Record{
			RecordKey:      key,
			State:          StatePending,
			Fingerprint:    c.Fingerprint,
			Owner:          owner,
			Token:          token,
			Attempt:        1,
			LeaseExpiresAt: now + c.Lease,
			CreatedAt:      now,
			ExpiresAt:      max(now+c.TTL, now+c.Lease),
			TombstoneFor:   tombstoneTime(c),
			Watched:        watchesAbandon(c),
		}
		if q := t.admit(c.Quota, won); q != QuotaNone {
			return Result{Outcome: OutcomeQuotaExceeded, Exceeded: q}
		}
		t.put(won)
		return Result{Outcome: OutcomeWon, Record: won}
	case !bytes.Equal(r.Fingerprint, c.Fingerprint):
		return Result{Outcome: OutcomeMismatch}
	case r.State == StateCompleted:
		return Result{Outcome: OutcomeCompleted, Record: r}
	case r.Owner != "" && r.Owner == c.Owner:
		return Result{Outcome: OutcomeWon, Record: r}
	case r.LeaseExpiresAt > now:
		return Result{Outcome: OutcomeInProgress, Record: r}
	}
	// The holder's lease ran out: the claim takes the record over with a new,
	// larger token, which fences every call the old holder still makes.
	taken := *r
	taken.Owner = c.Owner
	taken.Token = token
	taken.Attempt = r.Attempt + 1
	taken.LeaseExpiresAt = now + c.Lease
	taken.ExpiresAt = max(r.ExpiresAt, taken.LeaseExpiresAt)
	taken.TombstoneFor = tombstoneTime(c)
	taken.Watched = r.Watched || watchesAbandon(c)
	t.put(&taken)
	return Result{Outcome: OutcomeWon, Record: &taken}
}

func (t *tx) applyComplete(c *Command) Result {
	r, ok, tomb := t.at(c.Key)
	switch {
	case tomb:
		return Result{Outcome: OutcomeExpired}
	case !ok:
		return Result{Outcome: OutcomeNotFound}
	case r.Token != c.Token || released(r):
		return Result{Outcome: OutcomeFenced}
	case r.State == StateCompleted && responsesEqual(r.Response, c.Response):
		return Result{Outcome: OutcomeOK, Record: r}
	case r.State == StateCompleted:
		// The same holder completing again with other bytes: the first
		// completion stands, and nothing of it is revealed.
		return Result{Outcome: OutcomeMismatch}
	}
	done := *r
	done.State = StateCompleted
	done.CompletedAt = t.meta.Now
	done.LeaseExpiresAt = 0
	done.Checkpoint = nil // the operation is done: nothing is left to resume
	done.TombstoneFor = tombstoneTime(c)
	done.Response = c.Response
	if done.Response == nil {
		done.Response = &Response{}
	}
	if q := t.admit(c.Quota, &done); q != QuotaNone {
		return Result{Outcome: OutcomeQuotaExceeded, Exceeded: q} // the record stays PENDING
	}
	t.put(&done)
	return Result{Outcome: OutcomeOK, Record: &done}
}

// applyRelease deletes the holder's record, so the next claim runs the
// operation again. A record with a recovery point is kept instead, given
// up: its lease ends now and it has no owner, so the token that released
// it is fenced (its late Extend cannot take the lease back) and the next
// claim takes it over at once and resumes after the point. The steps
// before the point are done (a card charged): running them again is what
// the point is for.
func (t *tx) applyRelease(c *Command) Result {
	r, answer, ok := t.held(c, OutcomeOK) // absent: released already
	switch {
	case !ok:
		return answer
	case r.Checkpoint != nil:
		given := *r
		given.Owner = ""
		given.LeaseExpiresAt = min(r.LeaseExpiresAt, t.meta.Now)
		t.put(&given)
		return Result{Outcome: OutcomeOK}
	}
	t.remove(c.Key)
	return Result{Outcome: OutcomeOK}
}

// released reports whether a PENDING record was given up by a release that
// kept it for its recovery point: it has no owner.
func released(r *Record) bool { return r.State == StatePending && r.Owner == "" }

// held returns the PENDING record c's token holds, or the answer when it
// holds none: EXPIRED on a tombstone, absent when no record is live, OK to
// a retried release of a record the token gave up, and FENCED when
// another token holds it, it is completed, or it was released.
func (t *tx) held(c *Command, absent Outcome) (*Record, Result, bool) {
	r, ok, tomb := t.at(c.Key)
	switch {
	case tomb:
		return nil, Result{Outcome: OutcomeExpired}, false
	case !ok:
		return nil, Result{Outcome: absent}, false
	case released(r) && r.Token == c.Token && c.Type == TypeRelease:
		return nil, Result{Outcome: OutcomeOK}, false // a retried release
	case r.Token != c.Token || r.State != StatePending || released(r):
		return nil, Result{Outcome: OutcomeFenced}, false
	}
	return r, Result{}, true
}

func (t *tx) applyExtend(c *Command) Result {
	r, answer, ok := t.held(c, OutcomeNotFound)
	if !ok {
		return answer
	}
	// The holder still owns the record even if its lease lapsed, as long as
	// nobody took it over: the token check above is what fences.
	ext := *r
	ext.LeaseExpiresAt = max(r.LeaseExpiresAt, t.meta.Now+c.Lease)
	ext.ExpiresAt = max(r.ExpiresAt, ext.LeaseExpiresAt)
	t.put(&ext)
	return Result{Outcome: OutcomeOK, Record: &ext}
}

// applyCheckpoint stores the holder's recovery point. Like Complete it is
// fenced by the token, and a retry of the same point with the same data is
// OK; the same point with other data is a MISMATCH (the step is recorded as
// done with what it produced), and another point replaces the previous one.
func (t *tx) applyCheckpoint(c *Command) Result {
	cp := c.Checkpoint
	if cp == nil {
		cp = &Checkpoint{} // as it decodes
	}
	r, answer, ok := t.held(c, OutcomeNotFound)
	switch {
	case !ok:
		return answer
	case r.Checkpoint != nil && r.Checkpoint.Point == cp.Point && bytes.Equal(r.Checkpoint.Data, cp.Data):
		return Result{Outcome: OutcomeOK, Record: r}
	case r.Checkpoint != nil && r.Checkpoint.Point == cp.Point:
		return Result{Outcome: OutcomeMismatch}
	}
	next := *r
	next.Checkpoint = &Checkpoint{Point: cp.Point, Data: cp.Data}
	if q := t.admit(c.Quota, &next); q != QuotaNone {
		return Result{Outcome: OutcomeQuotaExceeded, Exceeded: q}
	}
	t.put(&next)
	return Result{Outcome: OutcomeOK, Record: &next}
}

// applyExpire acts on up to Limit records that are due, oldest first: one
// whose lease lapsed while it awaits abandonment is marked abandoned; one
// past its TTL that has a tombstone time is cut down to its tombstone, any
// other is deleted. Then it prunes up to Limit events of the feed. The
// bound keeps one entry from stalling the log however much has expired.
func (t *tx) applyExpire(c *Command) Result {
	limit := int(min(c.Limit, maxExpireLimit))
	due := t.due(limit)
	res := Result{Outcome: OutcomeOK}
	for _, r := range due {
		if r.awaitsAbandonment() {
			r = t.markAbandoned(r) // its lease ended: dueAt is the lease end
			res.Abandoned++
			if r.ExpiresAt > t.meta.Now {
				continue
			}
		}
		if !r.Tombstone && r.deleteAt() > t.meta.Now {
			t.put(tombstoneOf(r))
			res.Tombstoned++
		} else {
			t.remove(r.RecordKey)
		}
		res.Expired++
		t.changed = append(t.changed, r.RecordKey)
	}
	t.pruneEvents(limit)
	return res
}

// maxExpireLimit bounds what one Expire deletes whatever its Limit says, so
// one entry's write set stays small; the leader proposes far less (a few
// thousand), and the rest waits for the next entry.
const maxExpireLimit = 1 << 20

func responsesEqual(a, b *Response) bool {
	if a == nil || b == nil {
		return (a == nil || isEmpty(a)) && (b == nil || isEmpty(b))
	}
	if a.Status != b.Status || !bytes.Equal(a.Body, b.Body) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i] != b.Headers[i] {
			return false
		}
	}
	return true
}

func isEmpty(r *Response) bool { return r.Status == 0 && len(r.Headers) == 0 && len(r.Body) == 0 }
