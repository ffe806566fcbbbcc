package checker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemnode/idemnode/jepsen/history"
)

// clean is a correct history over three keys: a completion replayed to
// later claims and reads, an extend and a release followed by a fresh
// grant, and a takeover after the lease ended that fences the old holder.
func clean() *builder {
	b := &builder{}
	// k1: won, read, in progress for another owner, completed, replayed.
	b.won(0, 10, "k1", "A", 10, 0)
	b.read(20, 30, history.FGet, nodeA, "k1", pending(10, 1, at(2), at(10)))
	b.claimOut(25, 35, "k1", "B", outInProgress, history.Event{Attempt: 1, LeaseExpiresAt: at(2), ExpiresAt: at(10)})
	b.write(40, 50, history.OK, history.FComplete, "k1", 10, outOK)
	b.claimOut(60, 70, "k1", "C", outCompleted, completed("k1", 10, 1, at(10)))
	b.read(60, 75, history.FWait, nodeA, "k1", withOutcome(completed("k1", 10, 1, at(10)), outCompleted))
	b.write(80, 90, history.OK, history.FComplete, "k1", 10, outOK)
	// k2: extend, release, a fresh grant.
	b.won(0, 10, "k2", "D", 11, 0.01)
	b.extendTo(20, 30, "k2", 11, at(2.5))
	b.write(40, 50, history.OK, history.FRelease, "k2", 11, outOK)
	b.won(60, 70, "k2", "E", 12, 1)
	b.read(70, 80, history.FGet, nodeA, "k2", pending(12, 1, at(3), at(11)))
	// k3: takeover after the lease ended; the old holder is fenced.
	b.won(0, 10, "k3", "F", 13, 0)
	b.takeover(100, 110, "k3", "G", 14, 3, 2, at(10))
	b.write(120, 130, history.OK, history.FComplete, "k3", 13, outFenced)
	b.write(140, 150, history.OK, history.FComplete, "k3", 14, outOK)
	for i, n := range []string{"n1", "n2", "n3"} {
		call := int64(1000 + 10*i)
		b.read(call, call+5, history.FFinalRead, n, "k1", completed("k1", 10, 1, at(10)))
		b.read(call, call+5, history.FFinalRead, n, "k2", pending(12, 1, at(3), at(11)))
		b.read(call, call+5, history.FFinalRead, n, "k3", completed("k3", 14, 2, at(10)))
		b.status(1100, n, 100, "d1", at(3.5))
	}
	return b
}

func withOutcome(e history.Event, outcome string) history.Event {
	e.Outcome = outcome
	return e
}

func TestCleanHistoryPasses(t *testing.T) {
	r := check(t, clean(), Options{})
	if !r.OK() || len(r.Warnings) > 0 {
		t.Fatalf("clean history flagged:\n%s", r.Summary())
	}
	if r.Counts.LinearizableKeys != 3 || r.Counts.Keys != 3 {
		t.Fatalf("counts = %+v, want 3 linearizable keys", r.Counts)
	}
	if !strings.HasPrefix(r.Summary(), "verdict: VALID") {
		t.Fatalf("summary:\n%s", r.Summary())
	}
}

func TestTwoOwnersWonConcurrently(t *testing.T) {
	b := &builder{}
	b.won(0, 10, "k", "A", 10, 0)
	b.won(5, 15, "k", "B", 11, 0.1) // fresh grant while A's record lives
	wantKinds(t, check(t, b, Options{}), KindLeaseViolation, KindEarlyRegrant, KindNonLinearizable)
}

func TestTakeoverBeforeLeaseEnded(t *testing.T) {
	b := &builder{}
	b.won(0, 10, "k", "A", 10, 0)
	b.extendTo(20, 30, "k", 10, at(3)) // lease now ends at 3 s
	b.takeover(40, 50, "k", "B", 11, 2.5, 2, at(10))
	r := check(t, b, Options{})
	wantKinds(t, r, KindLeaseViolation, KindNonLinearizable)
}

func TestTwoCompletionsAccepted(t *testing.T) {
	b := &builder{}
	b.won(0, 10, "k", "A", 10, 0)
	b.write(20, 30, history.OK, history.FComplete, "k", 10, outOK)
	e := history.Event{F: history.FComplete, Key: "k", Token: 10, Body: "other", Outcome: outOK}
	b.add(40, 50, history.OK, e)   // a second body accepted for the token
	b.won(60, 70, "k", "B", 11, 5) // re-granted 5 s before the record expired
	b.write(80, 90, history.OK, history.FComplete, "k", 11, outOK)
	wantKinds(t, check(t, b, Options{}), KindConflictingCompletions, KindDoubleCompletion, KindEarlyRegrant, KindNonLinearizable)
}

