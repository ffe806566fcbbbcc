package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// invalidField is a violation of an input limit.
type invalidField struct {
	field string
	limit string
	msg   string
}

func (e *invalidField) Error() string {
	return fmt.Sprintf("%s: %s (limit: %s)", e.field, e.msg, e.limit)
}

func invalid(field, limit, format string, args ...any) error {
	return &invalidField{field: field, limit: limit, msg: fmt.Sprintf(format, args...)}
}

// retryLater refuses a call for a tenant's limit (ResourceExhausted with
// a RetryInfo): the rate (RATE_LIMITED) or a quota (QUOTA_EXCEEDED).
type retryLater struct {
	reason string
	msg    string
	meta   map[string]string
	after  time.Duration // the retry hint
}

func (e *retryLater) Error() string {
	return fmt.Sprintf("%s; retry in %s", e.msg, e.after)
}

// InvalidFieldError is the InvalidArgument refusal of a value that breaks a
// rule: reason INVALID_FIELD with the field and the limit, and a BadRequest
// field violation. The JSON API refuses its own input with it too.
func InvalidFieldError(field, limit, msg string) error {
	text := (&invalidField{field: field, limit: limit, msg: msg}).Error()
	return withInfo(codes.InvalidArgument, idempb.ReasonInvalidField, text, map[string]string{"field": field, "limit": limit},
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: text}}})
}

// ErrorWithInfo is an error of code carrying an ErrorInfo with reason, as
// every error idemnode returns does.
func ErrorWithInfo(code codes.Code, reason, msg string) error {
	return withInfo(code, reason, msg, nil)
}

// withInfo builds a status carrying an ErrorInfo with reason and meta, and
// the extra details given (a BadRequest, a RetryInfo).
func withInfo(code codes.Code, reason, msg string, meta map[string]string, extra ...protoadapt.MessageV1) error {
	st := status.New(code, msg)
	details := append([]protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: reason, Domain: idempb.ErrorDomain, Metadata: meta}}, extra...)
	if withDetails, err := st.WithDetails(details...); err == nil {
		st = withDetails
	}
	return st.Err()
}

// toStatus maps an error of validation or of the cluster onto a gRPC status.
// This is the only place where errors become gRPC codes.
func toStatus(err error, log *slog.Logger) error {
	if err == nil {
		// Before the targets below: errors.As makes each escape, so they
		// would cost seven allocations on every call that succeeded.
		return nil
	}
	var inv *invalidField
	var tooMany *tooManyWaits
	var denied *authError
	var limited *retryLater
	var pruned *errPruned
	var ahead *errCursorAhead
	var busy *forwardQueueFull
	switch {
	case errors.As(err, &denied):
		return withInfo(denied.code, denied.reason, denied.msg, nil)
	case errors.As(err, &limited):
		return withInfo(codes.ResourceExhausted, limited.reason, limited.Error(), limited.meta,
			&errdetails.RetryInfo{RetryDelay: durationpb.New(limited.after)})
	case errors.As(err, &tooMany):
		return withInfo(codes.ResourceExhausted, idempb.ReasonTooManyWaits, tooMany.Error(),
			map[string]string{"scope": tooMany.scope, "limit": strconv.Itoa(tooMany.limit)})
	case errors.As(err, &busy):
		return withInfo(codes.Unavailable, idempb.ReasonLeaderBusy, busy.Error(),
			map[string]string{"workers": strconv.Itoa(busy.workers), "queued": strconv.Itoa(busy.queued)})
	case errors.As(err, &inv):
		return InvalidFieldError(inv.field, inv.limit, inv.msg)
	case errors.As(err, &pruned):
		return withInfo(codes.OutOfRange, idempb.ReasonFeedPruned, pruned.Error(),
			map[string]string{"pruned_through": strconv.FormatUint(pruned.pruned, 10)})
	case errors.As(err, &ahead):
		return withInfo(codes.OutOfRange, idempb.ReasonFeedCursorAhead, ahead.Error(),
			map[string]string{"last_seq": strconv.FormatUint(ahead.last, 10), "cursor": strconv.FormatUint(ahead.cursor, 10)})
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, cluster.ErrNotLeader):
		return withInfo(codes.Unavailable, idempb.ReasonNotLeader, err.Error(), nil)
	case errors.Is(err, cluster.ErrNoLeader):
		return withInfo(codes.Unavailable, idempb.ReasonNoLeader, err.Error(), nil)
	case errors.Is(err, cluster.ErrLeadershipLost), errors.Is(err, errLeaderChanged):
		return withInfo(codes.Unavailable, idempb.ReasonLeadershipLost, err.Error(), nil)
	case errors.Is(err, cluster.ErrShutdown):
		return withInfo(codes.Unavailable, idempb.ReasonShuttingDown, err.Error(), nil)
	case errors.Is(err, cluster.ErrUnknownServer):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, cluster.ErrMemberAlive):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, cluster.ErrUpgrading):
		return withInfo(codes.FailedPrecondition, idempb.ReasonClusterUpgrading, err.Error(), nil)
	case errors.Is(err, cluster.ErrTimeout):
		return withInfo(codes.Unavailable, idempb.ReasonCommitTimeout, err.Error(), nil)
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	log.Error("internal error", "err", err)
	return withInfo(codes.Internal, idempb.ReasonInternal, err.Error(), nil)
}
