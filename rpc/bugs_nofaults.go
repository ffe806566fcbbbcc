//go:build !faults

package rpc

import (
	"context"

	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// plantedBug is empty in the release build: the planted bugs of the jepsen
// self-test (bugs_faults.go) are compiled only into a fault build
// (`go build -tags faults`). The hooks below do nothing and inline away.
type plantedBug struct{}

// unfence leaves the command's token as the caller sent it.
func (s *Server) unfence(*fsm.Command) {}

// followerGrant never answers for the leader.
func (s *Server) followerGrant(*fsm.Command) (*idempb.ClaimResponse, bool) { return nil, false }

// staleReadsPlanted is false: linearizable reads keep their barrier.
func (s *Server) staleReadsPlanted(context.Context) bool { return false }

// replayFrom resumes the feed at the cursor.
func (s *Server) replayFrom(cursor uint64) uint64 { return cursor }
