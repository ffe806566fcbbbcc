package client

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// TestDescribe: gRPC's transport text becomes words and a kind (the CLI's
// exit code).
func TestDescribe(t *testing.T) {
	t.Parallel()
	const addr = "127.0.0.11:7400"
	for _, tc := range []struct {
		err     error
		kind    Kind
		reason  string
		message string
	}{
		{status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.11:7400: connect: connection refused"`),
			KindRetry, ReasonConnectionRefused, "connection refused at 127.0.0.11:7400"},
		{status.Error(codes.Unavailable, `connection error: desc = "transport: failed to write client preface: write tcp 127.0.0.1:1->127.0.0.11:7400: write: broken pipe"`),
			KindRetry, ReasonConnectionLost, "the connection to 127.0.0.11:7400 was cut during the call (safe to retry)"},
		{status.Error(codes.Internal, "stream terminated by RST_STREAM with error code: PROTOCOL_ERROR"),
			KindRetry, ReasonConnectionLost, "the connection to 127.0.0.11:7400 was cut during the call (safe to retry)"},
		{status.Error(codes.Unavailable, `connection error: desc = "error reading server preface: remote error: tls: certificate required"`),
			KindDenied, ReasonClientCertRequired, "the server requires a client certificate (--tls-cert, --tls-key)"},
		{status.Error(codes.Unavailable, `connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`),
			KindInvalid, ReasonServerCertUnknown, "cannot verify the certificate of 127.0.0.11:7400: x509: certificate signed by unknown authority (--tls-ca, --tls-server-name)"},
		{status.Error(codes.DeadlineExceeded, "context deadline exceeded"),
			KindRetry, ReasonTimeout, "timed out after 2s waiting for 127.0.0.11:7400 (safe to retry)"},
		{status.Error(codes.PermissionDenied, "this call needs an admin identity"),
			KindDenied, "", "permission denied: this call needs an admin identity"},
		{status.Error(codes.Unauthenticated, "no credentials"),
			KindDenied, "", "not authenticated: no credentials (--auth-token or --auth-token-file)"},
		{status.Error(codes.FailedPrecondition, "node3 is alive"), KindRefused, "", "node3 is alive"},
		{status.Error(codes.NotFound, `unknown server: "node9"`), KindRefused, "", `not found: unknown server: "node9"`},
		{cursorAheadStatus(t, "9", "5"), KindCursorAhead, ReasonFeedCursorAhead, "--after 9 is ahead of the cluster's abandoned feed, whose last event is 5"},
	} {
		var got *Failure
		if !errors.As(Describe(tc.err, addr, 2*time.Second), &got) {
			t.Fatalf("Describe(%v) is no *Failure", tc.err)
		}
		if got.Kind != tc.kind || got.Reason != tc.reason || !strings.HasPrefix(got.Message, tc.message) {
			t.Errorf("Describe(%v) = kind %d reason %q message %q\nwant kind %d reason %q message %q",
				tc.err, got.Kind, got.Reason, got.Message, tc.kind, tc.reason, tc.message)
		}
	}
	local := errors.New("write output: disk full")
	if got := Describe(local, addr, time.Second); got != local {
		t.Errorf("Describe of a local failure = %v, want it as it is", got)
	}
}

func cursorAheadStatus(t *testing.T, cursor, last string) error {
	st, err := status.New(codes.OutOfRange, "ahead").WithDetails(&errdetails.ErrorInfo{Reason: ReasonFeedCursorAhead,
		Domain: ErrorDomain, Metadata: map[string]string{"cursor": cursor, "last_seq": last}})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

// TestNoLeaderDetail: without a leader, the CLI counts the voters gossip
// cannot reach.
func TestNoLeaderDetail(t *testing.T) {
	t.Parallel()
	st := &idempb.StatusResponse{NodeId: "n1", State: "candidate"}
	servers := []*idempb.RaftServer{{Id: "n1", Voter: true}, {Id: "n2", Voter: true}, {Id: "n3", Voter: true}}
	members := func(states ...string) *idempb.MembersResponse {
		m := &idempb.MembersResponse{Servers: servers}
		for i, s := range states {
			m.Members = append(m.Members, &idempb.Member{Id: fmt.Sprintf("n%d", i+1), State: s})
		}
		return m
	}
	for _, tc := range []struct {
		m    *idempb.MembersResponse
		want string
	}{
		{members("alive", "dead", "suspect"), "the cluster has no quorum (2 of 3 nodes unreachable)"},
		{members("alive", "alive", "dead"), "none yet: an election may be running (gossip sees 2 of 3 nodes alive); safe to retry"},
		{&idempb.MembersResponse{Members: []*idempb.Member{{Id: "n1", State: "alive"}}}, "the cluster has not formed yet"},
		{nil, "none is known at this node; safe to retry"},
	} {
		if got := noLeaderDetail(st, tc.m); !strings.HasPrefix(got, tc.want) {
			t.Errorf("noLeaderDetail(%v) = %q, want %q", tc.m, got, tc.want)
		}
	}
}
