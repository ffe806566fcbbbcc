package testclock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemnode/idemnode/clock"
)

var start = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// TestTimersFireOnlyWhenAdvancedPastTheirDeadline: nothing fires before its
// time; Advance fires what is due, at its own deadline; Stop disarms.
func TestTimersFireOnlyWhenAdvancedPastTheirDeadline(t *testing.T) {
	c := New(start)
	short, long, stopped := c.NewTimer(time.Second), c.NewTimer(time.Minute), c.NewTimer(time.Second)
	if !stopped.Stop() || c.Waiting() != 2 {
		t.Fatalf("Stop of a pending timer: %d still armed, want 2", c.Waiting())
	}
	c.Advance(999 * time.Millisecond)
	select {
	case <-short.C():
		t.Fatal("a 1 s timer fired after 999 ms")
	default:
	}
	c.Advance(time.Millisecond)
	if at := <-short.C(); !at.Equal(start.Add(time.Second)) {
		t.Fatalf("fired at %v, want its deadline", at)
	}
	select {
	case <-long.C():
		t.Fatal("a 1 min timer fired after 1 s")
	case <-stopped.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	if got := c.Now(); !got.Equal(start.Add(time.Second)) {
		t.Fatalf("Now = %v after advancing 1 s", got)
	}
}

// TestTickerFiresEveryPeriodAndDropsMissedTicks, as time.Ticker does for a
// late reader.
func TestTickerFiresEveryPeriodAndDropsMissedTicks(t *testing.T) {
	c := New(start)
	tk := c.NewTicker(time.Second)
	defer tk.Stop()
	c.Advance(3500 * time.Millisecond)
	<-tk.C()
	select {
	case <-tk.C():
		t.Fatal("missed ticks were queued")
	default:
	}
	c.Advance(500 * time.Millisecond)
	if at := <-tk.C(); !at.Equal(start.Add(4 * time.Second)) {
		t.Fatalf("tick at %v, want 4 s", at)
	}
}

// TestWithTimeoutEndsOnTheFakeClock: the context lives while the clock
// stands, however long that is in real time, and ends with
// DeadlineExceeded once advanced past its timeout.
func TestWithTimeoutEndsOnTheFakeClock(t *testing.T) {
	c := New(start)
	ctx, cancel := clock.WithTimeout(context.Background(), c, time.Second)
	defer cancel()
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("a fake clock's timeout set a real deadline")
	}
	select {
	case <-ctx.Done():
		t.Fatal("ended before the clock moved")
	case <-time.After(50 * time.Millisecond):
	}
	c.Advance(time.Second)
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want DeadlineExceeded", ctx.Err())
	}
	cancelled, cancel2 := clock.WithTimeout(context.Background(), c, time.Hour)
	cancel2()
	if !errors.Is(cancelled.Err(), context.Canceled) {
		t.Fatalf("cancelled: Err = %v, want Canceled", cancelled.Err())
	}
}

// TestOffsetShiftsNowOnly: an offset clock reads later, its timers run on
// the clock below.
func TestOffsetShiftsNowOnly(t *testing.T) {
	c := New(start)
	o := clock.Offset(c, -time.Hour)
	if got := o.Now(); !got.Equal(start.Add(-time.Hour)) {
		t.Fatalf("Now = %v, want an hour earlier", got)
	}
	tm := o.NewTimer(time.Second)
	c.Advance(time.Second)
	<-tm.C()
}
