package cluster

import (
	"log/slog"

	"github.com/hashicorp/raft"
)

// A follower must not commit an entry the leader has not shown it holds.
//
// hashicorp/raft (v1.7.3) sets a follower's commit index to
// min(LeaderCommitIndex, the follower's last log index) after any accepted
// AppendEntries. The Raft paper bounds it by the index of the last entry of
// that request (Figure 2, AppendEntries rule 5), because only entries up to
// there were checked against the leader's log. The difference matters to a
// follower whose log runs past that point with entries no leader committed:
// a deposed leader's own appends, kept in its log after a kill, a pause or a
// partition. An AppendEntries that matches the log up to its prevLogEntry and
// carries no entries past it (raft builds one when it read its last index
// before appending the new term's first entry, and read its commit index
// after that entry committed elsewhere) then makes the follower commit and
// apply the stale entries; the next AppendEntries truncates them from the
// log, but the state machine has applied them, and the replicas differ for
// good. The jepsen CI profile caught it once (digest-mismatch and
// feed-divergence on one node, docs/RELIABILITY.md); copycat#265 and
// scylladb#9965 describe the same hole in other implementations.
//
// The gate bounds LeaderCommitIndex by prevLogEntry plus the request's entries
// before raft reads it: the paper's rule. A commit index the leader could not
// send this way reaches the follower with the next AppendEntries, at most
// CommitTimeout later. Heartbeats carry no commit index and stay on the fast
// path.
//
// It returns the request it bounded, if it lowered its commit index.
func boundLeaderCommit(rpc raft.RPC) (bounded *raft.AppendEntriesRequest, sent uint64) {
	req, ok := rpc.Command.(*raft.AppendEntriesRequest)
	if !ok {
		return nil, 0
	}
	checked := req.PrevLogEntry
	if n := len(req.Entries); n > 0 {
		checked = req.Entries[n-1].Index
	}
	if req.LeaderCommitIndex <= checked {
		return nil, 0
	}
	sent = req.LeaderCommitIndex
	req.LeaderCommitIndex = checked
	return req, sent
}

// watchLog makes the gate warn when it holds a commit index below entries
// of an older term than the leader's in the follower's log: the case raft
// alone would have committed unchecked. Call it before raft starts.
func (t *gatedTransport) watchLog(logs raft.LogStore, log *slog.Logger) { t.logs, t.log = logs, log }

// warnUnshown logs a held request whose commit index reached past its
// entries to an entry of the follower's log of an older term than the
// request's: a deposed leader's entry that no one committed, or one the
// leader holds too (an older term's entries can be committed), which
// only the next request can tell apart. Held requests that reach no
// entry of the log, or only entries of the request's term or a later one
// (the leader's own sent earlier, or a request raft refuses for its
// stale term: a delayed request of a deposed leader), are not logged.
func (t *gatedTransport) warnUnshown(req *raft.AppendEntriesRequest, sent uint64) {
	held := req.LeaderCommitIndex
	last, err := t.logs.LastIndex()
	if err != nil || last <= held {
		return
	}
	var next raft.Log
	if err := t.logs.GetLog(held+1, &next); err != nil || next.Term >= req.Term {
		return
	}
	t.log.Warn("held an AppendEntries' commit index at its last entry, below an entry of an older term in the log that raft would have committed unchecked",
		"leader_commit", sent, "held_at", held, "log_last", last, "request_term", req.Term, "next_entry_term", next.Term)
}

// Consumer returns the RPCs for raft, each AppendEntries bounded. raft
// asks for it when it starts, after watchLog: the forwarding starts then,
// so it reads logs and log only once they are set.
func (t *gatedTransport) Consumer() <-chan raft.RPC {
	t.startOnce.Do(func() { go t.forward() })
	return t.rpcs
}

// forward hands raft the network transport's RPCs until Close.
func (t *gatedTransport) forward() {
	in := t.NetworkTransport.Consumer()
	for {
		select {
		case rpc := <-in:
			if req, sent := boundLeaderCommit(rpc); req != nil && t.logs != nil {
				t.warnUnshown(req, sent)
			}
			select {
			case t.rpcs <- rpc:
			case <-t.stop:
				return
			}
		case <-t.stop:
			return
		}
	}
}

// Close stops the forwarding and closes the network transport.
func (t *gatedTransport) Close() error {
	t.stopOnce.Do(func() { close(t.stop) })
	return t.NetworkTransport.Close()
}
