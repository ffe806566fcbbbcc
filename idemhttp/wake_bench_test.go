package idemhttp_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
)

// BenchmarkDuplicateWake measures, end to end over HTTP, how soon a
// duplicate request that waits for the one in flight returns once the
// first request's response has arrived: per operation the first request's
// handler blocks, a duplicate is sent and held by the server, then the
// handler finishes. Reported: the delay from the first response arriving
// to the duplicate's arriving (p50, p99, max).
//
//	go test -run '^$' -bench DuplicateWake -benchtime 200x ./idemhttp/
func BenchmarkDuplicateWake(b *testing.B) {
	var started, finish chan struct{}
	srv := serve(b, idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-finish
		w.WriteHeader(http.StatusCreated)
	}), idemhttp.WaitFor(time.Minute))
	url := srv.URL + "/v1/charges"
	var delays []time.Duration
	for range b.N {
		started, finish = make(chan struct{}), make(chan struct{})
		key := client.NewKey()
		firstAt, dupAt := make(chan time.Time, 1), make(chan time.Time, 1)
		go func() {
			request(b, "POST", url, key, `{}`)
			firstAt <- time.Now()
		}()
		<-started
		heldOnLeader(b, 1, func() {
			go func() {
				if r := request(b, "POST", url, key, `{}`); r.header.Get("Idempotent-Replayed") != "true" {
					b.Errorf("duplicate = %d, not a replay", r.status)
				}
				dupAt <- time.Now()
			}()
		})
		close(finish)
		first := <-firstAt
		delays = append(delays, (<-dupAt).Sub(first))
	}
	slices.Sort(delays)
	ms := func(q float64) float64 {
		return float64(delays[int(q*float64(len(delays)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(0.5), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
	b.ReportMetric(ms(1), "max-ms")
}
