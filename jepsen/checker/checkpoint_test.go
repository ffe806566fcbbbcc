package checker

import (
	"testing"

	"github.com/idemnode/idemnode/jepsen/history"
)

// TestCheckpointWithSupersededToken: a recovery point is fenced like a
// completion: one stored by a token another grant had superseded is caught.
func TestCheckpointWithSupersededToken(t *testing.T) {
	b := &builder{}
	b.won(0, 10, "k", "A", 10, 0)
	b.takeover(100, 110, "k", "B", 11, 3, 2, at(10))
	b.checkpointed(120, 130, "k", 10, "by A", outOK) // must be FENCED
	wantKinds(t, check(t, b, Options{}), KindFencing, KindNonLinearizable)
}

// takeoverWith claims key as owner B, taking it over at FSM time T with
// token 11 and attempt 2, resuming from point.
func takeoverWith(b *builder, call, ret int64, T float64, point string) {
	e := claimEv("k", "B")
	e.Outcome, e.RecToken, e.Attempt, e.RecPoint = outWon, 11, 2, point
	e.LeaseExpiresAt, e.ExpiresAt = at(T)+tLease, at(0)+tTTL
	b.add(call, ret, history.OK, e)
}

// TestReleaseWithCheckpointIsTakenOverAtOnce: a release that keeps the
// record for its recovery point lets the next claim take it over before
// the released lease would have ended, resuming from the point: valid.
// The takeover must carry the point, and the releaser is fenced.
func TestReleaseWithCheckpointIsTakenOverAtOnce(t *testing.T) {
	history := func(point string) *builder {
		b := &builder{}
		b.won(0, 10, "k", "A", 10, 0)
		b.checkpointed(20, 30, "k", 10, "by A", outOK)
		b.write(40, 50, history.OK, history.FRelease, "k", 10, outOK)
		takeoverWith(b, 60, 70, 0.5, point) // A's lease would have ended at 2 s
		return b
	}
	wantKinds(t, check(t, history("charged=by A"), Options{}))
	wantKinds(t, check(t, history(""), Options{}), KindNonLinearizable)

	b := history("charged=by A")
	b.checkpointed(80, 90, "k", 10, "by A again", outOK) // the releaser: must be FENCED
	wantKinds(t, check(t, b, Options{}), KindFencing, KindNonLinearizable)
}

// TestCheckpointMismatch: the same point with other data is refused, and
// answering OK to it is caught.
func TestCheckpointMismatch(t *testing.T) {
	b := &builder{}
	b.won(0, 10, "k", "A", 10, 0)
	b.checkpointed(20, 30, "k", 10, "one", outOK)
	b.checkpointed(40, 50, "k", 10, "two", outMismatch)
	b.checkpointed(60, 70, "k", 10, "one", outOK)
	wantKinds(t, check(t, b, Options{}))
	b.checkpointed(80, 90, "k", 10, "three", outOK) // must be MISMATCH
	wantKinds(t, check(t, b, Options{}), KindNonLinearizable)
}
