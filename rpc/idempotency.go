package rpc

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// Claim claims a key; with wait > 0 an IN_PROGRESS claim is held until the
// record leaves PENDING (see claimWaiting).
func (s *Server) Claim(ctx context.Context, req *idempb.ClaimRequest) (*idempb.ClaimResponse, error) {
	cmd, wait, err := s.limits.claim(req)
	if err != nil {
		return nil, toStatus(err, s.log)
	}
	res, err := s.apply(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if res.Outcome == fsm.OutcomeInProgress && wait > 0 {
		res, err = s.claimWaiting(ctx, cmd, res, wait)
		if err != nil {
			return nil, err
		}
	}
	return claimResponse(res), nil
}

// Complete stores the holder's response.
func (s *Server) Complete(ctx context.Context, req *idempb.CompleteRequest) (*idempb.CompleteResponse, error) {
	cmd, err := s.limits.complete(req)
	if err != nil {
		return nil, toStatus(err, s.log)
	}
	res, err := s.apply(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return &idempb.CompleteResponse{Outcome: outcomeOf(res.Outcome)}, nil
}

// Release deletes a PENDING record so the next claim re-executes.
func (s *Server) Release(ctx context.Context, req *idempb.ReleaseRequest) (*idempb.ReleaseResponse, error) {
	cmd, err := s.limits.release(req)
	if err != nil {
		return nil, toStatus(err, s.log)
	}
	res, err := s.apply(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return &idempb.ReleaseResponse{Outcome: outcomeOf(res.Outcome)}, nil
}

// Extend pushes the holder's lease.
func (s *Server) Extend(ctx context.Context, req *idempb.ExtendRequest) (*idempb.ExtendResponse, error) {
	cmd, err := s.limits.extend(req)
	if err != nil {
		return nil, toStatus(err, s.log)
	}
	res, err := s.apply(ctx, cmd)
	if err != nil {
		return nil, err
	}
	out := &idempb.ExtendResponse{Outcome: outcomeOf(res.Outcome)}
	if res.Outcome == fsm.OutcomeOK && res.Record != nil {
		out.LeaseExpiresAt = timestamp(res.Record.LeaseExpiresAt)
	}
	return out, nil
}

// Get returns the record as it is: OK with the record, or NOT_FOUND.
func (s *Server) Get(ctx context.Context, req *idempb.GetRequest) (*idempb.GetResponse, error) {
	key, err := s.limits.recordKey(req.GetId())
	if err != nil {
		return nil, toStatus(err, s.log)
	}
	if err := s.readBarrier(ctx, req.GetConsistency()); err != nil {
		return nil, err
	}
	r, ok := s.backend.Machine().Get(key)
	if !ok {
		return &idempb.GetResponse{Outcome: idempb.Outcome_OUTCOME_NOT_FOUND}, nil
	}
	return &idempb.GetResponse{Outcome: idempb.Outcome_OUTCOME_OK, Record: recordOf(r)}, nil
}

// readBarrier makes the following local read linearizable unless the
// caller asked for a stale read.
func (s *Server) readBarrier(ctx context.Context, c idempb.Consistency) error {
	if c == idempb.Consistency_CONSISTENCY_STALE {
		return nil
	}
	return toStatus(s.backend.LinearizableBarrier(ctx), s.log)
}

// Status reports the node's view of the cluster.
func (s *Server) Status(ctx context.Context, _ *idempb.StatusRequest) (*idempb.StatusResponse, error) {
	st := s.backend.Status()
	var fsmTime *timestamppb.Timestamp
	if st.FSMTime != 0 {
		fsmTime = timestamp(st.FSMTime)
	}
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
		FsmTime:      fsmTime,
	}, nil
}
