// Package checker decides whether a jepsen history of idemnode is correct.
//
// Check reads the parsed history (history.jsonl) and the nemesis log
// (nemesis.jsonl) and runs six checkers, each reporting anomalies of stable
// kinds (the Kind constants below):
//
//   - one-winner: one owner per token; grant times follow token order; a
//     later grant of a key is justified by the end of the earlier lease, by
//     expiry, or by a release.
//   - one-completion: one body per token; two completed tokens are separated
//     by the expiry of the first record; every read returns the bytes of a
//     completion that may have happened.
//   - lost-write: acknowledged completions still alive at the end are on every
//     node's final read; final digests agree; nodes ended at one index.
//   - fencing: no complete or extend with a superseded token is accepted;
//     no operation sees an older version of a record than one already shown
//     before it began (stale-read).
//   - linearizability: per key, porcupine with a nondeterministic model of
//     the record (see model.go).
//   - feed: the watchers of the abandoned feed were handed every event
//     once, in order, the same under one number on every node, with
//     resolutions that settle an earlier abandonment once (feed.go).
//
// Every checker is sound by construction: it flags only what no correct
// execution of the state machine (fsm/apply.go) can produce, and where the
// history lacks information (indeterminate operations, unknown FSM times,
// requests the server may have applied more than once while retrying) it
// assumes whatever makes the history valid. Availability figures are
// reported beside the anomalies and never fail a run.
package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/idemnode/idemnode/jepsen/history"
)

// Anomaly kinds. The names are stable: scripts may match on them.
const (
	// KindDuplicateWinner: two owners were told WON with one token.
	KindDuplicateWinner = "duplicate-winner"
	// KindTimeRegression: a grant with a larger token has an earlier FSM time.
	KindTimeRegression = "fsm-time-regression"
	// KindLeaseViolation: a key was granted again before the lease of an
	// earlier, unreleased grant had ended (two live holders).
	KindLeaseViolation = "lease-violation"
	// KindEarlyRegrant: a fresh grant (attempt 1) while an earlier record,
	// never released, had not expired.
	KindEarlyRegrant = "early-regrant"
	// KindClaimMismatch: a claim was answered MISMATCH although every claim
	// of a key carries the same fingerprint.
	KindClaimMismatch = "claim-mismatch"
	// KindConflictingCompletions: two different bodies were accepted for one token.
	KindConflictingCompletions = "conflicting-completions"
	// KindDoubleCompletion: two tokens completed within one TTL lifetime.
	KindDoubleCompletion = "double-completion"
	// KindPhantomRead: a read returned bytes that no completion stored.
	KindPhantomRead = "phantom-read"
	// KindLostWrite: an acknowledged, unexpired completion is missing from a
	// node's final read.
	KindLostWrite = "lost-write"
	// KindDigestMismatch: nodes at the same applied index hold different states.
	KindDigestMismatch = "digest-mismatch"
	// KindNotConverged: nodes ended at different applied indexes.
	KindNotConverged = "not-converged"
	// KindFencing: a complete, extend or checkpoint was accepted with a token older than
	// one already granted to a client before the call began.
	KindFencing = "fencing"
	// KindStaleRead: an operation saw an older version of the record than
	// one an operation that returned before it was invoked had shown.
	KindStaleRead = "stale-read"
	// KindNonLinearizable: porcupine found no linearization of the key.
	KindNonLinearizable = "non-linearizable"
	// KindLinearizabilityTimeout is a warning, not an anomaly: porcupine
	// gave up on the key within Options.LinearizabilityTimeout.
	KindLinearizabilityTimeout = "linearizability-timeout"
)

// Options tunes Check.
type Options struct {
	// VisualizeDir, when set, receives a porcupine HTML visualisation
	// (<key>.html) for every key that is not linearizable.
	VisualizeDir string
	// LinearizabilityTimeout bounds porcupine per key (default 10 s).
	LinearizabilityTimeout time.Duration
}

// Anomaly is one violation found in the history.
type Anomaly struct {
	// Kind is one of the Kind constants.
	Kind string
	// Key is the idempotency key involved ("" for cluster-wide anomalies).
	Key string
	// Events are the history events that show the violation.
	Events []history.Event
	// Explanation is one line saying what is wrong.
	Explanation string
}

// String renders the anomaly on one line.
func (a Anomaly) String() string {
	return fmt.Sprintf("[%s] key=%q: %s (%d events)", a.Kind, a.Key, a.Explanation, len(a.Events))
}

