package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/fsm"
)

// defaultApplyTimeout bounds a command whose context has no deadline.
const defaultApplyTimeout = 10 * time.Second

// stamp sets the proposal time on c and, for a batch, on every command in it.
func stamp(c *fsm.Command, now int64) {
	c.Now = now
	for _, sub := range c.Batch {
		sub.Now = now
	}
}

func timeoutOf(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return defaultApplyTimeout
}

// ErrLeadershipLost means leadership was lost after the command was
// appended: it may or may not be committed (an indeterminate outcome).
var ErrLeadershipLost = errors.New("leadership lost while committing")

// translate maps raft's errors onto the cluster's sentinels.
func translate(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		// Refused before it was appended: safe to send to the next leader.
		return ErrNotLeader
	case errors.Is(err, raft.ErrLeadershipLost):
		return ErrLeadershipLost
	case errors.Is(err, raft.ErrRaftShutdown), errors.Is(err, ErrShutdown):
		return ErrShutdown
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return ErrTimeout
	}
	return fmt.Errorf("raft apply: %w", err)
}
