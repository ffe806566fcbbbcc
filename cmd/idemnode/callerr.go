package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/rpc"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// callError is a failed call, said for a person (message, on stderr) and
// for a script (exit; with -o json, {"error": {code, reason, message}} on
// stdout) instead of gRPC's transport text.
type callError struct {
	exit int
	// code is the gRPC code as google.rpc.Code names it (UNAVAILABLE).
	code string
	// reason is the server's ErrorInfo reason (NO_LEADER, INVALID_FIELD…)
	// or, for a failure before any answer, the CLI's own
	// (CONNECTION_REFUSED, CLIENT_CERT_REQUIRED…).
	reason  string
	message string
}

func (e *callError) Error() string { return e.message }

// Reasons the CLI gives to failures that carry none from the server.
const (
	reasonUsage              = "USAGE"
	reasonConnectionRefused  = "CONNECTION_REFUSED"
	reasonUnresolvable       = "UNRESOLVABLE"
	reasonNoAnswer           = "NO_ANSWER"
	reasonConnectionLost     = "CONNECTION_LOST"
	reasonTimeout            = "TIMEOUT"
	reasonClientCertRequired = "CLIENT_CERT_REQUIRED"
	reasonClientCertRefused  = "CLIENT_CERT_REFUSED"
	reasonServerCertUnknown  = "SERVER_CERT_UNVERIFIED"
	reasonNotTLS             = "NOT_TLS"
)

// writeJSON prints e as the one JSON object of a failed -o json call.
func (e *callError) writeJSON(w io.Writer) error {
	type body struct {
		Code    string `json:"code"`
		Reason  string `json:"reason,omitempty"`
		Message string `json:"message"`
	}
	return json.NewEncoder(w).Encode(struct {
		Error body `json:"error"`
	}{body{e.code, e.reason, e.message}})
}

// usageError is a bad flag or input as a callError, for -o json.
func usageError(err error) *callError {
	return &callError{exit: exitUsage, code: codeName(codes.InvalidArgument), reason: reasonUsage, message: err.Error()}
}

