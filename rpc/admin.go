package rpc

import (
	"context"

	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// Status reports this node's view of the cluster (never forwarded: an
// operator asks a node about itself).
func (s *Server) Status(context.Context, *idempb.StatusRequest) (*idempb.StatusResponse, error) {
	st := s.backend.Status()
	return &idempb.StatusResponse{
		NodeId:       st.NodeID,
		State:        st.State,
		LeaderId:     st.LeaderID,
		LeaderAddr:   st.LeaderAddr,
		Term:         st.Term,
		CommitIndex:  st.CommitIndex,
		AppliedIndex: st.AppliedIndex,
		Records:      uint64(st.Records),
		Digest:       st.Digest,
		FsmTime:      timestamp(st.FSMTime),
		ClusterId:    st.Cluster,
	}, nil
}

// Members lists this node's gossip view and the Raft configuration.
func (s *Server) Members(context.Context, *idempb.MembersRequest) (*idempb.MembersResponse, error) {
	m, err := s.backend.Members()
	if err != nil {
		return nil, toStatus(err, s.log)
	}
	out := &idempb.MembersResponse{}
	for _, mem := range m.Members {
		out.Members = append(out.Members, &idempb.Member{Id: mem.ID, GossipAddr: mem.Gossip,
			RaftAddr: mem.Raft, GrpcAddr: mem.GRPC, State: mem.State, ClusterId: mem.Cluster})
	}
	for _, srv := range m.Servers {
		out.Servers = append(out.Servers, &idempb.RaftServer{Id: srv.ID, Address: srv.Address, Voter: srv.Voter})
	}
	return out, nil
}

// RemoveMember removes a server from the Raft configuration on the leader.
func (s *Server) RemoveMember(ctx context.Context, req *idempb.RemoveMemberRequest) (*idempb.RemoveMemberResponse, error) {
	if req.GetId() == "" {
		return nil, toStatus(invalid("id", "non-empty", "missing"), s.log)
	}
	return routed(ctx, s, func(ctx context.Context) (*idempb.RemoveMemberResponse, error) {
		return &idempb.RemoveMemberResponse{}, s.backend.RemoveMember(ctx, req.GetId())
	}, viaUnary(s, func(ctx context.Context, c *grpc.ClientConn) (*idempb.RemoveMemberResponse, error) {
		return idempb.NewAdminClient(c).RemoveMember(ctx, req)
	}))
}

// TransferLeadership hands leadership away from the current leader.
func (s *Server) TransferLeadership(ctx context.Context, req *idempb.TransferLeadershipRequest) (*idempb.TransferLeadershipResponse, error) {
	return routed(ctx, s, func(ctx context.Context) (*idempb.TransferLeadershipResponse, error) {
		return &idempb.TransferLeadershipResponse{}, s.backend.TransferLeadership(ctx, req.GetId())
	}, viaUnary(s, func(ctx context.Context, c *grpc.ClientConn) (*idempb.TransferLeadershipResponse, error) {
		return idempb.NewAdminClient(c).TransferLeadership(ctx, req)
	}))
}

// snapshotChunk is the size of the data messages of a backup stream.
const snapshotChunk = 256 << 10

// Snapshot streams a consistent backup from the leader. A follower answers
// Unavailable (NOT_LEADER); the CLI asks it for the leader's address first.
func (s *Server) Snapshot(_ *idempb.SnapshotRequest, stream idempb.Admin_SnapshotServer) error {
	w := &chunkWriter{send: func(b []byte) error { return stream.Send(&idempb.SnapshotChunk{Data: b}) }}
	info, err := s.backend.Backup(stream.Context(), w)
	if err == nil {
		err = w.flush()
	}
	if err != nil {
		return toStatus(err, s.log)
	}
	return stream.Send(&idempb.SnapshotChunk{Summary: &idempb.SnapshotSummary{Sha256: info.SHA256, Bytes: uint64(info.Bytes),
		AppliedIndex: info.Applied, Digest: info.Digest, Records: uint64(info.Records)}})
}

// chunkWriter cuts a byte stream into messages of snapshotChunk bytes.
type chunkWriter struct {
	buf  []byte
	send func([]byte) error
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	c.buf = append(c.buf, p...)
	for len(c.buf) >= snapshotChunk {
		if err := c.send(c.buf[:snapshotChunk:snapshotChunk]); err != nil {
			return 0, err
		}
		c.buf = append([]byte(nil), c.buf[snapshotChunk:]...)
	}
	return len(p), nil
}

func (c *chunkWriter) flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	err := c.send(c.buf)
	c.buf = nil
	return err
}
