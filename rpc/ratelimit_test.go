package rpc

import (
	"fmt"
	"testing"
	"time"
)

// fakeClock is a settable clock for the buckets.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func mustRate(t *testing.T, rate float64, burst int) (*ClaimRateLimit, *fakeClock) {
	t.Helper()
	l, err := NewClaimRateLimit(rate, burst)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l.now = clock.now
	return l, clock
}

func TestClaimRateBucket(t *testing.T) {
	l, clock := mustRate(t, 2, 3) // 2 claims a second, 3 at once
	for i := range 3 {
		if _, ok := l.take("acme"); !ok {
			t.Fatalf("claim %d of the burst refused", i+1)
		}
	}
	after, ok := l.take("acme")
	if ok || after != 500*time.Millisecond {
		t.Fatalf("claim past the burst: ok=%v retry after %s, want refused, 500ms", ok, after)
	}
	if _, ok := l.take("globex"); !ok {
		t.Fatal("another tenant was refused for acme's burst")
	}
	clock.advance(250 * time.Millisecond)
	if after, ok := l.take("acme"); ok || after != 250*time.Millisecond {
		t.Fatalf("half a token later: ok=%v after %s, want refused, 250ms", ok, after)
	}
	clock.advance(250 * time.Millisecond)
	if _, ok := l.take("acme"); !ok {
		t.Fatal("a refilled token was refused")
	}
	// Idle for long: back to the burst, never more.
	clock.advance(time.Hour)
	for i := range 3 {
		if _, ok := l.take("acme"); !ok {
			t.Fatalf("claim %d after idling refused", i+1)
		}
	}
	if _, ok := l.take("acme"); ok {
		t.Fatal("idling saved up more than the burst")
	}
}

func TestClaimRateSweepsFullBuckets(t *testing.T) {
	l, clock := mustRate(t, 10, 1)
	for i := range sweepAbove + 10 {
		l.take(fmt.Sprintf("tenant-%d", i))
	}
	l.take("busy")
	clock.advance(150 * time.Millisecond) // every bucket refilled (0.1 s)
	l.take("busy")                        // sweeps every full bucket, then takes a token
	if n := len(l.buckets); n != 1 {
		t.Fatalf("%d buckets after the sweep, want busy's alone", n)
	}
	if _, ok := l.take("busy"); ok {
		t.Fatal("the sweep reset a bucket in use")
	}
}

func TestClaimRateConfig(t *testing.T) {
	for _, c := range []struct {
		rate  float64
		burst int
	}{{0, 1}, {-1, 1}, {1, 0}} {
		if _, err := NewClaimRateLimit(c.rate, c.burst); err == nil {
			t.Errorf("rate %v burst %d accepted", c.rate, c.burst)
		}
	}
}
