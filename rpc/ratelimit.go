package rpc

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// ClaimRateLimit caps each tenant's claims per second on this node with a
// token bucket: a tenant may claim burst times at once, then rate times a
// second. It is enforced on the node the client called — a call a peer
// forwards was counted on the node that received it — so a tenant spread
// over n nodes may claim up to n times the rate in all; the state machine's
// quotas, not this rate, are what every node agrees on. A refused claim is
// ResourceExhausted, reason RATE_LIMITED, with a RetryInfo saying when the
// next token is due.
type ClaimRateLimit struct {
	rate  float64 // tokens per second
	burst float64
	now   func() time.Time

	// mu guards buckets and swept: taking a token reads and writes a bucket.
	mu      sync.Mutex
	buckets map[string]bucket
	swept   time.Time
}

type bucket struct {
	tokens float64
	at     time.Time // when tokens was computed
}

// sweepAbove is the number of buckets above which full ones are dropped: a
// full bucket is the same as no bucket, and tenants come and go.
const sweepAbove = 1024

// NewClaimRateLimit returns a limit of rate claims per second with bursts
// of burst (at least 1). rate must be positive.
func NewClaimRateLimit(rate float64, burst int) (*ClaimRateLimit, error) {
	if rate <= 0 || burst < 1 {
		return nil, fmt.Errorf("claim rate %v/s with burst %d: want a positive rate and a burst of at least 1", rate, burst)
	}
	return &ClaimRateLimit{rate: rate, burst: float64(burst), now: time.Now, buckets: map[string]bucket{}}, nil
}

// take spends one of tenant's tokens, or says how long until one is due.
func (l *ClaimRateLimit) take(tenant string) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	b, ok := l.buckets[tenant]
	if !ok {
		b = bucket{tokens: l.burst, at: now}
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	if b.tokens < 1 {
		l.buckets[tenant] = b
		return time.Duration((1 - b.tokens) / l.rate * float64(time.Second)), false
	}
	b.tokens--
	l.buckets[tenant] = b
	return 0, true
}

// sweep drops the buckets that have refilled, once the table is large and
// at most once per refill period, so a stream of new tenant names costs
// memory only for those seen within one period.
func (l *ClaimRateLimit) sweep(now time.Time) {
	refill := time.Duration(l.burst / l.rate * float64(time.Second))
	if len(l.buckets) <= sweepAbove || now.Sub(l.swept) < refill {
		return
	}
	l.swept = now
	for t, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*l.rate >= l.burst {
			delete(l.buckets, t)
		}
	}
}

// UnaryInterceptor refuses claims beyond the rate. It must run after the
// Authenticator's interceptor, which fills in the request's tenant from the
// credentials. A call marked as a peer's (see WithIdentity) is not counted
// again; without authentication, a call with the idem-forwarded header is
// not either — the tenant then comes from the request anyway, so the
// header gains a client nothing it could not have by naming another tenant.
func (l *ClaimRateLimit) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		claim, ok := req.(*idempb.ClaimRequest)
		if !ok || info.FullMethod != idempb.Idempotency_Claim_FullMethodName || forwardedByPeer(ctx) {
			return handler(ctx, req)
		}
		tenant := claim.GetId().GetTenant()
		if after, ok := l.take(tenant); !ok {
			return nil, toStatus(&retryLater{reason: idempb.ReasonRateLimited, after: after,
				msg:  fmt.Sprintf("tenant %q claims faster than %v/s (burst %v)", tenant, l.rate, l.burst),
				meta: map[string]string{"tenant": tenant, "rate": strconv.FormatFloat(l.rate, 'g', -1, 64)}}, slog.Default())
		}
		return handler(ctx, req)
	}
}

// forwardedByPeer reports whether another node counted this call already.
func forwardedByPeer(ctx context.Context) bool {
	if id, ok := IdentityFrom(ctx); ok {
		return id.Peer
	}
	return isForwarded(ctx)
}
