package rpc

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// Wait holds the call until the record leaves PENDING or the timeout ends.
// The state machine wakes it (Machine.GetWatch); nothing polls.
func (s *Server) Wait(ctx context.Context, req *idempb.WaitRequest) (*idempb.WaitResponse, error) {
	key, err := s.limits.recordKey(req.GetId())
	if err != nil {
		return nil, toStatus(err, s.log)
	}
	timeout, err := duration("timeout", req.GetTimeout(), 0, s.limits.MaxWait, s.limits.DefaultWait)
	if err != nil {
		return nil, toStatus(err, s.log)
	}
	return routed(ctx, s, func(ctx context.Context) (*idempb.WaitResponse, error) {
		if err := s.readBarrier(ctx, req.GetConsistency()); err != nil {
			return nil, err
		}
		return s.waitLocal(ctx, key, timeout), nil
	}, func(ctx context.Context, c *grpc.ClientConn) (*idempb.WaitResponse, error) {
		return idempb.NewIdempotencyClient(c).Wait(ctx, req)
	})
}

// waitLocal watches the local state machine; every change it sees was
// committed, so the answer is never older than the read barrier before it.
func (s *Server) waitLocal(ctx context.Context, key fsm.RecordKey, timeout time.Duration) *idempb.WaitResponse {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		r, ok, changed := s.backend.Machine().GetWatch(key)
		switch {
		case !ok:
			return &idempb.WaitResponse{Outcome: idempb.Outcome_OUTCOME_NOT_FOUND}
		case changed == nil:
			return &idempb.WaitResponse{Outcome: idempb.Outcome_OUTCOME_COMPLETED, Record: recordOf(r)}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return &idempb.WaitResponse{Outcome: idempb.Outcome_OUTCOME_IN_PROGRESS, Record: recordOf(r)}
		}
	}
}

// claimWaiting holds an IN_PROGRESS claim until the record leaves PENDING or
// the holder's lease runs out, then claims again: the retry then replays the
// completion, wins a released key, or takes over an expired lease. When the
// wait ends first, the last IN_PROGRESS answer stands.
func (s *Server) claimWaiting(ctx context.Context, cmd *fsm.Command, res fsm.Result, wait time.Duration) (fsm.Result, error) {
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for res.Outcome == fsm.OutcomeInProgress {
		// The claim just applied locally, so the local state is at least as
		// new as the answer: no read barrier is needed to watch it.
		r, ok, changed := s.backend.Machine().GetWatch(cmd.Key)
		if ok && changed != nil && r.Token == res.Record.Token {
			leaseEnd := time.NewTimer(time.Until(time.Unix(0, r.LeaseExpiresAt)))
			select {
			case <-changed:
			case <-leaseEnd.C:
			case <-waitCtx.Done():
				leaseEnd.Stop()
				return res, nil
			}
			leaseEnd.Stop()
		}
		next, err := s.backend.Apply(ctx, cmd)
		if err != nil {
			return fsm.Result{}, err
		}
		res = next
	}
	return res, nil
}
