package rpc

import (
	"time"

	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/fsm"
)

// Limits are the input limits of docs/API.md ("Limits"). Every violation is answered
// with InvalidArgument naming the field and the limit, and nothing is stored.
type Limits struct {
	MaxTenant      int
	MaxScope       int
	MaxKey         int
	MaxOwner       int
	MaxFingerprint int
	MaxBody        int
	MaxHeaders     int
	MaxHeaderBytes int
	// MaxPoint and MaxCheckpointData bound a recovery point's name and data.
	MaxPoint          int
	MaxCheckpointData int
	MinLease          time.Duration
	MaxLease          time.Duration
	DefaultLease      time.Duration
	MinTTL            time.Duration
	MaxTTL            time.Duration
	DefaultTTL        time.Duration
	MaxWait           time.Duration
	DefaultWait       time.Duration // for Wait without a timeout
	// MaxWaitsPerNode and MaxWaitsPerTenant cap the calls (Wait, and Claim
	// with wait) that one node holds waiting at a time, in all and for one
	// tenant; a call beyond either cap is answered ResourceExhausted with
	// reason TOO_MANY_WAITS. Waits are held, and counted, on the node that
	// serves them: the leader, or any node for a stale Wait. 0 is no cap.
	MaxWaitsPerNode   int
	MaxWaitsPerTenant int

	// MaxMessageBytes caps every message the server receives, so an
	// oversized one is refused (ResourceExhausted) before it is even
	// decoded. The default sits just above the largest valid request: a
	// Complete with the largest body and headers and every field at its
	// limit (TestLargestRequestFits). Raise it with MaxBody.
	MaxMessageBytes int
	// TenantMaxKeys and TenantMaxBytes are each tenant's quotas of stored
	// records and bytes (fsm.Quota, 0 = unlimited). They are stamped into
	// the commands this node proposes as leader, so the state machine
	// enforces them identically on every node; a refusal is
	// ResourceExhausted, reason QUOTA_EXCEEDED, with QuotaRetryAfter as
	// the retry hint (space frees when records are released or expire).
	TenantMaxKeys   uint64
	TenantMaxBytes  uint64
	QuotaRetryAfter time.Duration
	// TombstoneTTL is how long a record that completed, or expired
	// PENDING, stays a tombstone after its TTL (0: none), so a late retry
	// is answered EXPIRED instead of running again. Stamped into the
	// Claims and Completes this node proposes, like the quotas.
	TombstoneTTL time.Duration
}

// DefaultLimits returns the limits of docs/API.md.
func DefaultLimits() Limits {
	return Limits{
		MaxTenant:         128,
		MaxScope:          256,
		MaxKey:            255,
		MaxOwner:          128,
		MaxFingerprint:    64,
		MaxBody:           1 << 20,
		MaxHeaders:        64,
		MaxHeaderBytes:    16 << 10,
		MaxPoint:          128,
		MaxCheckpointData: 64 << 10,
		MinLease:          time.Second,
		MaxLease:          time.Hour,
		DefaultLease:      30 * time.Second,
		MinTTL:            time.Minute,
		MaxTTL:            30 * 24 * time.Hour,
		DefaultTTL:        24 * time.Hour,
		MaxWait:           10 * time.Minute,
		DefaultWait:       30 * time.Second,

		MaxWaitsPerNode:   10000,
		MaxWaitsPerTenant: 1000,

		MaxMessageBytes: 1<<20 + 16<<10 + messageSlack,
		QuotaRetryAfter: 10 * time.Second,
	}
}

// messageSlack is what a request holds besides the body and header bytes:
// tenant, scope, key, owner and fingerprint at their limits (about 830 B),
// the per-header framing (up to 64 x 6 B), durations, token and tags.
// 16 KiB covers it with room for the limits above to grow a little.
const messageSlack = 16 << 10

// ServerOptions are the gRPC server options that enforce l.
func (l Limits) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(l.MaxMessageBytes)}
}

// tombstone is the tombstone time the leader stamps into each Claim and
// Complete (a negative TombstoneTTL is none).
func (l Limits) tombstone() int64 { return max(0, int64(l.TombstoneTTL)) }

// quota is what the leader stamps into each Claim, Complete and Checkpoint.
func (l Limits) quota() fsm.Quota {
	return fsm.Quota{Keys: l.TenantMaxKeys, Bytes: l.TenantMaxBytes}
}
