// Package history is the record of a jepsen run: every operation's
// invocation and completion, one JSON object per line in history.jsonl.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
)

// Event types.
const (
	// Invoke starts an operation.
	Invoke = "invoke"
	// OK: the server answered (any outcome, including refusals).
	OK = "ok"
	// Fail: the operation certainly did not happen (a read that errored,
	// or a request refused before it reached the state machine).
	Fail = "fail"
	// Info: indeterminate — the operation may or may not have happened
	// (timeout, connection lost, leadership lost while committing).
	Info = "info"
)

// Operation names (Event.F).
const (
	FClaim    = "claim"
	FComplete = "complete"
	FRelease  = "release"
	FExtend   = "extend"
	// FCheckpoint records a recovery point (Point, Body: its data).
	FCheckpoint = "checkpoint"
	FGet        = "get"  // linearizable read
	FWait       = "wait" // linearizable wait with a short timeout
	// FFinalRead is a stale read of one key on one node after healing and
	// convergence; every node is read.
	FFinalRead = "final-read"
	// FFinalStatus is one node's status after convergence: AppliedIndex,
	// Digest and FSMTime are set.
	FFinalStatus = "final-status"
	// FFeed is one event of the abandoned feed as a watcher was handed it
	// (Seq, FeedKind, Resolution, Resolves, Key, RecToken, Attempt,
	// RecPoint, LeaseExpiresAt, FSMTime: the event's time). A watcher's
	// events are its Process's lines in order.
	FFeed = "feed"
	// FFeedPruned: the node refused the watcher's cursor (Seq) because the
	// events after it were pruned; the watcher starts again from the oldest
	// event kept, so a gap before its next event is expected.
	FFeedPruned = "feed-pruned"
)

// Event is one line of history.jsonl. An invocation and its completion
// share Process and Op. Times are monotonic nanoseconds since the run began
// (Time); record times (LeaseExpiresAt, ExpiresAt) are FSM time, Unix ns.
type Event struct {
	Type    string `json:"type"`
	Process int    `json:"process"`
	Op      int64  `json:"op"`
	F       string `json:"f"`
	Key     string `json:"key"`
	Node    string `json:"node"`
	Time    int64  `json:"time"`

	// Inputs (on the invocation, repeated on the completion).
	Owner   string `json:"owner,omitempty"`    // claim: a unique nonce per claim operation
	Token   uint64 `json:"token,omitempty"`    // complete, release, extend: the token used
	Body    string `json:"body,omitempty"`     // complete: unique to (owner, token); checkpoint: the data
	Point   string `json:"point,omitempty"`    // checkpoint: the recovery point's name
	LeaseNs int64  `json:"lease_ns,omitempty"` // claim, extend
	TTLNs   int64  `json:"ttl_ns,omitempty"`   // claim

	// Outputs (on an OK completion).
	Outcome string `json:"outcome,omitempty"` // won, in_progress, completed, mismatch, fenced, not_found, ok
	// For claim WON: the granted token; for claim COMPLETED, get, wait and
	// final reads: the record's token.
	RecToken uint64 `json:"rec_token,omitempty"`
	// RecState is the record's state for get, wait and final reads:
	// "pending", "completed", or "" when absent.
	RecState string `json:"rec_state,omitempty"`
	// RecBody is the stored response body (claim COMPLETED, reads).
	RecBody string `json:"rec_body,omitempty"`
	// RecPoint is the recovery point a claim WON resumes from, as
	// "name=data" ("" when none).
	RecPoint       string `json:"rec_point,omitempty"`
	Attempt        uint32 `json:"attempt,omitempty"`
	LeaseExpiresAt int64  `json:"lease_expires_at,omitempty"`
	ExpiresAt      int64  `json:"expires_at,omitempty"`
	Error          string `json:"error,omitempty"`

	// The abandoned feed (FFeed, FFeedPruned).
	Seq        uint64 `json:"seq,omitempty"`
	FeedKind   string `json:"feed_kind,omitempty"`  // abandoned or resolved
	Resolution string `json:"resolution,omitempty"` // completed, released, taken_over, expired
	Resolves   uint64 `json:"resolves,omitempty"`

	// Final status (FFinalStatus only).
	AppliedIndex uint64 `json:"applied_index,omitempty"`
	Digest       string `json:"digest,omitempty"`
	FSMTime      int64  `json:"fsm_time,omitempty"`
}

// Fault is one line of nemesis.jsonl: a fault starting or ending.
type Fault struct {
	Time   int64  `json:"time"`  // monotonic ns since the run began
	Name   string `json:"name"`  // e.g. partition-leader, kill-leader, pause, skew
	Phase  string `json:"phase"` // "start" or "end"
	Detail string `json:"detail,omitempty"`
}

// Fault phases.
const (
	FaultStart = "start"
	FaultEnd   = "end"
)

// Writer appends events to a history file; it is safe for concurrent use.
type Writer struct {
	// mu serialises lines so concurrent clients never interleave them.
	mu sync.Mutex
	f  *os.File
	w  *bufio.Writer
}

// Create opens path for writing a new history.
func Create(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create history: %w", err)
	}
	return &Writer{f: f, w: bufio.NewWriter(f)}, nil
}

// Add appends one event.
func (w *Writer) Add(e Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}

// Close flushes and closes the file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("flush history: %w", err)
	}
	return w.f.Close()
}

// AddFault appends a nemesis record (a Writer may hold either kind).
func (w *Writer) AddFault(f Fault) error {
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encode fault: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write faults: %w", err)
	}
	return nil
}

// ReadFaults parses nemesis.jsonl.
func ReadFaults(r io.Reader) ([]Fault, error) {
	var out []Fault
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		var f Fault
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			return nil, fmt.Errorf("nemesis line %d: %w", line, err)
		}
		out = append(out, f)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read faults: %w", err)
	}
	return out, nil
}

// Read parses a history written by Writer.
func Read(r io.Reader) ([]Event, error) {
	var out []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for line := 1; sc.Scan(); line++ {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("history line %d: %w", line, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	return out, nil
}
