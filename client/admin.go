package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// NodeStatus is one node's view of the cluster (Admin.Status).
type NodeStatus struct {
	NodeID string
	// State is leader, follower, candidate or shutdown.
	State      string
	LeaderID   string
	LeaderAddr string
	// The fields below are shown to admin identities only: Redacted says
	// the server left them out.
	Term, CommitIndex, AppliedIndex, Records uint64
	Digest                                   string
	FSMTime                                  time.Time
	ClusterID                                string
	Redacted                                 bool
}

func nodeStatusOf(s *idempb.StatusResponse) NodeStatus {
	return NodeStatus{NodeID: s.GetNodeId(), State: s.GetState(), LeaderID: s.GetLeaderId(), LeaderAddr: s.GetLeaderAddr(),
		Term: s.GetTerm(), CommitIndex: s.GetCommitIndex(), AppliedIndex: s.GetAppliedIndex(), Records: s.GetRecords(),
		Digest: s.GetDigest(), FSMTime: timeOf(s.GetFsmTime()), ClusterID: s.GetClusterId(),
		// A full answer always carries the digest of the state, records
		// or not; only the redacted one has none.
		Redacted: s.GetDigest() == ""}
}

// Member is a server as gossip sees it; State is alive, suspect, dead or
// left, ClusterID the identity of the cluster whose state it holds.
type Member struct {
	ID, State, GossipAddr, RaftAddr, GRPCAddr, ClusterID string
}

// RaftServer is a server of the Raft configuration.
type RaftServer struct {
	ID, Address string
	Voter       bool
}

// Membership is one node's gossip view beside the Raft configuration.
type Membership struct {
	Members []Member
	Servers []RaftServer
}

// Status returns the view of the cluster of whichever node answers.
func (c *Client) Status(ctx context.Context) (NodeStatus, error) {
	var st *idempb.StatusResponse
	err := c.call(ctx, toAny, 0, func(ctx context.Context, conn *grpc.ClientConn, _ time.Duration) error {
		var err error
		st, err = idempb.NewAdminClient(conn).Status(ctx, &idempb.StatusRequest{})
		return err
	})
	if err != nil {
		return NodeStatus{}, fmt.Errorf("status: %w", err)
	}
	return nodeStatusOf(st), nil
}

// Members returns whichever node answers' gossip members and Raft servers
// (an admin identity, with authentication on).
func (c *Client) Members(ctx context.Context) (Membership, error) {
	var resp *idempb.MembersResponse
	err := c.call(ctx, toAny, 0, func(ctx context.Context, conn *grpc.ClientConn, _ time.Duration) error {
		var err error
		resp, err = idempb.NewAdminClient(conn).Members(ctx, &idempb.MembersRequest{})
		return err
	})
	if err != nil {
		return Membership{}, fmt.Errorf("members: %w", err)
	}
	var m Membership
	for _, mem := range resp.GetMembers() {
		m.Members = append(m.Members, Member{ID: mem.GetId(), State: mem.GetState(), GossipAddr: mem.GetGossipAddr(),
			RaftAddr: mem.GetRaftAddr(), GRPCAddr: mem.GetGrpcAddr(), ClusterID: mem.GetClusterId()})
	}
	for _, s := range resp.GetServers() {
		m.Servers = append(m.Servers, RaftServer{ID: s.GetId(), Address: s.GetAddress(), Voter: s.GetVoter()})
	}
	return m, nil
}

// RemoveMember removes a server that is gone from the Raft configuration.
// It is sent once (membership changes are not retried): a server gossip
// sees alive is refused (FailedPrecondition), an id the configuration does
// not hold is NotFound.
func (c *Client) RemoveMember(ctx context.Context, id string) error {
	err := c.callOnce(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := idempb.NewAdminClient(conn).RemoveMember(ctx, &idempb.RemoveMemberRequest{Id: id})
		return err
	})
	if err != nil {
		return fmt.Errorf("remove member %s: %w", id, err)
	}
	return nil
}

// TransferLeadership hands leadership to the server to ("" the most
// up-to-date follower), sent once, and returns the status of the node
// asked once it knows the new leader.
func (c *Client) TransferLeadership(ctx context.Context, to string) (NodeStatus, error) {
	var st *idempb.StatusResponse
	err := c.callOnce(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
		admin := idempb.NewAdminClient(conn)
		before, err := admin.Status(ctx, &idempb.StatusRequest{})
		if err != nil {
			return err
		}
		if _, err := admin.TransferLeadership(ctx, &idempb.TransferLeadershipRequest{Id: to}); err != nil {
			return err
		}
		st, err = AwaitNewLeader(ctx, admin, before.GetLeaderId(), to)
		return err
	})
	if err != nil {
		return NodeStatus{}, fmt.Errorf("transfer leadership: %w", err)
	}
	return nodeStatusOf(st), nil
}

// Backup saves a consistent backup of the cluster into file (see the
// function Backup), from the leader. It is not retried, except that a
// OneShot client moves on to the next listed node as for any call: a
// backup may outlast an attempt's timeout.
func (c *Client) Backup(ctx context.Context, file string) (BackupInfo, error) {
	run := c.callOnce
	if c.oneShot != nil {
		run = c.oneShot.Call
	}
	var info BackupInfo
	err := run(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
		var err error
		info, err = Backup(ctx, conn, file, c.dialLeader)
		return err
	})
	return info, err
}

// dialLeader connects to the leader's advertised address, for one call.
func (c *Client) dialLeader(addr string) (*grpc.ClientConn, error) {
	if c.oneShot != nil {
		return c.oneShot.DialLeader(addr)
	}
	return grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(c.cfg.TransportCredentials)}, c.cfg.DialOptions...)...)
}

// callOnce sends attempt to one node, the leader if known, without a
// retry: for calls that are not idempotent, or that stream. A OneShot
// client still moves past nodes it cannot reach (Endpoints.Once).
func (c *Client) callOnce(ctx context.Context, attempt func(context.Context, *grpc.ClientConn) error) error {
	if c.oneShot != nil {
		once := *c.oneShot
		once.Once = true
		return once.Call(ctx, attempt)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
	}
	addr := c.target(ctx, toLeader)
	conn, err := c.conn(addr)
	if err != nil {
		return err
	}
	if err := attempt(ctx, conn); err != nil {
		if retryable(ctx, err) {
			c.forget(addr)
		}
		return classify(err)
	}
	return nil
}

// AwaitNewLeader asks the node behind admin until it knows a leader other
// than old (the one named to, if given), and returns its status: a
// leadership transfer returns once the old leader has stepped down, a
// moment before the node hears of the new one.
func AwaitNewLeader(ctx context.Context, admin idempb.AdminClient, old, to string) (*idempb.StatusResponse, error) {
	for {
		st, err := admin.Status(ctx, &idempb.StatusRequest{})
		if err != nil {
			return nil, err
		}
		if id := st.GetLeaderId(); id != "" && id != old && (to == "" || id == to) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
