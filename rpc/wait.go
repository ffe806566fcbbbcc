package rpc

import (
	"context"
	"time"

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
	if err := s.readBarrier(ctx, req.GetConsistency()); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		r, ok, changed := s.backend.Machine().GetWatch(key)
		switch {
		case !ok:
			return &idempb.WaitResponse{Outcome: idempb.Outcome_OUTCOME_NOT_FOUND}, nil
		case changed == nil:
			return &idempb.WaitResponse{Outcome: idempb.Outcome_OUTCOME_COMPLETED, Record: recordOf(r)}, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return &idempb.WaitResponse{Outcome: idempb.Outcome_OUTCOME_IN_PROGRESS, Record: recordOf(r)}, nil
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
		next, err := s.apply(ctx, cmd)
		if err != nil {
			return fsm.Result{}, err
		}
		res = next
	}
	return res, nil
}
