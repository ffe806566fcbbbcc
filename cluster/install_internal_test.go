package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/fsm"
)

func TestPlanInstall(t *testing.T) {
	for _, c := range []struct {
		name              string
		first, last, snap uint64
		keep, refused     bool
	}{
		{name: "empty log", first: 0, last: 0, snap: 10},
		{name: "log behind the snapshot", first: 1, last: 7, snap: 10},
		{name: "log ends at the snapshot", first: 1, last: 10, snap: 10},
		{name: "log runs past the snapshot", first: 1, last: 12, snap: 10, keep: true},
		{name: "log starts at the snapshot", first: 10, last: 12, snap: 10, keep: true},
		{name: "log starts right after the snapshot", first: 11, last: 12, snap: 10, keep: true},
		{name: "log starts after the entry following the snapshot", first: 12, last: 14, snap: 10, refused: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := planInstall(c.first, c.last, c.snap)
			if (err != nil) != c.refused {
				t.Fatalf("planInstall(%d, %d, %d) error = %v, want refused %v", c.first, c.last, c.snap, err, c.refused)
			}
			if err == nil && p.keepLog != c.keep {
				t.Fatalf("planInstall(%d, %d, %d) keeps the log = %v, want %v", c.first, c.last, c.snap, p.keepLog, c.keep)
			}
		})
	}
}

// A follower built from the node's own parts (raft-wal behind the guard
// and the log cache, the store as raft's snapshot store, the tracked FSM),
// driven by a leader the test plays over raft's in-memory transport, so
// every RPC the follower sees is chosen by the test.
type installRig struct {
	t        *testing.T
	dir      string // the follower's data dir
	raft     *raft.Raft
	machine  *fsm.Machine
	tracked  *trackedFSM
	logs     *guardedLogStore
	leader   *raft.InmemTransport
	follower raft.ServerAddress
	config   raft.Configuration
}

const rigTerm = 1

func newInstallRig(t *testing.T) *installRig {
	t.Helper()
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg, err := Config{NodeID: "f", DataDir: dir, RaftAddr: "f",
		OnFatal: func(err error) { t.Errorf("follower stopped: %v", err) }}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	machine, err := openMachine(cfg, log, cfg.OnFatal)
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStores(dir, 1<<20, log)
	if err != nil {
		t.Fatal(err)
	}
	tracked := newTrackedFSM(machine)
	tracked.installs = newStoreSnapshots(func() *fsm.Machine { return machine })
	logs := &guardedLogStore{LogStore: st.log, log: log, fatal: cfg.OnFatal}
	tracked.logs, tracked.log = logs, log
	cached, err := raft.NewLogCache(logCacheEntries, logs)
	if err != nil {
		t.Fatal(err)
	}
	faddr, ftrans := raft.NewInmemTransport("f")
	laddr, ltrans := raft.NewInmemTransport("l")
	ftrans.Connect(laddr, ltrans)
	ltrans.Connect(faddr, ftrans)

	n := &Node{cfg: cfg}
	rc := n.raftConfig(hclog.NewNullLogger())
	// The follower must not campaign while the test plays the leader.
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = time.Hour, time.Hour, time.Hour
	r, err := raft.NewRaft(rc, tracked, cached, st.stable, tracked.installs, ftrans)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Shutdown().Error()
		st.Close()
		machine.Close()
	})
	return &installRig{t: t, dir: dir, raft: r, machine: machine, tracked: tracked, logs: logs, leader: ltrans, follower: faddr,
		config: raft.Configuration{Servers: []raft.Server{
			{Suffrage: raft.Voter, ID: "l", Address: laddr},
			{Suffrage: raft.Voter, ID: "f", Address: faddr},
		}}}
}

// entries returns entries from..to of the leader's log: the configuration
// first, then a claim of a key of its own per entry.
func (g *installRig) entries(from, to uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		if i == 1 {
			out = append(out, &raft.Log{Index: 1, Term: rigTerm, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(g.config)})
			continue
		}
		cmd := &fsm.Command{Type: fsm.TypeClaim, Now: int64(i) * int64(time.Second),
			Key: fsm.RecordKey{Tenant: "t", Key: fmt.Sprintf("k%d", i)}, Fingerprint: []byte("fp"), Owner: "o",
			Lease: int64(time.Minute), TTL: int64(time.Hour)}
		out = append(out, &raft.Log{Index: i, Term: rigTerm, Type: raft.LogCommand, Data: fsm.EncodeCommand(cmd)})
	}
	return out
}

