package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/idemnode/idemnode/clock"
	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/store"
)

// Node is one idemnode server: the Raft instance, its stores and the state
// machine. Writes go through Apply, reads through Read.
type Node struct {
	cfg  Config
	log  *slog.Logger
	raft *raft.Raft
	fsm  *trackedFSM
	// stores are the Raft log and stable store (stores.go).
	stores *stores
	// snaps is raft's snapshot store: the state machine's store itself.
	snaps *storeSnapshots
	trans *gatedTransport
	// stream is the transport's network layer (TLS or not, see peertls.go).
	stream raft.StreamLayer
	// members is nil on a standalone node (no gossip address).
	members *membership
	// addrs resolves servers' current Raft addresses from gossip.
	addrs gossipAddresses

	// leaderNotify receives raft's leadership changes (Config.NotifyCh).
	leaderNotify chan bool
	leader       leaderState
	metrics      *metrics
	// commits is the group-commit queue every write goes through.
	commits *committer
	// reads shares leadership confirmations among concurrent reads.
	reads confirmer
	// scrub reads the store's tables in the background (scrub.go); nil
	// when turned off.
	scrub *store.Scrubber

	// opened is when Open ran: the last contact of a node that never
	// heard from a leader counts from it.
	opened time.Time
	// withheldWarned is when tombstone times were last reported withheld
	// (Unix ns; upgrade.go).
	withheldWarned atomic.Int64

	// dirLock holds the data dir for this process (datadirlock.go) until
	// closeStores.
	dirLock io.Closer

	// faults holds the fault the node cannot run past (Fatal), and
	// reports storage faults to Config.OnFatal.
	faults *faultReporter
	// refusals reports Raft connections refused for another cluster.
	refusals refusalLog

	stop     chan struct{}
	wg       sync.WaitGroup
	closeErr error
	closed   sync.Once
}

// Open starts a node on cfg.DataDir, restoring whatever state is there.
func Open(cfg Config) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	if err := probeDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	dirLock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if err := checkFreeSpace(cfg.DataDir, cfg.StoreMemTableSize, cfg.LogSegmentSize); err != nil {
		dirLock.Close()
		return nil, err
	}
	log := cfg.Logger.With("node", cfg.NodeID)
	faults := newFaultReporter(cfg.OnFatal)
	machine, err := openMachine(cfg, log, faults.report)
	if err != nil {
		dirLock.Close()
		return nil, err
	}
	n := &Node{cfg: cfg, log: log, fsm: newTrackedFSM(machine), opened: time.Now(), dirLock: dirLock, faults: faults,
		leaderNotify: make(chan bool, 16), commits: newCommitter(), stop: make(chan struct{})}
	n.refusals.log = log
	n.snaps = newStoreSnapshots(n.Machine)
	n.fsm.installs = n.snaps
	n.scrub = n.newScrubber()
	n.registerMetrics(cfg.Metrics)
	n.reads.confirm = n.verifyLeader
	n.fsm.metrics = n.metrics
	existing, err := n.openRaft()
	if err != nil {
		n.closeStores()
		return nil, err
	}
	n.wg.Add(3)
	go n.watchLeadership()
	// The expiry ticker is armed before Open returns, so a test that
	// advances a fake clock right after reaches it.
	go n.runExpiry(n.cfg.Clock.NewTicker(n.cfg.ExpiryInterval))
	go n.runCommitter()
	if n.scrub != nil {
		n.wg.Add(1)
		go n.runScrub(n.scrub)
	}
	if cfg.GossipAddr != "" {
		if err := n.startMembership(existing); err != nil {
			n.Close()
			return nil, err
		}
	}
	// After membership: it gossips the identity.
	n.wg.Add(1)
	go n.runIdentity()
	return n, nil
}

// startMembership joins gossip and starts bootstrap, join and reconcile.
func (n *Node) startMembership(existing bool) error {
	// The identity and whether the node holds state are in the first
	// metadata gossip sends: the leader may decide on a node as soon as
	// it is seen (identity.go).
	meta := memberMeta{Version: 1, Raft: n.RaftAddr(), GRPC: n.cfg.GRPCAdvertise, Expect: n.cfg.BootstrapExpect, InCluster: existing,
		Applies: fsm.LastLevel, Cluster: n.ClusterID(), State: existing || n.hasState()}
	var err error
	if n.members, err = newMembership(n.cfg, meta, n.log); err != nil {
		return err
	}
	n.addrs.members.Store(n.members)
	n.wg.Add(2)
	go n.runReconcile()
	go n.runBootstrap(existing)
	if len(n.cfg.Join) > 0 {
		n.wg.Add(1)
		go n.runJoin()
	}
	return nil
}

