package jsonapi_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// BenchmarkClaim compares claims of fresh keys on the leader through the
// gRPC API and through the JSON API, 64 callers at once (32 per core on
// this 2-core machine): the JSON API's cost per call is the difference
// (HTTP/1.1 connections, protojson, the in-process hop).
//
//	go test ./rpc/jsonapi -run XXX -bench Claim -benchtime 20000x
func BenchmarkClaim(b *testing.B) {
	leader := shared.WaitLeader(30e9)
	prefix := rand.Text()
	b.Run("grpc", func(b *testing.B) {
		cl := leader.Client()
		ctx := context.Background()
		var n atomic.Int64
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				key := fmt.Sprintf("%s-g-%d", prefix, n.Add(1))
				res, err := cl.Claim(ctx, &idempb.ClaimRequest{Id: &idempb.RecordId{Key: key}, Owner: "o"})
				if err != nil || res.Outcome != idempb.Outcome_OUTCOME_WON {
					b.Errorf("claim: %v %v", res, err)
					return
				}
			}
		})
	})
	b.Run("json", func(b *testing.B) {
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		url := leader.JSONURL() + "/v1/claim"
		var n atomic.Int64
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				body := fmt.Sprintf(`{"id":{"key":"%s-j-%d"},"owner":"o"}`, prefix, n.Add(1))
				resp, err := hc.Post(url, "application/json", strings.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				answer, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(answer), "OUTCOME_WON") {
					b.Errorf("HTTP %d %s", resp.StatusCode, answer)
					return
				}
			}
		})
	})
}