// appendEntries sends entries after prev, with the leader's commit index.
func (g *installRig) appendEntries(prev uint64, entries []*raft.Log, commit uint64) bool {
	g.t.Helper()
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("l"), Addr: []byte("l")},
		Term: rigTerm, PrevLogEntry: prev, PrevLogTerm: rigTerm, Entries: entries, LeaderCommitIndex: commit}
	if prev == 0 {
		req.PrevLogTerm = 0
	}
	var resp raft.AppendEntriesResponse
	if err := g.leader.AppendEntries("f", g.follower, req, &resp); err != nil {
		g.t.Fatalf("append after %d: %v", prev, err)
	}
	return resp.Success
}

// installSnapshot sends the leader's store as of entry index: a store that
// applied the leader's entries 1..index, streamed by the node's own
// snapshot store.
func (g *installRig) installSnapshot(index uint64) error {
	g.t.Helper()
	meta, data := g.leaderStream(index)
	return g.sendInstall(meta, data, int64(len(data)))
}

// leaderSnapshot opens, in the leader's snapshot store over a store that
// applied the leader's entries 1..index, the stream it sends a follower;
// failed counts the store's failures. The store closes with the test.
func (g *installRig) leaderSnapshot(index uint64, failed func(stage string)) (*raft.SnapshotMeta, io.ReadCloser) {
	g.t.Helper()
	leaderMachine, err := openMachine(Config{DataDir: g.t.TempDir()}, slog.New(slog.NewTextHandler(io.Discard, nil)), func(error) {})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { leaderMachine.Close() })
	fsm.NewFSM(leaderMachine).ApplyBatch(g.entries(1, index))
	snaps := newStoreSnapshots(func() *fsm.Machine { return leaderMachine })
	if failed != nil {
		snaps.failed = failed
	}
	list, err := snaps.List()
	if err != nil || len(list) != 1 {
		g.t.Fatalf("list the leader's snapshot: %v %v", list, err)
	}
	meta, rc, err := snaps.Open(list[0].ID)
	if err != nil {
		g.t.Fatal(err)
	}
	return meta, rc
}

// leaderStream is the whole stream the leader's snapshot store sends of
// its store as of entry index.
func (g *installRig) leaderStream(index uint64) (*raft.SnapshotMeta, []byte) {
	g.t.Helper()
	meta, rc := g.leaderSnapshot(index, nil)
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		g.t.Fatal(err)
	}
	return meta, data
}

// sendInstall sends data as an InstallSnapshot of meta that announces size
// bytes.
func (g *installRig) sendInstall(meta *raft.SnapshotMeta, data []byte, size int64) error {
	req := &raft.InstallSnapshotRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("l"), Addr: []byte("l")},
		SnapshotVersion: raft.SnapshotVersionMax, Term: rigTerm, LastLogIndex: meta.Index, LastLogTerm: meta.Term,
		Configuration: raft.EncodeConfiguration(meta.Configuration), ConfigurationIndex: meta.ConfigurationIndex, Size: size}
	var resp raft.InstallSnapshotResponse
	if err := g.leader.InstallSnapshot("f", g.follower, req, &resp, bytes.NewReader(data)); err != nil {
		return err
	}
	if !resp.Success {
		return fmt.Errorf("install at %d not successful", meta.Index)
	}
	return nil
}

// waitApplied waits until the follower's store has applied index.
func (g *installRig) waitApplied(index uint64) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.tracked.waitApplied(ctx, index); err != nil {
		g.t.Fatalf("the follower applied %d, want %d: %v", g.machine.Applied(), index, err)
	}
}

// requireLogContinuesStore checks the invariant raft relies on after a
// restart: the log reaches back to the entry after the store's.
func (g *installRig) requireLogContinuesStore(what string) {
	g.t.Helper()
	first, last, err := logBounds(g.logs.LogStore)
	if err != nil {
		g.t.Fatal(err)
	}
	if applied := g.machine.Applied(); last > applied && first > applied+1 {
		g.t.Fatalf("%s: the log holds %d-%d but the store ends at %d: entries %d-%d are lost",
			what, first, last, applied, applied+1, first-1)
	}
}

// The nightly run's failure: a follower that appended the entry after its
// store's index got the leader's snapshot at that index again. Raft emptied
// the log but still believed it held the entry, accepted the next append
// after it, and panicked applying the entry it had thrown away.
func TestInstallAtTheStoreKeepsTheEntriesAfterIt(t *testing.T) {
	g := newInstallRig(t)
	if !g.appendEntries(0, g.entries(1, 4), 4) {
		t.Fatal("first append refused")
	}
	g.waitApplied(4)
	if !g.appendEntries(4, g.entries(5, 5), 4) {
		t.Fatal("append of entry 5 refused")
	}
	if err := g.installSnapshot(4); err != nil {
		t.Fatal(err)
	}
	g.requireLogContinuesStore("after the install")
	if !g.appendEntries(5, g.entries(6, 6), 6) {
		t.Fatal("append of entry 6 refused")
	}
	g.waitApplied(6)
	g.requireLogContinuesStore("after entry 6")
}

