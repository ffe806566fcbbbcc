package rpc

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/clock"
	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// Waiting calls are held on the node that serves them and woken by the state
// machine (Machine.GetWatch), by the end of the holder's lease, by the
// call's own timeout, by a change of this node's leadership, or by
// Shutdown: nothing polls. A wait that loses its leader ends with
// Unavailable (reason LEADERSHIP_LOST), which a follower that forwarded the
// call, and the SDK, retry against the new leader; one on a node that shuts
// down ends with Unavailable (SHUTTING_DOWN), retried on another node,
// instead of being cut off with the connection. Only a call that actually
// blocks takes one of the slots that MaxWaitsPerNode and MaxWaitsPerTenant
// cap.

// errLeaderChanged ends a wait whose node stopped leading (or never led
// when the wait began): Unavailable, reason LEADERSHIP_LOST.
var errLeaderChanged = errors.New("leadership changed while waiting; retry on the new leader")

// Wait holds the call until the record leaves PENDING or the timeout ends.
func (s *Server) Wait(ctx context.Context, req *idempb.WaitRequest) (*idempb.WaitResponse, error) {
	key, timeout, err := s.limits.wait(req)
	if err != nil {
		return nil, toStatus(err, s.log)
	}
	return routed(ctx, s, func(ctx context.Context) (*idempb.WaitResponse, error) {
		if err := s.readBarrier(ctx, req.GetConsistency()); err != nil {
			return nil, err
		}
		// A stale wait may be served by any node, so it does not end on a
		// leadership change (lost stays nil).
		var lost <-chan struct{}
		stale := req.GetConsistency() == idempb.Consistency_CONSISTENCY_STALE || s.staleReadsPlanted(ctx)
		if !stale {
			if lost, err = s.leadership(); err != nil {
				return nil, err
			}
		}
		return s.waitLocal(ctx, key, timeout, lost)
	}, viaUnary(s, func(ctx context.Context, c *grpc.ClientConn) (*idempb.WaitResponse, error) {
		return idempb.NewIdempotencyClient(c).Wait(ctx, req)
	}))
}

// waitLocal watches the local state machine; every change it sees was
// committed, so the answer is never older than the read barrier before it.
// lost, when not nil, ends the wait with errLeaderChanged.
func (s *Server) waitLocal(ctx context.Context, key fsm.RecordKey, timeout time.Duration, lost <-chan struct{}) (*idempb.WaitResponse, error) {
	ctx, cancel := clock.WithTimeout(ctx, s.clock, timeout)
	defer cancel()
	var release func()
	defer func() {
		if release != nil {
			release()
		}
	}()
	for {
		r, ok, changed := s.backend.Machine().GetWatch(key)
		switch {
		case !ok:
			if ts, gone := s.backend.Machine().Tombstone(key); gone {
				return &idempb.WaitResponse{Outcome: idempb.Outcome_OUTCOME_EXPIRED, Record: tombstoneRecordOf(ts)}, nil
			}
			return &idempb.WaitResponse{Outcome: idempb.Outcome_OUTCOME_NOT_FOUND}, nil
		case changed == nil:
			return &idempb.WaitResponse{Outcome: idempb.Outcome_OUTCOME_COMPLETED, Record: recordOf(r)}, nil
		}
		if release == nil {
			var err error
			if release, err = s.waitSlot(key.Tenant); err != nil {
				return nil, err
			}
		}
		select {
		case <-changed:
		case <-lost:
			return nil, errLeaderChanged
		case <-s.closing:
			return nil, cluster.ErrShutdown
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
	waitCtx, cancel := clock.WithTimeout(ctx, s.clock, wait)
	defer cancel()
	release, err := s.waitSlot(cmd.Key.Tenant)
	if err != nil {
		return fsm.Result{}, err
	}
	defer release()
	// The claim just committed here, so this node led a moment ago; a
	// change from now on ends the wait.
	lost, err := s.leadership()
	if err != nil {
		return fsm.Result{}, err
	}
	for res.Outcome == fsm.OutcomeInProgress {
		// The claim just applied locally, so the local state is at least as
		// new as the answer: no read barrier is needed to watch it.
		r, ok, changed := s.backend.Machine().GetWatch(cmd.Key)
		if ok && changed != nil && r.Token == res.Record.Token {
			// The lease ends by the clock that stamped it: the leader's,
			// which is this node's (it just committed the claim).
			leaseEnd := s.clock.NewTimer(time.Unix(0, r.LeaseExpiresAt).Sub(s.clock.Now()))
			select {
			case <-changed:
			case <-leaseEnd.C():
			case <-lost:
				leaseEnd.Stop()
				return fsm.Result{}, errLeaderChanged
			case <-s.closing:
				leaseEnd.Stop()
				return fsm.Result{}, cluster.ErrShutdown
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

// waitSlot takes one of the node's wait slots for tenant.
func (s *Server) waitSlot(tenant string) (func(), error) {
	return s.waits.acquire(tenant, s.limits.MaxWaitsPerNode, s.limits.MaxWaitsPerTenant)
}

// leadership returns a channel closed when this node's leadership changes,
// or errLeaderChanged when it does not lead now. The channel is taken
// before the check, so a change between the two is never missed.
func (s *Server) leadership() (<-chan struct{}, error) {
	changed := s.backend.LeaderChanged()
	if id, _ := s.backend.Leader(); id != s.backend.ID() {
		return nil, errLeaderChanged
	}
	return changed, nil
}
