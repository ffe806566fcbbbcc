package rpc

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// echoLeader answers forwarded Gets with the id they asked for. It holds
// its replies until release is closed, and records the calls per message.
type echoLeader struct {
	idempb.UnimplementedForwardServer
	release chan struct{}
	mu      sync.Mutex
	sizes   []int
	// breakAfter ends the stream after this many messages (0: never).
	breakAfter int
}

func (e *echoLeader) Calls(stream idempb.Forward_CallsServer) error {
	for {
		msg, err := stream.Recv()
		if err != nil {
			return err
		}
		e.mu.Lock()
		e.sizes = append(e.sizes, len(msg.GetCalls()))
		broken := e.breakAfter > 0 && len(e.sizes) >= e.breakAfter
		e.mu.Unlock()
		if broken {
			return status.Error(codes.Unavailable, "leader went away")
		}
		<-e.release
		out := &idempb.ForwardReplies{}
		for _, c := range msg.GetCalls() {
			out.Replies = append(out.Replies, &idempb.ForwardReply{Id: c.GetId(),
				Response: &idempb.ForwardReply_Get{Get: &idempb.GetResponse{Record: &idempb.Record{Id: c.GetGet().GetId()}}}})
		}
		if err := stream.Send(out); err != nil {
			return err
		}
	}
}

// linkTo starts e and opens a forwarding link to it.
func linkTo(t *testing.T, e *echoLeader) (*forwarder, string, *link) {
	t.Helper()
	addr := startEchoLeader(t, e)
	f := &forwarder{}
	t.Cleanup(f.close)
	l, err := f.link(addr)
	if err != nil {
		t.Fatal(err)
	}
	return f, addr, l
}

func startEchoLeader(t *testing.T, e *echoLeader) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	idempb.RegisterForwardServer(g, e)
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}

func getCall(key string) *idempb.ForwardCall {
	return &idempb.ForwardCall{Request: &idempb.ForwardCall_Get{Get: &idempb.GetRequest{Id: &idempb.RecordId{Tenant: "t", Key: key}}}}
}

// TestForwardLinkRoutesReplies: many calls in flight on one stream, answered
// together, each caller gets its own reply.
func TestForwardLinkRoutesReplies(t *testing.T) {
	e := &echoLeader{release: make(chan struct{})}
	_, _, l := linkTo(t, e)
	const calls = 100
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("k%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := l.call(ctx, getCall(key))
			if err != nil || r.GetGet().GetRecord().GetId().GetKey() != key {
				t.Errorf("call %s: reply %v, err %v", key, r, err)
			}
		}()
	}
	// Every caller is waiting before the leader answers anything.
	testutil.Eventually(t, 5*time.Second, "all calls registered", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.pending) == calls
	})
	close(e.release)
	wg.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	// How many calls share a message depends on how fast the sender keeps up
	// (on a loaded machine it may send them one by one); that what is queued
	// goes together is TestGatherKeepsMessagesUnderTheLimit's.
	t.Logf("%d calls in messages of %v", calls, e.sizes)
}

// TestForwardLinkFailsPendingCallsUnavailable: when the stream breaks,
// waiting callers get Unavailable (which routed retries) and the next call
// opens a new stream.
func TestForwardLinkFailsPendingCallsUnavailable(t *testing.T) {
	e := &echoLeader{release: make(chan struct{}), breakAfter: 1}
	f, addr, l := linkTo(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.call(ctx, getCall("a")); status.Code(err) != codes.Unavailable || !retryable(err) {
		t.Fatalf("call on a broken stream: %v, want a retryable Unavailable", err)
	}
	e.mu.Lock()
	e.breakAfter = 0
	e.mu.Unlock()
	close(e.release)
	testutil.Eventually(t, 5*time.Second, "a call on a new stream", func() bool {
		l, err := f.link(addr)
		if err != nil {
			return false
		}
		r, err := l.call(ctx, getCall("b"))
		return err == nil && r.GetGet().GetRecord().GetId().GetKey() == "b"
	})
}

// TestGatherKeepsMessagesUnderTheLimit: calls carrying large bodies are
// split across messages, none over the limit unless it is a single call.
func TestGatherKeepsMessagesUnderTheLimit(t *testing.T) {
	big := func(n int) *idempb.ForwardCall {
		return &idempb.ForwardCall{Request: &idempb.ForwardCall_Complete{Complete: &idempb.CompleteRequest{
			Response: &idempb.Response{Body: make([]byte, n)}}}}
	}
	queue := make(chan *idempb.ForwardCall, 10)
	for _, n := range []int{600 << 10, 600 << 10, 100, 2 << 20} {
		queue <- big(n)
	}
	first := big(100)
	var sizes [][]int
	for first != nil {
		batch, held := gather(first, queue)
		total := 0
		var got []int
		for _, c := range batch {
			got = append(got, len(c.GetComplete().GetResponse().GetBody()))
			total += proto.Size(c)
		}
		if total > maxForwardBatchBytes && len(batch) > 1 {
			t.Fatalf("message of %d calls is %d bytes, over %d", len(batch), total, maxForwardBatchBytes)
		}
		sizes = append(sizes, got)
		first = held
	}
	want := "[[100 614400] [614400 100] [2097152]]"
	if fmt.Sprint(sizes) != want {
		t.Fatalf("messages %v, want %s", sizes, want)
	}
}

// TestForwardLinkReportsConfigurationErrors: a leader that refuses the
// stream for good (here it does not serve it at all) is reported with its
// code at once, not as a retryable Unavailable that ends in a timeout.
func TestForwardLinkReportsConfigurationErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer() // no Forward service
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	f := &forwarder{}
	t.Cleanup(f.close)
	l, err := f.link(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.call(ctx, getCall("a")); status.Code(err) != codes.Unimplemented || retryable(err) {
		t.Fatalf("call to a leader without the stream: %v, want Unimplemented, not retryable", err)
	}
}