// A follower whose log ran past the snapshot keeps it: the same hole, from
// a log that held the snapshot's entry too.
func TestInstallBehindTheLogKeepsIt(t *testing.T) {
	g := newInstallRig(t)
	if !g.appendEntries(0, g.entries(1, 6), 3) {
		t.Fatal("first append refused")
	}
	g.waitApplied(3)
	if err := g.installSnapshot(4); err != nil {
		t.Fatal(err)
	}
	g.requireLogContinuesStore("after the install")
	if !g.appendEntries(6, g.entries(7, 7), 7) {
		t.Fatal("append of entry 7 refused")
	}
	g.waitApplied(7)
	g.requireLogContinuesStore("after entry 7")
}

// A snapshot older than the store, on a follower whose log starts after
// the snapshot's next entry, is refused and changes nothing.
func TestInstallOlderThanTheLogIsRefused(t *testing.T) {
	g := newInstallRig(t)
	if err := g.installSnapshot(6); err != nil {
		t.Fatal(err)
	}
	if !g.appendEntries(6, g.entries(7, 8), 8) {
		t.Fatal("append after the first install refused")
	}
	g.waitApplied(8)
	if err := g.installSnapshot(4); err == nil {
		t.Fatal("an install at 4 over a store at 8 and a log of 7-8 was accepted")
	}
	if got := g.machine.Applied(); got != 8 {
		t.Fatalf("after the refused install the store is at %d, want 8", got)
	}
	g.requireLogContinuesStore("after the refused install")
	if !g.appendEntries(8, g.entries(9, 9), 9) {
		t.Fatal("append of entry 9 refused")
	}
	g.waitApplied(9)
}

// A follower whose log ends before the snapshot empties it, as raft does,
// and continues from the snapshot.
func TestInstallPastTheLogEmptiesIt(t *testing.T) {
	g := newInstallRig(t)
	if !g.appendEntries(0, g.entries(1, 2), 2) {
		t.Fatal("first append refused")
	}
	g.waitApplied(2)
	if err := g.installSnapshot(6); err != nil {
		t.Fatal(err)
	}
	if first, last, _ := logBounds(g.logs.LogStore); last != 0 {
		t.Fatalf("after installing past the log it holds %d-%d, want it empty", first, last)
	}
	if !g.appendEntries(6, g.entries(7, 7), 7) {
		t.Fatal("append after the install refused")
	}
	g.waitApplied(7)
}

// Every way an InstallSnapshot can fail is counted where
// IdemnodeSnapshotFailing sees it: a stream that breaks off on the leader
// (send), and on the follower one that is corrupt or comes short (install);
// a good install after them counts nothing.
func TestInstallFailuresAreCounted(t *testing.T) {
	g := newInstallRig(t)
	counts := map[string]int{}
	g.tracked.installs.failed = func(stage string) { counts[stage]++ }

	meta, data := g.leaderStream(4)
	corrupt := bytes.Clone(data)
	corrupt[len(corrupt)/2] ^= 0xff
	if err := g.sendInstall(meta, corrupt, int64(len(corrupt))); err == nil {
		t.Fatal("a corrupt stream was installed")
	}
	if err := g.sendInstall(meta, data[:len(data)/2], int64(len(data))); err == nil {
		t.Fatal("half a stream was installed")
	}
	if counts[stageInstall] != 2 {
		t.Fatalf("install failures counted: %v, want 2", counts)
	}
	if err := g.sendInstall(meta, data, int64(len(data))); err != nil {
		t.Fatalf("the whole stream: %v", err)
	}
	if counts[stageInstall] != 2 || len(counts) != 1 {
		t.Fatalf("after a good install: %v", counts)
	}

	sent := map[string]int{}
	done := make(chan struct{})
	_, rc := g.leaderSnapshot(4, func(stage string) { sent[stage]++; close(done) })
	rc.Read(make([]byte, 8)) // the follower's connection breaks after 8 bytes
	rc.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a stream the follower stopped reading was not counted")
	}
	if sent[stageSend] != 1 {
		t.Fatalf("send failures counted: %v, want 1", sent)
	}
}