func TestReadOfBytesNobodyCompleted(t *testing.T) {
	b := &builder{}
	b.won(0, 10, "k", "A", 10, 0)
	rec := completed("k", 10, 1, at(10))
	rec.RecBody = "forged"
	b.read(20, 30, history.FGet, nodeA, "k", rec)
	wantKinds(t, check(t, b, Options{}), KindPhantomRead, KindNonLinearizable)
}

func TestAcknowledgedCompletionLost(t *testing.T) {
	b := &builder{}
	b.won(0, 10, "k", "A", 10, 0)
	b.write(20, 30, history.OK, history.FComplete, "k", 10, outOK)
	b.read(1000, 1005, history.FFinalRead, "n1", "k", completed("k", 10, 1, at(10)))
	b.read(1000, 1005, history.FFinalRead, "n2", "k", absent())
	b.status(1100, "n1", 50, "d", at(1))
	b.status(1100, "n2", 50, "d", at(1))
	r := check(t, b, Options{})
	wantKinds(t, r, KindLostWrite)
	if r.Anomalies[0].Key != "k" || !strings.Contains(r.Anomalies[0].Explanation, "n2") {
		t.Fatalf("anomaly = %v", r.Anomalies[0])
	}
}

func TestExpiredCompletionIsNotLost(t *testing.T) {
	b := &builder{}
	b.won(0, 10, "k", "A", 10, 0)
	b.write(20, 30, history.OK, history.FComplete, "k", 10, outOK)
	b.read(1000, 1005, history.FFinalRead, "n1", "k", absent())
	b.status(1100, "n1", 50, "d", at(10)) // FSM time reached the expiry
	wantKinds(t, check(t, b, Options{}))
}

func TestStatusBeforeFinalReadsIsWarned(t *testing.T) {
	b := &builder{}
	b.won(0, 10, "k", "A", 10, 0)
	b.write(20, 30, history.OK, history.FComplete, "k", 10, outOK)
	b.status(900, "n1", 50, "d", at(1))
	b.read(1000, 1005, history.FFinalRead, "n1", "k", absent())
	r := check(t, b, Options{})
	wantKinds(t, r)
	if len(r.Warnings) != 1 || r.Warnings[0].Kind != KindLostWrite {
		t.Fatalf("warnings = %v", r.Warnings)
	}
}

func TestStaleReadAfterAcknowledgedCompletion(t *testing.T) {
	b := &builder{}
	b.won(0, 10, "k/1", "A", 10, 0)
	b.write(20, 30, history.OK, history.FComplete, "k/1", 10, outOK)
	b.read(40, 50, history.FGet, "n2", "k/1", pending(10, 1, at(2), at(10)))
	dir := t.TempDir()
	r := check(t, b, Options{VisualizeDir: dir})
	wantKinds(t, r, KindNonLinearizable, KindStaleRead)
	files, _ := filepath.Glob(filepath.Join(dir, "*.html"))
	if len(files) != 1 {
		t.Fatalf("visualisations = %v, want one", files)
	}
	if data, err := os.ReadFile(files[0]); err != nil || len(data) < 1000 {
		t.Fatalf("visualisation %s: %d bytes, %v", files[0], len(data), err)
	}
	if ev := r.Anomalies[0].Events; len(ev) != 2 || ev[0].F != history.FGet || r.Anomalies[0].Kind != KindNonLinearizable {
		t.Fatalf("stuck events = %+v, want the get", ev)
	}
}

func TestCompleteWithSupersededToken(t *testing.T) {
	b := &builder{}
	b.won(0, 10, "k", "A", 10, 0)
	b.takeover(100, 110, "k", "B", 11, 3, 2, at(10))
	b.write(120, 130, history.OK, history.FComplete, "k", 10, outOK) // must be FENCED
	wantKinds(t, check(t, b, Options{}), KindFencing, KindNonLinearizable)
}

func TestDigestsDiffer(t *testing.T) {
	b := &builder{}
	b.status(100, "n1", 50, "d1", at(1))
	b.status(100, "n2", 50, "d2", at(1))
	wantKinds(t, check(t, b, Options{}), KindDigestMismatch)
	b.status(100, "n3", 49, "d1", at(1))
	wantKinds(t, check(t, b, Options{}), KindDigestMismatch, KindNotConverged)
}

