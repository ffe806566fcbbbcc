package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// Kind is what a caller can do about a failed call; the CLI's exit codes
// are made from it.
type Kind int

// The kinds of failure.
const (
	// KindRefused: the call was refused for good (not found, failed
	// precondition, a server error).
	KindRefused Kind = iota
	// KindInvalid: the input or the local configuration is wrong.
	KindInvalid
	// KindRetry: unavailable, timed out or rate-limited; safe to retry.
	KindRetry
	// KindDenied: unauthenticated, permission denied, quota exceeded.
	KindDenied
	// KindCursorAhead: a feed cursor past the cluster's last event;
	// retrying never helps.
	KindCursorAhead
)

// Failure is a failed call said for a person (Message) and for a script
// (Code, the gRPC code as google.rpc.Code names it, and Reason), instead
// of gRPC's transport text. Messages name the idemnode CLI's flags where a
// flag is the remedy.
type Failure struct {
	Kind Kind
	// Code is UNAVAILABLE, DEADLINE_EXCEEDED…
	Code string
	// Reason is the server's ErrorInfo reason (NO_LEADER, INVALID_FIELD…)
	// or, for a failure before any answer, Describe's own
	// (CONNECTION_REFUSED, CLIENT_CERT_REQUIRED…).
	Reason  string
	Message string
}

// Error returns the message.
func (f *Failure) Error() string { return f.Message }

// WriteJSON writes f as the one JSON object of a failed call:
// {"error": {code, reason, message}}.
func (f *Failure) WriteJSON(w io.Writer) error {
	type body struct {
		Code    string `json:"code"`
		Reason  string `json:"reason,omitempty"`
		Message string `json:"message"`
	}
	return json.NewEncoder(w).Encode(struct {
		Error body `json:"error"`
	}{body{f.Code, f.Reason, f.Message}})
}

// UsageFailure is a bad flag or input as a Failure.
func UsageFailure(err error) *Failure {
	return &Failure{Kind: KindInvalid, Code: CodeName(codes.InvalidArgument), Reason: ReasonUsage, Message: err.Error()}
}

