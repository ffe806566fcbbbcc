package client_test

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/client"
)

// TestAdminCalls: Status and Members answer with the cluster's view, and
// removing an id the Raft configuration does not hold is NotFound (raft
// itself takes it as a no-op, which made a typo look removed), with
// either policy.
func TestAdminCalls(t *testing.T) {
	t.Parallel()
	cl := newClient(t, shared)
	st, err := cl.Status(testCtx(t))
	if err != nil || st.NodeID == "" || st.LeaderID == "" || st.Redacted || st.Digest == "" {
		t.Fatalf("status = %+v, %v; want a node that knows the leader, unredacted", st, err)
	}
	m, err := cl.Members(testCtx(t))
	if err != nil || len(m.Servers) != 3 || len(m.Members) != 3 {
		t.Fatalf("members = %+v, %v; want three servers and three gossip members", m, err)
	}
	if err := cl.RemoveMember(testCtx(t), "no-such-node"); status.Code(err) != codes.NotFound {
		t.Errorf("remove-member of an unknown id: %v, want NotFound", err)
	}
	oneShot := newClient(t, shared, func(c *client.Config) { c.OneShot = true })
	var f *client.Failure
	if err := oneShot.RemoveMember(testCtx(t), "no-such-node"); !errors.As(err, &f) || f.Code != "NOT_FOUND" || f.Kind != client.KindRefused {
		t.Errorf("OneShot remove-member of an unknown id: %v (%+v), want a NOT_FOUND refusal", err, f)
	}
}
