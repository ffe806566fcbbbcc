package client

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The API's text fields are proto3 strings, which must be valid UTF-8:
// gRPC's encoder fails a call that breaks the rule as Internal before it
// is sent. The SDK refuses such a call itself with the error the server
// gives for the same fault (InvalidArgument, ErrorInfo reason
// INVALID_FIELD naming the field), so callers handle both alike.

// check refuses an ID that cannot be sent.
func (id ID) check() error {
	return textFields("id.tenant", id.Tenant, "id.scope", id.Scope, "id.key", id.Key)
}

// check refuses a response whose headers cannot be sent.
func (r Response) check() error {
	for i, h := range r.Headers {
		if err := textFields(fmt.Sprintf("response.headers[%d].name", i), h.Name,
			fmt.Sprintf("response.headers[%d].value", i), h.Value); err != nil {
			return err
		}
	}
	return nil
}

// textFields checks name, value pairs.
func textFields(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if utf8.ValidString(pairs[i+1]) {
			continue
		}
		field := pairs[i]
		st := status.New(codes.InvalidArgument, field+": not valid UTF-8 (limit: valid UTF-8)")
		if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonInvalidField, Domain: ErrorDomain,
			Metadata: map[string]string{"field": field, "limit": "valid UTF-8"}}); err == nil {
			st = d
		}
		return st.Err()
	}
	return nil
}
