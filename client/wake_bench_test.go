package client_test

import (
	"slices"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
)

// BenchmarkWaitWake measures how soon a waiting duplicate returns once the
// holder's completion is acknowledged: per operation, a holder claims a
// key, a duplicate waits on the server (Wait, or Claim with wait), and the
// holder completes. It reports the delay from the holder's Complete
// returning to the duplicate returning (p50, p99, max; negative when the
// duplicate was answered first), and from the Complete being sent.
//
//	go test -run '^$' -bench WaitWake -benchtime 200x ./client/
func BenchmarkWaitWake(b *testing.B) {
	for _, mode := range []string{"Wait", "ClaimWait"} {
		b.Run(mode, func(b *testing.B) {
			cl := newClient(b, shared)
			ctx := testCtx(b)
			var sinceDone, sinceSent []time.Duration
			for range b.N {
				id := newID()
				holder, err := cl.Claim(ctx, id, nil)
				if err != nil || holder.Outcome != client.OutcomeWon {
					b.Fatalf("holder's claim = %+v, %v", holder, err)
				}
				returned := make(chan time.Time, 1)
				heldOnLeader(b, shared, 1, func() {
					go func() {
						var err error
						if mode == "Wait" {
							_, err = cl.Wait(ctx, id, time.Minute)
						} else {
							_, err = cl.Claim(ctx, id, nil, client.WithWait(time.Minute))
						}
						if err != nil {
							b.Error(err)
						}
						returned <- time.Now()
					}()
				})
				sent := time.Now()
				if out, err := cl.Complete(ctx, id, holder.Token, client.Response{Status: 200}); err != nil || out != client.OutcomeOK {
					b.Fatalf("complete = %s, %v", out, err)
				}
				done := time.Now()
				woke := <-returned
				sinceDone = append(sinceDone, woke.Sub(done))
				sinceSent = append(sinceSent, woke.Sub(sent))
			}
			report(b, "after-complete", sinceDone)
			report(b, "after-send", sinceSent)
		})
	}
}

func report(b *testing.B, name string, ds []time.Duration) {
	slices.Sort(ds)
	ms := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(ms(0.5), name+"-p50-ms")
	b.ReportMetric(ms(0.99), name+"-p99-ms")
	b.ReportMetric(ms(1), name+"-max-ms")
}