func TestSmallAnomalies(t *testing.T) {
	b := &builder{}
	b.won(0, 10, "dup", "A", 10, 0)
	b.won(20, 30, "dup", "B", 10, 0)
	wantKinds(t, check(t, b, Options{}), KindDuplicateWinner, KindNonLinearizable)

	b = &builder{}
	b.won(0, 10, "back", "A", 10, 20)
	b.write(20, 30, history.OK, history.FRelease, "back", 10, outOK)
	b.won(40, 50, "back", "B", 11, 5) // released, but FSM time went back
	wantKinds(t, check(t, b, Options{}), KindTimeRegression, KindNonLinearizable)

	b = &builder{}
	b.won(0, 10, "mm", "A", 10, 0)
	b.claimOut(20, 30, "mm", "B", outMismatch, history.Event{})
	wantKinds(t, check(t, b, Options{}), KindClaimMismatch, KindNonLinearizable)
}

// Indeterminate operations are accepted whether they happened or not.
func TestIndeterminateEitherWay(t *testing.T) {
	b := &builder{}
	// Claims that happened (a read sees the grant) and that did not.
	b.claimInfo(0, "happened", "A")
	b.read(100, 110, history.FGet, nodeA, "happened", pending(77, 1, at(1)+tLease, at(1)+tTTL))
	b.claimOut(120, 130, "happened", "B", outInProgress, history.Event{Attempt: 1, LeaseExpiresAt: at(1) + tLease, ExpiresAt: at(1) + tTTL})
	b.claimInfo(0, "lost", "C")
	b.read(100, 110, history.FGet, nodeA, "lost", absent())
	b.won(120, 130, "lost", "D", 78, 1)
	// Completes that happened and that did not.
	b.won(0, 10, "c1", "E", 80, 0)
	b.write(20, 30, history.Info, history.FComplete, "c1", 80, "")
	b.read(40, 50, history.FGet, nodeA, "c1", completed("c1", 80, 1, at(10)))
	b.won(0, 10, "c2", "F", 81, 0)
	b.write(20, 30, history.Info, history.FComplete, "c2", 81, "")
	b.read(40, 50, history.FGet, nodeA, "c2", pending(81, 1, at(2), at(10)))
	b.write(60, 70, history.OK, history.FComplete, "c2", 81, outOK)
	// An operation still open when the history ends.
	b.won(0, 10, "open", "G", 82, 0)
	b.write(20, -1, history.Info, history.FRelease, "open", 82, "")
	b.read(40, 50, history.FGet, nodeA, "open", absent())
	r := check(t, b, Options{})
	if !r.OK() {
		t.Fatalf("indeterminate operations flagged:\n%s", r.Summary())
	}
}

// A request the server applied twice while retrying: the claim's first
// application won, its lease ran out, another owner took over, and the
// retry answered IN_PROGRESS; a release deleted the record, another owner
// won, and the retried release was FENCED.
func TestRetriedRequestsAreAccepted(t *testing.T) {
	b := &builder{}
	b.claimOut(0, 300, "k", "A", outInProgress, history.Event{Attempt: 2, LeaseExpiresAt: at(5), ExpiresAt: at(10)})
	b.takeover(100, 110, "k", "B", 11, 3, 2, at(10))
	b.won(0, 10, "r", "C", 20, 0)
	b.write(20, 300, history.OK, history.FRelease, "r", 20, outFenced)
	b.won(100, 110, "r", "D", 21, 1)
	r := check(t, b, Options{})
	if !r.OK() {
		t.Fatalf("retried requests flagged:\n%s", r.Summary())
	}
}

func TestAvailability(t *testing.T) {
	b := &builder{}
	b.won(0, 10, "k1", "A", 10, 0)
	b.add(150, 160, history.Info, claimEv("k2", "B"))
	b.won(300, 1300, "k3", "C", 12, 1)
	b.won(1500, 1510, "k4", "D", 13, 1.5)
	faults := []history.Fault{
		{Time: 100 * ms, Name: "kill-leader", Phase: history.FaultStart},
		{Time: 1000 * ms, Name: "kill-leader", Phase: history.FaultEnd},
	}
	r := Check(b.history(), faults, Options{})
	a := r.Availability
	if len(a.Phases) != 3 {
		t.Fatalf("phases = %+v", a.Phases)
	}
	if p := a.Phases[1]; p.Ops != 1 || p.OK != 0 || p.SuccessRate() != 0 {
		t.Fatalf("during = %+v", p)
	}
	if p := a.Phases[2]; p.Ops != 2 || p.OK != 2 {
		t.Fatalf("after = %+v", p)
	}
	if len(a.Recoveries) != 1 || !a.Recoveries[0].Found || a.Recoveries[0].FirstWrite.Milliseconds() != 1200 {
		t.Fatalf("recoveries = %+v", a.Recoveries)
	}
	if s := r.Summary(); !strings.Contains(s, "kill-leader #1") {
		t.Fatalf("summary:\n%s", s)
	}
}