// openRaft opens the stores and starts raft; it reports whether the node
// had Raft state already.
func (n *Node) openRaft() (bool, error) {
	var err error
	if n.stores, err = openStores(n.cfg.DataDir, n.cfg.LogSegmentSize, n.log); err != nil {
		return false, err
	}
	hlog := newRaftLogger(n.log.With("component", "raft"), hclog.Warn)
	if err := n.checkStoredState(n.stores.log); err != nil {
		return false, err
	}
	if err := n.termAtLeastStore(); err != nil {
		return false, err
	}
	stream, err := newStreamLayer(n.cfg)
	if err != nil {
		return false, err
	}
	n.stream = &identityStreamLayer{StreamLayer: stream, local: func() []byte { return n.Machine().Cluster() }, refused: n.refusedPeer}
	tc := &raft.NetworkTransportConfig{Stream: n.stream, MaxPool: 4, Timeout: 10 * time.Second, Logger: hlog}
	if n.cfg.GossipAddr != "" {
		tc.ServerAddressProvider = &n.addrs
	}
	n.trans = newGatedTransport(raft.NewNetworkTransportWithConfig(tc))
	rc := n.raftConfig(hlog)
	existing, err := raft.HasExistingState(n.stores.log, n.stores.stable, n.snaps)
	if err != nil {
		return false, fmt.Errorf("inspect raft state: %w", err)
	}
	logs := &guardedLogStore{LogStore: n.stores.log, stallTimeout: n.cfg.DiskStallTimeout,
		faults: n.cfg.Faults, log: n.log, fatal: n.faults.report}
	n.fsm.logs, n.fsm.log = logs, n.log
	n.trans.watchLog(logs, n.log)
	// raft reads every entry back after appending it: the leader to send
	// it to each follower, every node to apply it. The cache answers those
	// reads from the entries just written instead of the segment files.
	cached, err := raft.NewLogCache(logCacheEntries, logs)
	if err != nil {
		return false, fmt.Errorf("log cache: %w", err)
	}
	n.raft, err = raft.NewRaft(rc, n.fsm, cached, n.stores.stable, n.snaps, n.trans)
	if err != nil {
		return false, fmt.Errorf("start raft: %w", err)
	}
	if n.cfg.Bootstrap && !existing {
		err := n.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{
			{Suffrage: raft.Voter, ID: raft.ServerID(n.cfg.NodeID), Address: n.trans.LocalAddr()},
		}}).Error()
		if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return false, fmt.Errorf("bootstrap: %w", err)
		}
	}
	if err := n.campaignIfSoleVoter(); err != nil {
		return false, err
	}
	return existing, nil
}

// campaignIfSoleVoter starts the election at once on a node that is the
// only voter of its configuration: a one-node cluster, at its first start
// or a restart, or the first node of one that others join. raft waits a
// heartbeat timeout (1-2 s) for a leader before it campaigns, but nobody
// else can lead a configuration of one voter, so the wait only keeps the
// node from answering. Timing never decides safety in Raft; a voter that
// campaigns early wins only what it would have won later.
//
// A shorter heartbeat timeout fires a follower's timer at once
// (ReloadConfig); the usual one goes back straight after, before the node
// could have a follower to time out on.
func (n *Node) campaignIfSoleVoter() error {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("read the raft configuration: %w", err)
	}
	servers := f.Configuration().Servers
	if len(servers) != 1 || servers[0].ID != raft.ServerID(n.cfg.NodeID) || servers[0].Suffrage != raft.Voter {
		return nil
	}
	usual := n.raft.ReloadableConfig()
	wake := usual
	wake.HeartbeatTimeout = leaderLeaseTimeout // the shortest raft accepts
	if err := n.raft.ReloadConfig(wake); err != nil {
		return fmt.Errorf("campaign at once: %w", err)
	}
	if err := n.raft.ReloadConfig(usual); err != nil {
		return fmt.Errorf("campaign at once: restore the heartbeat timeout: %w", err)
	}
	return nil
}

// termAtLeastStore raises the current term to the store's, if it is lower:
// a node must never campaign in a term below that of an entry it holds.
// Only a store seeded by `snapshot restore`, which records the term after
// putting the store in place, can be ahead of it (a crash in between);
// raising a term is always safe in Raft.
func (n *Node) termAtLeastStore() error {
	const key = "CurrentTerm"
	cur, err := n.stores.stable.GetUint64([]byte(key))
	if err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return fmt.Errorf("read current term: %w", err)
	}
	if t := n.fsm.Meta().Term; t > cur {
		if err := n.stores.stable.SetUint64([]byte(key), t); err != nil {
			return fmt.Errorf("store current term: %w", err)
		}
	}
	return nil
}