// CodeName spells a gRPC code as google.rpc.Code does: DeadlineExceeded is
// DEADLINE_EXCEEDED.
func CodeName(c codes.Code) string {
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// ReasonOf is the ErrorInfo reason of err, if it is a status carrying one.
func ReasonOf(err error) string {
	info := infoOf(status.Convert(err))
	return info.GetReason()
}

func infoOf(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// Describe says what went wrong with a call to addr that had timeout in
// all: the *Failure err holds, or one made of the gRPC status it holds, or
// err itself when it holds neither (a local failure), or nil for nil.
func Describe(err error, addr string, timeout time.Duration) error {
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	var st interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &st) {
		return err
	}
	return describe(st.GRPCStatus().Err(), addr, timeout)
}

func describe(err error, addr string, timeout time.Duration) *Failure {
	st := status.Convert(err)
	msg := st.Message()
	f := &Failure{Kind: KindRefused, Code: CodeName(st.Code()), Reason: infoOf(st).GetReason(), Message: msg}
	switch st.Code() {
	case codes.InvalidArgument:
		f.Kind, f.Message = KindInvalid, "invalid input: "+msg
	case codes.NotFound:
		f.Message = "not found: " + msg
	case codes.Unauthenticated:
		f.Kind, f.Message = KindDenied, "not authenticated: "+msg+" (--auth-token or --auth-token-file)"
	case codes.PermissionDenied:
		f.Kind, f.Message = KindDenied, "permission denied: "+msg
	case codes.ResourceExhausted:
		if f.Reason == ReasonQuotaExceeded {
			f.Kind, f.Message = KindDenied, "quota exceeded: "+msg
		} else {
			f.Kind, f.Message = KindRetry, "rate-limited: "+msg+" (safe to retry)"
		}
	case codes.DeadlineExceeded, codes.Canceled:
		f.Kind, f.Message = KindRetry, fmt.Sprintf("timed out after %s waiting for %s (safe to retry)", timeout, addr)
		if f.Reason == "" {
			f.Reason = ReasonTimeout
		}
	case codes.Unavailable:
		unavailable(f, addr)
	case codes.Internal, codes.Unknown:
		if lost(msg) {
			f.Kind, f.Reason = KindRetry, ReasonConnectionLost
			f.Message = fmt.Sprintf("the connection to %s was cut during the call (safe to retry)", addr)
		} else {
			f.Message = fmt.Sprintf("server error at %s: %s", addr, msg)
		}
	}
	if f.Reason == ReasonFeedCursorAhead {
		cursorAhead(f, infoOf(st).GetMetadata())
	}
	return f
}

// cursorAhead says what a FEED_CURSOR_AHEAD refusal means and what to do:
// retrying the same --after never helps, the cluster lacks the events it
// counted.
func cursorAhead(f *Failure, meta map[string]string) {
	last := meta["last_seq"]
	f.Kind = KindCursorAhead
	f.Message = fmt.Sprintf("--after %s is ahead of the cluster's abandoned feed, whose last event is %s: the cluster "+
		"was restored from an older backup (or is another cluster) and lacks the events after %s that --after "+
		"counted; reconcile the records abandoned now (idemnode abandoned), then watch with --after %s",
		meta["cursor"], last, last, last)
}

// unavailable fills in an Unavailable failure: the server's own reasons,
// or what the transport text means.
func unavailable(f *Failure, addr string) {
	msg := f.Message
	f.Kind = KindRetry
	say := func(reason, format string, args ...any) {
		f.Reason, f.Message = reason, fmt.Sprintf(format, args...)
	}
	switch {
	case f.Reason == ReasonNoLeader:
		f.Message = "no leader: the cluster has none right now (an election, or no quorum); safe to retry"
	case f.Reason == ReasonNotLeader || f.Reason == ReasonLeadershipLost:
		f.Message = "the leader changed during the call (safe to retry)"
	case f.Reason == ReasonShuttingDown:
		f.Message = fmt.Sprintf("the node at %s is shutting down (safe to retry; name other nodes in --addr)", addr)
	case f.Reason == ReasonCommitTimeout:
		f.Message = "the write was not committed in time; the cluster may have lost its quorum (safe to retry)"
	case f.Reason != "":
	case strings.Contains(msg, "connection refused"):
		say(ReasonConnectionRefused, "connection refused at %s", addr)
	case strings.Contains(msg, "no such host") || strings.Contains(msg, "produced zero addresses"):
		say(ReasonUnresolvable, "cannot resolve the host of %s", addr)
	case strings.Contains(msg, "certificate required"):
		// Also when a certificate was given but not one the server's
		// CAs signed: the client then sends none. explainRefusal tells.
		f.Kind = KindDenied
		say(ReasonClientCertRequired, "the server requires a client certificate (--tls-cert, --tls-key)")
	case strings.Contains(msg, "remote error: tls:"):
		f.Kind = KindDenied
		say(ReasonClientCertRefused, "the server at %s refused the client certificate (%s)", addr, from(msg, "tls:"))
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "tls: failed to verify"):
		f.Kind = KindInvalid
		say(ReasonServerCertUnknown, "cannot verify the certificate of %s: %s (--tls-ca, --tls-server-name)", addr, from(msg, "x509:"))
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		f.Kind = KindInvalid
		say(ReasonNotTLS, "%s does not speak TLS: leave out the --tls-* flags", addr)
	case strings.Contains(msg, "server preface"):
		say(ReasonConnectionLost, "%s closed the connection before answering: is it a TLS server (--tls-ca)?", addr)
	case lost(msg):
		say(ReasonConnectionLost, "the connection to %s was cut during the call (safe to retry)", addr)
	case strings.Contains(msg, "i/o timeout"):
		say(ReasonNoAnswer, "no answer from %s", addr)
	default:
		f.Message = fmt.Sprintf("%s is unavailable: %s", addr, msg)
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
// call failed for want of one or ran out of time, and says so in f.
func explainNoLeader(ctx context.Context, f *Failure, conn *grpc.ClientConn) {
	if f.Reason != ReasonNoLeader && f.Reason != ReasonCommitTimeout && f.Reason != ReasonTimeout {
		return
	}
	admin := idempb.NewAdminClient(conn)
	st, err := admin.Status(ctx, &idempb.StatusRequest{})
	if err != nil || st.GetLeaderId() != "" {
		return
	}
	members, _ := admin.Members(ctx, &idempb.MembersRequest{}) // admin-only with --auth: then unknown
	detail := "no leader: " + noLeaderDetail(st, members)
	if f.Reason == ReasonTimeout {
		detail = strings.TrimSuffix(f.Message, " (safe to retry)") + ": " + detail
	}
	f.Reason, f.Message = ReasonNoLeader, detail
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
