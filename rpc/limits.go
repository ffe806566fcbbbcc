package rpc

import "time"

// Limits are the input limits of DESIGN.md §1. Every violation is answered
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
	MinLease       time.Duration
	MaxLease       time.Duration
	DefaultLease   time.Duration
	MinTTL         time.Duration
	MaxTTL         time.Duration
	DefaultTTL     time.Duration
	MaxWait        time.Duration
	DefaultWait    time.Duration // for Wait without a timeout
	// MaxWaitsPerNode and MaxWaitsPerTenant cap the calls (Wait, and Claim
	// with wait) that one node holds waiting at a time, in all and for one
	// tenant; a call beyond either cap is answered ResourceExhausted with
	// reason TOO_MANY_WAITS. Waits are held, and counted, on the node that
	// serves them: the leader, or any node for a stale Wait. 0 is no cap.
	MaxWaitsPerNode   int
	MaxWaitsPerTenant int
}

// DefaultLimits returns the limits of DESIGN.md §1.
func DefaultLimits() Limits {
	return Limits{
		MaxTenant:      128,
		MaxScope:       256,
		MaxKey:         255,
		MaxOwner:       128,
		MaxFingerprint: 64,
		MaxBody:        1 << 20,
		MaxHeaders:     64,
		MaxHeaderBytes: 16 << 10,
		MinLease:       time.Second,
		MaxLease:       time.Hour,
		DefaultLease:   30 * time.Second,
		MinTTL:         time.Minute,
		MaxTTL:         30 * 24 * time.Hour,
		DefaultTTL:     24 * time.Hour,
		MaxWait:        10 * time.Minute,
		DefaultWait:    30 * time.Second,

		MaxWaitsPerNode:   10000,
		MaxWaitsPerTenant: 1000,
	}
}
