package rpc

import (
	"context"

	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// Each handler validates the request here, on the node that received it,
// so bad input never travels; then routed runs it locally on the leader or
// forwards the request unchanged to the leader.

// Claim claims a key; with wait > 0 an IN_PROGRESS claim is held until the
// record leaves PENDING (see claimWaiting).
func (s *Server) Claim(ctx context.Context, req *idempb.ClaimRequest) (*idempb.ClaimResponse, error) {
	cmd, wait, err := s.limits.claim(req)
	if err != nil {
		return nil, toStatus(err, s.log)
	}
	resp, err := routed(ctx, s, func(ctx context.Context) (*idempb.ClaimResponse, error) {
		if resp, ok := s.followerGrant(cmd); ok {
			return resp, nil
		}
		res, err := s.backend.Apply(ctx, cmd)
		if err == nil && res.Outcome == fsm.OutcomeInProgress && wait > 0 {
			res, err = s.claimWaiting(ctx, cmd, res, wait)
		}
		if err != nil {
			return nil, err
		}
		return claimResponse(res), nil
	}, viaStream(s, func() *idempb.ForwardCall {
		return &idempb.ForwardCall{Request: &idempb.ForwardCall_Claim{Claim: req}}
	}, (*idempb.ForwardReply).GetClaim, func(ctx context.Context, c idempb.IdempotencyClient) (*idempb.ClaimResponse, error) {
		return c.Claim(ctx, req)
	}))
	s.countClaim(ctx, cmd.Key.Tenant, resp)
	return resp, err
}

// Complete stores the holder's response.
func (s *Server) Complete(ctx context.Context, req *idempb.CompleteRequest) (*idempb.CompleteResponse, error) {
	cmd, err := s.limits.complete(req)
	if err != nil {
		return nil, toStatus(err, s.log)
	}
	return routed(ctx, s, func(ctx context.Context) (*idempb.CompleteResponse, error) {
		s.unfence(cmd)
		res, err := s.backend.Apply(ctx, cmd)
		if err != nil {
			return nil, err
		}
		return &idempb.CompleteResponse{Outcome: outcomeOf(res.Outcome)}, nil
	}, viaStream(s, func() *idempb.ForwardCall {
		return &idempb.ForwardCall{Request: &idempb.ForwardCall_Complete{Complete: req}}
	}, (*idempb.ForwardReply).GetComplete, func(ctx context.Context, c idempb.IdempotencyClient) (*idempb.CompleteResponse, error) {
		return c.Complete(ctx, req)
	}))
}

// Release deletes a PENDING record so the next claim re-executes.
func (s *Server) Release(ctx context.Context, req *idempb.ReleaseRequest) (*idempb.ReleaseResponse, error) {
	cmd, err := s.limits.release(req)
	if err != nil {
		return nil, toStatus(err, s.log)
	}
	return routed(ctx, s, func(ctx context.Context) (*idempb.ReleaseResponse, error) {
		res, err := s.backend.Apply(ctx, cmd)
		if err != nil {
			return nil, err
		}
		return &idempb.ReleaseResponse{Outcome: outcomeOf(res.Outcome)}, nil
	}, viaStream(s, func() *idempb.ForwardCall {
		return &idempb.ForwardCall{Request: &idempb.ForwardCall_Release{Release: req}}
	}, (*idempb.ForwardReply).GetRelease, func(ctx context.Context, c idempb.IdempotencyClient) (*idempb.ReleaseResponse, error) {
		return c.Release(ctx, req)
	}))
}

// Extend pushes the holder's lease.
func (s *Server) Extend(ctx context.Context, req *idempb.ExtendRequest) (*idempb.ExtendResponse, error) {
	cmd, err := s.limits.extend(req)
	if err != nil {
		return nil, toStatus(err, s.log)
	}
	return routed(ctx, s, func(ctx context.Context) (*idempb.ExtendResponse, error) {
		res, err := s.backend.Apply(ctx, cmd)
		if err != nil {
			return nil, err
		}
		out := &idempb.ExtendResponse{Outcome: outcomeOf(res.Outcome)}
		if res.Outcome == fsm.OutcomeOK && res.Record != nil {
			out.LeaseExpiresAt = timestamp(res.Record.LeaseExpiresAt)
		}
		return out, nil
	}, viaStream(s, func() *idempb.ForwardCall {
		return &idempb.ForwardCall{Request: &idempb.ForwardCall_Extend{Extend: req}}
	}, (*idempb.ForwardReply).GetExtend, func(ctx context.Context, c idempb.IdempotencyClient) (*idempb.ExtendResponse, error) {
		return c.Extend(ctx, req)
	}))
}

// Checkpoint stores the holder's recovery point (docs/API.md, "Recovery
// points").
func (s *Server) Checkpoint(ctx context.Context, req *idempb.CheckpointRequest) (*idempb.CheckpointResponse, error) {
	cmd, err := s.limits.checkpoint(req)
	if err != nil {
		return nil, toStatus(err, s.log)
	}
	return routed(ctx, s, func(ctx context.Context) (*idempb.CheckpointResponse, error) {
		res, err := s.backend.Apply(ctx, cmd)
		if err != nil {
			return nil, err
		}
		return &idempb.CheckpointResponse{Outcome: outcomeOf(res.Outcome)}, nil
	}, viaStream(s, func() *idempb.ForwardCall {
		return &idempb.ForwardCall{Request: &idempb.ForwardCall_Checkpoint{Checkpoint: req}}
	}, (*idempb.ForwardReply).GetCheckpoint, func(ctx context.Context, c idempb.IdempotencyClient) (*idempb.CheckpointResponse, error) {
		return c.Checkpoint(ctx, req)
	}))
}

// Get returns the record as it is: OK with the record, or NOT_FOUND. A
// linearizable read runs on the leader (a follower forwards it); a stale
// read is served from this node's state.
func (s *Server) Get(ctx context.Context, req *idempb.GetRequest) (*idempb.GetResponse, error) {
	key, err := s.limits.get(req)
	if err != nil {
		return nil, toStatus(err, s.log)
	}
	return routed(ctx, s, func(ctx context.Context) (*idempb.GetResponse, error) {
		if err := s.readBarrier(ctx, req.GetConsistency()); err != nil {
			return nil, err
		}
		r, ok := s.backend.Machine().Get(key)
		if !ok {
			if ts, gone := s.backend.Machine().Tombstone(key); gone {
				return &idempb.GetResponse{Outcome: idempb.Outcome_OUTCOME_EXPIRED, Record: tombstoneRecordOf(ts)}, nil
			}
			return &idempb.GetResponse{Outcome: idempb.Outcome_OUTCOME_NOT_FOUND}, nil
		}
		return &idempb.GetResponse{Outcome: idempb.Outcome_OUTCOME_OK, Record: recordOf(r)}, nil
	}, viaStream(s, func() *idempb.ForwardCall {
		return &idempb.ForwardCall{Request: &idempb.ForwardCall_Get{Get: req}}
	}, (*idempb.ForwardReply).GetGet, func(ctx context.Context, c idempb.IdempotencyClient) (*idempb.GetResponse, error) {
		return c.Get(ctx, req)
	}))
}

// readBarrier makes the following local read linearizable unless the
// caller asked for a stale read.
func (s *Server) readBarrier(ctx context.Context, c idempb.Consistency) error {
	if c == idempb.Consistency_CONSISTENCY_STALE || s.staleReadsPlanted(ctx) {
		return nil
	}
	return s.backend.LinearizableBarrier(ctx)
}
