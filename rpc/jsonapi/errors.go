package jsonapi

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/rpc"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// reasonInvalidJSON is the ErrorInfo reason of a body that is not the
// request message in protojson: malformed, of the wrong shape, or naming a
// field the message does not have.
const reasonInvalidJSON = idempb.ReasonInvalidJSON

// writeError answers a failed call in the google.rpc.Status JSON shape with
// the HTTP status that fits its code. An outcome is never an error: only a
// call the API refused or could not serve gets here.
func writeError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	httpStatus := 0
	var routing *runtime.HTTPStatusError
	if errors.As(err, &routing) {
		httpStatus, err = routing.HTTPStatus, routing.Err
	}
	st := withReason(status.Convert(err))
	if httpStatus == 0 {
		httpStatus = runtime.HTTPStatusFromCode(st.Code())
	}
	writeStatus(w, r, st, httpStatus)
}

// refuse answers a request before it reaches the gateway.
func refuse(w http.ResponseWriter, r *http.Request, st *status.Status) {
	writeStatus(w, r, st, runtime.HTTPStatusFromCode(st.Code()))
}

func writeStatus(w http.ResponseWriter, r *http.Request, st *status.Status, httpStatus int) {
	body, err := marshaler.Marshal(st.Proto())
	if err != nil {
		httpStatus = http.StatusInternalServerError
		body = []byte(`{"code":13,"message":"failed to encode the error","details":[]}`)
	}
	h := w.Header()
	h.Del("Trailer")
	h.Set("Content-Type", "application/json")
	if after, ok := retryAfter(st); ok {
		h.Set("Retry-After", after)
	}
	if st.Code() == codes.Unauthenticated {
		h.Set("WWW-Authenticate", `Bearer realm="idemnode"`)
	}
	w.WriteHeader(httpStatus)
	if r.Method != http.MethodHead {
		_, _ = w.Write(append(body, '\n'))
	}
}

// streamError is the {"error": …} line that ends a stream that failed.
func streamError(_ context.Context, err error) *status.Status {
	return withReason(status.Convert(err))
}

// routingError: a path the API does not have is NotFound (404), a method
// the path does not take is 405, both in the same JSON shape.
func routingError(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, httpStatus int) {
	var st *status.Status
	switch httpStatus {
	case http.StatusMethodNotAllowed:
		st = status.Newf(codes.Unimplemented, "%s %s: the path does not take this method (POST, or GET for /v1/status)", r.Method, r.URL.Path)
	case http.StatusNotFound:
		st = status.Newf(codes.NotFound, "%s: no such path (POST /v1/<method in lower snake case>; GET /v1/openapi.json lists them)", r.URL.Path)
	default:
		st = status.New(codes.InvalidArgument, http.StatusText(httpStatus))
	}
	writeStatus(w, r, st, httpStatus)
}

// withReason gives the gateway's own refusals, which carry no details (a
// body the decoder could not read), the ErrorInfo every idemnode error has.
func withReason(st *status.Status) *status.Status {
	if st.Code() != codes.InvalidArgument || len(st.Details()) > 0 {
		return st
	}
	if strings.HasPrefix(st.Message(), "invalid grpc-timeout") {
		return invalidField("Grpc-Timeout", "a number and a unit: H, M, S, m, u or n (5S, 500m)", strings.TrimPrefix(st.Message(), "invalid grpc-timeout: "))
	}
	return errorStatus(codes.InvalidArgument, reasonInvalidJSON, st.Message())
}

func errorStatus(code codes.Code, reason, msg string) *status.Status {
	return status.Convert(rpc.ErrorWithInfo(code, reason, msg))
}

// invalidField is the INVALID_FIELD refusal the gRPC API gives a value
// that breaks a rule.
func invalidField(field, limit, msg string) *status.Status {
	return status.Convert(rpc.InvalidFieldError(field, limit, msg))
}

// retryAfter is the Retry-After header, in whole seconds rounded up, of a
// status carrying a RetryInfo (a tenant's rate or quota, no leader yet).
func retryAfter(st *status.Status) (string, bool) {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			secs := math.Ceil(ri.GetRetryDelay().AsDuration().Seconds())
			return strconv.Itoa(max(int(secs), 1)), true
		}
	}
	return "", false
}
