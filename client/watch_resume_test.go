package client_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// cutStream is a watch stream whose node "went away" before it sent
// anything.
type cutStream struct{ grpc.ClientStream }

func (cutStream) RecvMsg(any) error { return status.Error(codes.Unavailable, "cut by the test") }

// TestWatchAbandonedOnResume: when a watch stream ends with a failure the
// watch retries, OnResume is told which node it was, why, and the cursor
// the watch resumes after (what `idemnode abandoned --watch` prints), and
// the watch opens a new stream.
func TestWatchAbandonedOnResume(t *testing.T) {
	t.Parallel()
	var streams atomic.Int64
	cl := newClient(t, shared, func(cfg *client.Config) {
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainStreamInterceptor(
			func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				s, err := streamer(ctx, desc, cc, method, opts...)
				if err == nil && method == idempb.Idempotency_WatchAbandoned_FullMethodName && streams.Add(1) == 1 {
					return cutStream{s}, nil
				}
				return s, err
			}))
	})
	type resume struct {
		addr   string
		code   codes.Code
		cursor uint64
	}
	var mu sync.Mutex
	var resumes []resume
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	// The feed's end now: a cursor the cluster accepts.
	after := shared.WaitLeader(30 * time.Second).Node().Machine().Meta().Feed.Seq
	watched := make(chan error, 1)
	go func() {
		watched <- cl.WatchAbandoned(ctx, "", after, func(client.FeedUpdate) error { return nil },
			client.OnResume(func(addr string, err error, cursor uint64) {
				mu.Lock()
				defer mu.Unlock()
				resumes = append(resumes, resume{addr, status.Code(err), cursor})
			}))
	}()
	testutil.Eventually(t, 20*time.Second, "a second stream", func() bool { return streams.Load() >= 2 })
	cancel()
	if err := <-watched; !errors.Is(err, context.Canceled) {
		t.Fatalf("watch ended with %v, want context.Canceled", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(resumes) == 0 {
		t.Fatal("OnResume was not called after the cut stream")
	}
	r := resumes[0]
	if !slices.Contains(addrs(shared), r.addr) || r.code != codes.Unavailable || r.cursor != after {
		t.Fatalf("OnResume(%q, %v, %d); want a node of the cluster, Unavailable, %d", r.addr, r.code, r.cursor, after)
	}
}
