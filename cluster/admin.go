package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Voter is one server of the Raft configuration.
type Voter struct {
	ID      string
	Address string
	Voter   bool
}

// Membership is the membership view (gossip) beside the Raft configuration.
type Membership struct {
	Members []Member
	Servers []Voter
}

// Members returns this node's gossip view and the Raft configuration.
func (n *Node) Members() (Membership, error) {
	var out Membership
	if n.members != nil {
		out.Members = n.members.members()
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return out, fmt.Errorf("read raft configuration: %w", err)
	}
	for _, s := range f.Configuration().Servers {
		out.Servers = append(out.Servers, Voter{ID: string(s.ID), Address: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

// RemoveMember removes a server that is gone (dead in gossip, or never
// seen) from the Raft configuration. Only the leader can; a live server is
// refused, since reconciliation would add it straight back, and so is an
// id the configuration does not hold (ErrUnknownServer): raft would accept
// it as a no-op, and a mistyped id would look removed.
func (n *Node) RemoveMember(ctx context.Context, id string) error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	if _, err := n.raftAddrOf(id); err != nil {
		return fmt.Errorf("%w (the Raft servers are those `idemnode members` lists)", err)
	}
	if n.members != nil {
		if m, ok := n.members.member(id); ok && m.State == "alive" {
			return fmt.Errorf("remove server %s: %w; stop it first (SIGTERM makes it leave, which removes it)", id, ErrMemberAlive)
		}
	}
	if err := n.await(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, timeoutOf(ctx))); err != nil {
		return fmt.Errorf("remove server %s: %w", id, translate(err))
	}
	return nil
}

// TransferLeadership hands leadership to id, or to the most up-to-date
// follower when id is empty.
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	var f raft.Future
	if id == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		addr, err := n.raftAddrOf(id)
		if err != nil {
			return err
		}
		f = n.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(addr))
	}
	if err := n.await(ctx, f); err != nil {
		return fmt.Errorf("transfer leadership: %w", translate(err))
	}
	return nil
}

func (n *Node) raftAddrOf(id string) (string, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return "", fmt.Errorf("read raft configuration: %w", err)
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return string(s.Address), nil
		}
	}
	return "", fmt.Errorf("%w: %q", ErrUnknownServer, id)
}

// Leave is the graceful exit of SIGTERM: a leader first hands leadership to
// a follower (so clients see one retryable error, not an election timeout),
// then the node announces its departure so the leader removes it from the
// Raft configuration. Close follows, so neither step may outlast timeout: a
// transfer raft leaves unanswered (futures.go) ends at the deadline.
func (n *Node) Leave(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if n.raft.State() == raft.Leader && n.hasOtherVoters() {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err := n.await(ctx, n.raft.LeadershipTransfer())
		cancel()
		if err != nil {
			n.log.Warn("leadership transfer before leave", "err", err)
		}
	}
	if n.members == nil {
		return nil
	}
	return n.members.leave(max(time.Until(deadline), time.Second))
}

func (n *Node) hasOtherVoters() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.NodeID {
			return true
		}
	}
	return false
}