// Report is the result of Check.
type Report struct {
	// Anomalies fail the run.
	Anomalies []Anomaly
	// Warnings (linearizability timeouts, checks that could not run) do not.
	Warnings []Anomaly
	// Availability is reported, never failing.
	Availability Availability
	// Counts describes the size of the history.
	Counts Counts
}

// Counts summarises the history.
type Counts struct {
	Events, Ops, Keys int
	// ByType counts completed client operations by event type (ok, fail, info).
	ByType map[string]int
	// ByFunction counts client operations by Event.F.
	ByFunction map[string]int
	// LinearizableKeys counts keys porcupine proved linearizable.
	LinearizableKeys int
	// Faults counts fault starts.
	Faults int
	// FeedEvents counts the abandoned feed's events handed to watchers,
	// FeedPruned the cursors refused as pruned.
	FeedEvents, FeedPruned int
}

// OK reports whether no anomaly was found.
func (r Report) OK() bool { return len(r.Anomalies) == 0 }

// Check runs every checker over the history and the faults.
func Check(events []history.Event, faults []history.Fault, opts Options) Report {
	if opts.LinearizabilityTimeout <= 0 {
		opts.LinearizabilityTimeout = 10 * time.Second
	}
	h := newParsed(events)
	var rep Report
	add := func(as []Anomaly) { rep.Anomalies = append(rep.Anomalies, as...) }
	for _, key := range h.keys {
		k := h.byKey[key]
		add(checkWinners(k))
		add(checkFencing(k))
		add(checkStaleReads(k))
		add(checkCompletions(k))
	}
	add(checkFeed(events, h))
	lost, warn := checkFinal(h)
	add(lost)
	rep.Warnings = append(rep.Warnings, warn...)
	lin, warn, okKeys := checkLinearizable(h, opts)
	add(lin)
	rep.Warnings = append(rep.Warnings, warn...)
	sort.SliceStable(rep.Anomalies, func(i, j int) bool {
		a, b := rep.Anomalies[i], rep.Anomalies[j]
		return a.Kind < b.Kind || a.Kind == b.Kind && a.Key < b.Key
	})
	rep.Availability = availability(h, faults)
	rep.Counts = h.counts(len(events), faults)
	for _, e := range events {
		switch e.F {
		case history.FFeed:
			rep.Counts.FeedEvents++
		case history.FFeedPruned:
			rep.Counts.FeedPruned++
		}
	}
	rep.Counts.LinearizableKeys = okKeys
	return rep
}

// Summary renders the report as text for summary.txt.
func (r Report) Summary() string {
	var b strings.Builder
	verdict := "VALID"
	if !r.OK() {
		verdict = "INVALID"
	}
	fmt.Fprintf(&b, "verdict: %s (%d anomalies, %d warnings)\n", verdict, len(r.Anomalies), len(r.Warnings))
	c := r.Counts
	fmt.Fprintf(&b, "history: %d events, %d operations, %d keys, %d faults; %d keys linearizable\n",
		c.Events, c.Ops, c.Keys, c.Faults, c.LinearizableKeys)
	fmt.Fprintf(&b, "outcomes: %s\n", formatCounts(c.ByType))
	fmt.Fprintf(&b, "operations: %s\n", formatCounts(c.ByFunction))
	fmt.Fprintf(&b, "abandoned feed: %d events handed to watchers, %d cursors refused as pruned\n", c.FeedEvents, c.FeedPruned)
	writeGrouped(&b, "anomalies", r.Anomalies)
	writeGrouped(&b, "warnings", r.Warnings)
	r.Availability.write(&b)
	return b.String()
}

// writeGrouped lists anomalies by kind, at most 20 lines per kind.
func writeGrouped(b *strings.Builder, title string, as []Anomaly) {
	if len(as) == 0 {
		return
	}
	byKind := map[string][]Anomaly{}
	var kinds []string
	for _, a := range as {
		if byKind[a.Kind] == nil {
			kinds = append(kinds, a.Kind)
		}
		byKind[a.Kind] = append(byKind[a.Kind], a)
	}
	sort.Strings(kinds)
	fmt.Fprintf(b, "%s:\n", title)
	for _, k := range kinds {
		fmt.Fprintf(b, "  %s: %d\n", k, len(byKind[k]))
		for i, a := range byKind[k] {
			if i == 20 {
				fmt.Fprintf(b, "    … %d more\n", len(byKind[k])-i)
				break
			}
			fmt.Fprintf(b, "    key=%q: %s\n", a.Key, a.Explanation)
		}
	}
}

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}
