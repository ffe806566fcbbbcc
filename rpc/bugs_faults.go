//go:build faults

package rpc

import (
	"context"
	"fmt"

	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// Planted bugs exist only so that the jepsen harness can show its checkers
// catch real anomalies (a checker that never fails proves nothing). They
// are compiled only into a fault build (`go build -tags faults`), where a
// hidden fault-injection flag of `idemnode serve` enables one; the release
// build has none (bugs_nofaults.go).
const (
	// BugSkipFencing lets a complete by a superseded token through, by
	// swapping in the current holder's token before proposing.
	BugSkipFencing = "skip-fencing"
	// BugStaleReads serves linearizable reads from the local state without
	// confirming leadership, on any node.
	BugStaleReads = "stale-reads"
	// BugFollowerClaims lets a follower grant a claim on a key it sees
	// absent locally, without going through Raft.
	BugFollowerClaims = "follower-claims"
	// BugFeedReplay resumes WatchAbandoned one event before the cursor, so
	// a watcher that reconnects is handed its last event again.
	BugFeedReplay = "feed-replay"
)

// plantedBug names the planted bug a fault build's Server runs with.
type plantedBug string

// PlantedBugs lists the valid planted-bug names.
var PlantedBugs = []string{BugSkipFencing, BugStaleReads, BugFollowerClaims, BugFeedReplay}

// WithPlantedBug enables a planted bug (fault injection only).
func WithPlantedBug(name string) (Option, error) {
	for _, b := range PlantedBugs {
		if b == name {
			return func(s *Server) { s.bug = plantedBug(name) }, nil
		}
	}
	return nil, fmt.Errorf("unknown planted bug %q (known: %v)", name, PlantedBugs)
}

// unfence implements BugSkipFencing.
func (s *Server) unfence(cmd *fsm.Command) {
	if s.bug != BugSkipFencing {
		return
	}
	if r, ok := s.backend.Machine().Get(cmd.Key); ok && r.State == fsm.StatePending {
		cmd.Token = r.Token
	}
}

// followerGrant implements BugFollowerClaims: a follower answers WON for a
// key absent from its local state, with a token no leader ever issued.
func (s *Server) followerGrant(cmd *fsm.Command) (*idempb.ClaimResponse, bool) {
	if s.bug != BugFollowerClaims {
		return nil, false
	}
	if id, _ := s.backend.Leader(); id == s.backend.ID() {
		return nil, false
	}
	if _, ok := s.backend.Machine().Get(cmd.Key); ok {
		return nil, false
	}
	now := s.backend.Machine().Now()
	return &idempb.ClaimResponse{Outcome: idempb.Outcome_OUTCOME_WON, Token: fsm.TokenFor(uint64(now), 1), Attempt: 1,
		LeaseExpiresAt: timestamp(now + cmd.Lease), ExpiresAt: timestamp(now + cmd.TTL)}, true
}

// staleReadsPlanted reports whether BugStaleReads skips read barriers.
func (s *Server) staleReadsPlanted(context.Context) bool { return s.bug == BugStaleReads }

// replayFrom implements BugFeedReplay.
func (s *Server) replayFrom(cursor uint64) uint64 {
	if s.bug == BugFeedReplay && cursor > 0 {
		return cursor - 1
	}
	return cursor
}