// codeName spells a gRPC code as google.rpc.Code does: DeadlineExceeded is
// DEADLINE_EXCEEDED.
func codeName(c codes.Code) string {
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// reasonOf is the ErrorInfo reason of a status, if it carries one.
func reasonOf(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// failureOf says what went wrong with a call to addr, and which exit code
// that is.
func failureOf(err error, addr string, timeout time.Duration) *callError {
	st := status.Convert(err)
	msg := st.Message()
	e := &callError{exit: exitRefused, code: codeName(st.Code()), reason: reasonOf(st), message: msg}
	switch st.Code() {
	case codes.InvalidArgument:
		e.exit, e.message = exitUsage, "invalid input: "+msg
	case codes.NotFound:
		e.message = "not found: " + msg
	case codes.Unauthenticated:
		e.exit, e.message = exitDenied, "not authenticated: "+msg+" (--auth-token or --auth-token-file)"
	case codes.PermissionDenied:
		e.exit, e.message = exitDenied, "permission denied: "+msg
	case codes.ResourceExhausted:
		if e.reason == rpc.ReasonQuotaExceeded {
			e.exit, e.message = exitDenied, "quota exceeded: "+msg
		} else {
			e.exit, e.message = exitRetry, "rate-limited: "+msg+" (safe to retry)"
		}
	case codes.DeadlineExceeded, codes.Canceled:
		e.exit, e.message = exitRetry, fmt.Sprintf("timed out after %s waiting for %s (safe to retry)", timeout, addr)
		if e.reason == "" {
			e.reason = reasonTimeout
		}
	case codes.Unavailable:
		unavailable(e, addr)
	case codes.Internal, codes.Unknown:
		if lost(msg) {
			e.exit, e.reason = exitRetry, reasonConnectionLost
			e.message = fmt.Sprintf("the connection to %s was cut during the call (safe to retry)", addr)
		} else {
			e.message = fmt.Sprintf("server error at %s: %s", addr, msg)
		}
	}
	return e
}

// unavailable fills in an Unavailable failure: the server's own reasons,
// or what the transport text means.
func unavailable(e *callError, addr string) {
	msg := e.message
	e.exit = exitRetry
	say := func(reason, format string, args ...any) {
		e.reason, e.message = reason, fmt.Sprintf(format, args...)
	}
	switch {
	case e.reason == rpc.ReasonNoLeader:
		e.message = "no leader: the cluster has none right now (an election, or no quorum); safe to retry"
	case e.reason == rpc.ReasonNotLeader || e.reason == rpc.ReasonLeadershipLost:
		e.message = "the leader changed during the call (safe to retry)"
	case e.reason == rpc.ReasonShuttingDown:
		e.message = fmt.Sprintf("the node at %s is shutting down (safe to retry; name other nodes in --addr)", addr)
	case e.reason == rpc.ReasonCommitTimeout:
		e.message = "the write was not committed in time; the cluster may have lost its quorum (safe to retry)"
	case e.reason != "":
	case strings.Contains(msg, "connection refused"):
		say(reasonConnectionRefused, "connection refused at %s", addr)
	case strings.Contains(msg, "no such host") || strings.Contains(msg, "produced zero addresses"):
		say(reasonUnresolvable, "cannot resolve the host of %s", addr)
	case strings.Contains(msg, "certificate required"):
		// Also when a certificate was given but not one the server's
		// CAs signed: the client then sends none. explainRefusal tells.
		e.exit = exitDenied
		say(reasonClientCertRequired, "the server requires a client certificate (--tls-cert, --tls-key)")
	case strings.Contains(msg, "remote error: tls:"):
		e.exit = exitDenied
		say(reasonClientCertRefused, "the server at %s refused the client certificate (%s)", addr, from(msg, "tls:"))
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "tls: failed to verify"):
		e.exit = exitUsage
		say(reasonServerCertUnknown, "cannot verify the certificate of %s: %s (--tls-ca, --tls-server-name)", addr, from(msg, "x509:"))
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		e.exit = exitUsage
		say(reasonNotTLS, "%s does not speak TLS: leave out the --tls-* flags", addr)
	case strings.Contains(msg, "server preface"):
		say(reasonConnectionLost, "%s closed the connection before answering: is it a TLS server (--tls-ca)?", addr)
	case lost(msg):
		say(reasonConnectionLost, "the connection to %s was cut during the call (safe to retry)", addr)
	case strings.Contains(msg, "i/o timeout"):
		say(reasonNoAnswer, "no answer from %s", addr)
	default:
		e.message = fmt.Sprintf("%s is unavailable: %s", addr, msg)
	}
}

// lost reports whether a transport message says an established connection
// broke.
func lost(msg string) bool {
	for _, s := range []string{"broken pipe", "connection reset", "RST_STREAM", "transport is closing", "EOF"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// from returns msg from the first marker on, without gRPC's closing quote.
func from(msg, marker string) string {
	if i := strings.Index(msg, marker); i >= 0 {
		msg = msg[i:]
	}
	return strings.TrimRight(msg, `"`)
}

// explainNoLeader asks the node at conn why it knows no leader, when the
// call failed for want of one or ran out of time, and says so in e.
func explainNoLeader(ctx context.Context, e *callError, conn *grpc.ClientConn) {
	if e.reason != rpc.ReasonNoLeader && e.reason != rpc.ReasonCommitTimeout && e.reason != reasonTimeout {
		return
	}
	admin := idempb.NewAdminClient(conn)
	st, err := admin.Status(ctx, &idempb.StatusRequest{})
	if err != nil || st.GetLeaderId() != "" {
		return
	}
	members, _ := admin.Members(ctx, &idempb.MembersRequest{}) // admin-only with --auth: then unknown
	detail := "no leader: " + noLeaderDetail(st, members)
	if e.reason == reasonTimeout {
		detail = strings.TrimSuffix(e.message, " (safe to retry)") + ": " + detail
	}
	e.reason, e.message = rpc.ReasonNoLeader, detail
}

// noLeaderDetail says why a node knows no leader, from its view of the
// Raft voters and of which of them gossip finds alive.
func noLeaderDetail(st *idempb.StatusResponse, m *idempb.MembersResponse) string {
	alive := map[string]bool{st.GetNodeId(): true}
	for _, mem := range m.GetMembers() {
		if mem.GetState() == "alive" {
			alive[mem.GetId()] = true
		}
	}
	voters, unreachable := 0, 0
	for _, s := range m.GetServers() {
		if s.GetVoter() {
			voters++
			if !alive[s.GetId()] {
				unreachable++
			}
		}
	}
	switch {
	case m == nil:
		return "none is known at this node; safe to retry"
	case voters == 0:
		return "the cluster has not formed yet (this node knows no Raft servers; are --bootstrap-expect servers up?)"
	case len(m.GetMembers()) == 0:
		return fmt.Sprintf("none is known among %d voters; safe to retry", voters)
	case voters-unreachable < voters/2+1:
		return fmt.Sprintf("the cluster has no quorum (%d of %d nodes unreachable)", unreachable, voters)
	}
	// Gossip takes some seconds to notice a dead node: until then it is
	// counted here as alive.
	return fmt.Sprintf("none yet: an election may be running (gossip sees %d of %d nodes alive); safe to retry", voters-unreachable, voters)
}