// leaderLeaseTimeout is how long a leader leads without hearing from a
// quorum.
const leaderLeaseTimeout = 500 * time.Millisecond

// logCacheEntries is how many recent log entries stay in memory: with one
// entry in flight (commit.go) a handful is read back, and an entry is at
// most maxBatchBytes, so the cache holds at most 256 MiB, usually well
// under 1 MiB.
const logCacheEntries = 64

func (n *Node) raftConfig(hlog hclog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.NodeID)
	rc.Logger = hlog
	rc.NotifyCh = n.leaderNotify
	rc.SnapshotThreshold = n.cfg.SnapshotThreshold
	rc.SnapshotInterval = n.cfg.SnapshotInterval
	rc.TrailingLogs = n.cfg.TrailingLogs
	// The store is the snapshot (snapstore.go): raft takes its index,
	// term and configuration from List and must not restore it into itself.
	rc.NoSnapshotRestoreOnStart = true
	// Loopback and LAN clusters detect a dead leader in about a second.
	rc.HeartbeatTimeout = 1000 * time.Millisecond
	rc.ElectionTimeout = 1000 * time.Millisecond
	rc.LeaderLeaseTimeout = leaderLeaseTimeout
	rc.CommitTimeout = 20 * time.Millisecond
	return rc
}

// verifyLeader confirms with a quorum that this node is still leader.
func (n *Node) verifyLeader() error {
	if err := n.await(context.Background(), n.raft.VerifyLeader()); err != nil {
		return translate(err)
	}
	return nil
}

// now is the time this node stamps into the commands it proposes.
func (n *Node) now() int64 {
	return n.cfg.Clock.Now().UnixNano()
}

// Clock returns the clock this node stamps commands with (Config.Clock):
// the API's waits end on a holder's lease by the same clock.
func (n *Node) Clock() clock.Clock { return n.cfg.Clock }

// Machine returns the local state machine for stale reads and status.
func (n *Node) Machine() *fsm.Machine { return n.fsm.Machine }

// Raft exposes the raft instance to the rest of the cluster package and tests.
func (n *Node) Raft() *raft.Raft { return n.raft }

// ID returns the node id.
func (n *Node) ID() string { return n.cfg.NodeID }

// RaftAddr returns the address peers dial for Raft.
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// Close shuts raft down and closes the stores. It is safe to call twice.
func (n *Node) Close() error {
	n.closed.Do(func() {
		close(n.stop)
		if n.members != nil {
			if err := n.members.shutdown(); err != nil {
				n.closeErr = fmt.Errorf("shutdown memberlist: %w", err)
			}
		}
		if n.raft != nil {
			if err := n.raft.Shutdown().Error(); err != nil {
				n.closeErr = fmt.Errorf("shutdown raft: %w", err)
			}
		}
		n.wg.Wait()
		if n.snaps != nil {
			// After raft's shutdown no Restore claims a finished build.
			n.snaps.close()
		}
		if n.trans != nil {
			n.trans.closeGate()
		}
		if err := n.closeStores(); err != nil && n.closeErr == nil {
			n.closeErr = err
		}
	})
	return n.closeErr
}

func (n *Node) closeStores() error {
	var errs []error
	if n.trans != nil {
		errs = append(errs, n.trans.Close())
	}
	if n.stores != nil {
		errs = append(errs, n.stores.Close())
	}
	errs = append(errs, n.fsm.Machine.Close())
	// Last: the data dir is free for another process once nothing of
	// this node has a file in it open.
	errs = append(errs, n.dirLock.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close stores: %w", err)
	}
	return nil
}

// WaitForLeader blocks until some node is known as leader or ctx ends.
func (n *Node) WaitForLeader(ctx context.Context) error {
	return n.waitFor(ctx, func() bool { addr, _ := n.raft.LeaderWithID(); return addr != "" })
}

// waitFor waits for cond, re-checking on raft's leadership observations
// and at a short interval, since raft offers no broadcast for every change.
func (n *Node) waitFor(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.stop:
			return ErrShutdown
		case <-t.C:
		}
	}
	return nil
}

// boltOptions: opening a data dir that another process holds fails with a
// clear error instead of waiting forever on the file lock; and the free
// page list is not written on every commit (bolt rebuilds it when it opens
// the file), so a log append writes and syncs only the pages it changed —
// the settings etcd runs bolt with. Every commit is still fsynced.
func boltOptions() *bbolt.Options {
	return &bbolt.Options{Timeout: 2 * time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType}
}
