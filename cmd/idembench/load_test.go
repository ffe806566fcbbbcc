package main

import (
	"errors"
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	t0 := time.Now()
	w := window{start: t0, end: t0.Add(time.Second)}
	for _, tc := range []struct {
		name string
		s, e time.Duration
		want bool
	}{
		{"inside", 10 * time.Millisecond, 20 * time.Millisecond, true},
		{"at the edges", 0, time.Second, true},
		{"started in the warm-up", -time.Millisecond, 20 * time.Millisecond, false},
		{"finished after the end", 900 * time.Millisecond, 1001 * time.Millisecond, false},
	} {
		if got := w.in(t0.Add(tc.s), t0.Add(tc.e)); got != tc.want {
			t.Errorf("%s: in = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAddUnique checks the accounting of one request against bench-peers':
// errors are only errors; lost and cas-failed requests still count.
func TestAddUnique(t *testing.T) {
	t0 := time.Now()
	base := uniqueOp{s: t0, mid: t0.Add(2 * time.Millisecond), e: t0.Add(5 * time.Millisecond)}
	boom := errors.New("boom")
	with := func(f func(*uniqueOp)) uniqueOp { op := base; f(&op); return op }
	for _, tc := range []struct {
		name     string
		op       uniqueOp
		complete bool
		want     recorder
	}{
		{"claim won", with(func(o *uniqueOp) { o.won = true }), false,
			recorder{requests: 1, storeOps: 1}},
		{"claim errored", with(func(o *uniqueOp) { o.claimErr = boom }), false,
			recorder{errors: 1, errSample: "boom"}},
		{"fresh key lost", base, false,
			recorder{requests: 1, storeOps: 1, lost: 1}},
		{"claim and complete", with(func(o *uniqueOp) { o.won, o.completeDone, o.completeOK = true, true, true }), true,
			recorder{requests: 1, storeOps: 2}},
		{"complete errored", with(func(o *uniqueOp) { o.won, o.completeErr = true, boom }), true,
			recorder{errors: 1, errSample: "boom"}},
		{"complete refused", with(func(o *uniqueOp) { o.won, o.completeDone = true, true }), true,
			recorder{requests: 1, storeOps: 2, casFailed: 1}},
	} {
		var r recorder
		r.addUnique(tc.op, tc.complete)
		got := r
		got.lat, got.claimLat, got.completeLat = nil, nil, nil
		if got.requests != tc.want.requests || got.storeOps != tc.want.storeOps || got.errors != tc.want.errors ||
			got.errSample != tc.want.errSample || got.lost != tc.want.lost || got.casFailed != tc.want.casFailed {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
		if int64(len(r.lat)) != tc.want.requests || (tc.want.storeOps == 2) != (len(r.completeLat) == 1) {
			t.Errorf("%s: latencies %v / complete %v", tc.name, r.lat, r.completeLat)
		}
		if len(r.lat) == 1 && r.lat[0] != 5*time.Millisecond {
			t.Errorf("%s: latency %v, want 5ms", tc.name, r.lat[0])
		}
	}
}
