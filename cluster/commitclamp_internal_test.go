package cluster

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestFollowerAppliesNoEntryTheLeaderDidNotSend plays the leader's side of
// the hole commitclamp.go closes against a real raft follower. The
// follower's log holds entries 4 and 5 of term 2, a deposed leader's, which
// no one committed; the new leader of term 3 holds other entries there.
// Its first AppendEntries matches the log at entry 3 and carries nothing
// past it, with a commit index of 5. Raft alone commits the follower's own
// entries 4 and 5 and applies them; the gate holds the commit at 3 (and
// warns), and the next AppendEntries replaces them before any is applied.
func TestFollowerAppliesNoEntryTheLeaderDidNotSend(t *testing.T) {
	f := startStaleFollower(t)
	leader := newTestTransport(t)
	send := func(prev uint64, entries []*raft.Log) {
		t.Helper()
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("l"), Addr: []byte(leader.LocalAddr())},
			Term: 3, PrevLogEntry: prev, PrevLogTerm: 1, Entries: entries, LeaderCommitIndex: 5}
		var resp raft.AppendEntriesResponse
		if err := leader.AppendEntries("f", f.addr, req, &resp); err != nil || !resp.Success {
			t.Fatalf("append after entry %d: success %v, err %v", prev, resp.Success, err)
		}
	}
	send(3, nil)
	send(3, []*raft.Log{
		{Index: 4, Term: 3, Type: raft.LogCommand, Data: []byte("new 4")},
		{Index: 5, Term: 3, Type: raft.LogCommand, Data: []byte("new 5")},
	})
	want := []string{"committed 2", "committed 3", "new 4", "new 5"}
	if got := f.fsm.waitFor(len(want)); !slices.Equal(got, want) {
		t.Fatalf("the follower applied %q, want %q", got, want)
	}
	warned := f.warnings.String()
	if strings.Count(warned, "held an AppendEntries") != 1 || !strings.Contains(warned, "held_at=3 log_last=5 request_term=3 next_entry_term=2") {
		t.Fatalf("warnings: want one for the first request, held at 3 below a deposed term's entries; got %q", warned)
	}
}

// lockedBuffer is a log destination the gate's goroutine writes and the
// test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type staleFollower struct {
	addr     raft.ServerAddress
	fsm      *recordingFSM
	warnings *lockedBuffer
}

// startStaleFollower starts a raft node whose log ends with two entries of
// a deposed leader, behind the gate, with timeouts long enough that it
// waits for a leader rather than standing for election.
func startStaleFollower(t *testing.T) staleFollower {
	t.Helper()
	trans := newGatedTransport(newTestTransport(t))
	logs, stable := raft.NewInmemStore(), raft.NewInmemStore()
	cfg := raft.Configuration{Servers: []raft.Server{
		{Suffrage: raft.Voter, ID: "f", Address: trans.LocalAddr()},
		{Suffrage: raft.Voter, ID: "l", Address: "127.0.0.1:1"},
	}}
	entries := []*raft.Log{{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(cfg)}}
	for i, data := range []string{"committed 2", "committed 3", "stale 4", "stale 5"} {
		term := uint64(1)
		if i >= 2 {
			term = 2
		}
		entries = append(entries, &raft.Log{Index: uint64(i + 2), Term: term, Type: raft.LogCommand, Data: []byte(data)})
	}
	if err := logs.StoreLogs(entries); err != nil {
		t.Fatal(err)
	}
	if err := stable.SetUint64([]byte("CurrentTerm"), 2); err != nil {
		t.Fatal(err)
	}
	warnings := &lockedBuffer{}
	trans.watchLog(logs, slog.New(slog.NewTextHandler(warnings, nil)))
	rc := raft.DefaultConfig()
	rc.LocalID = "f"
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 10*time.Second, 10*time.Second, time.Second
	rc.LogOutput = io.Discard
	fsm := &recordingFSM{changed: make(chan struct{}, 1)}
	r, err := raft.NewRaft(rc, fsm, logs, stable, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Shutdown().Error()
		trans.Close()
	})
	return staleFollower{addr: trans.LocalAddr(), fsm: fsm, warnings: warnings}
}

// recordingFSM keeps the commands it applied, in order.
type recordingFSM struct {
	mu      sync.Mutex
	applied []string
	changed chan struct{}
}

func (f *recordingFSM) Apply(l *raft.Log) interface{} {
	f.mu.Lock()
	f.applied = append(f.applied, string(l.Data))
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
	return nil
}

// waitFor returns the commands applied once there are n, or after five
// seconds without.
func (f *recordingFSM) waitFor(n int) []string {
	deadline := time.After(5 * time.Second)
	for {
		f.mu.Lock()
		got := slices.Clone(f.applied)
		f.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-f.changed:
		case <-deadline:
			return got
		}
	}
}

func (f *recordingFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, io.ErrUnexpectedEOF }
func (f *recordingFSM) Restore(io.ReadCloser) error         { return io.ErrUnexpectedEOF }
