package client_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/client"
)

// TestInvalidUTF8IsRefusedLocally: text that is not valid UTF-8 cannot be
// sent (gRPC's encoder would fail it as Internal); the SDK answers the
// server's InvalidArgument with ErrorInfo INVALID_FIELD naming the field.
func TestInvalidUTF8IsRefusedLocally(t *testing.T) {
	t.Parallel()
	cl := newClient(t, shared)
	ctx := testCtx(t)
	bad := "\xff\xfe"
	id := newID()
	withID := func(f func(*client.ID)) client.ID {
		i := id
		f(&i)
		return i
	}
	resp := func(name, value string) client.Response {
		return client.Response{Status: 201, Headers: []client.Header{{Name: "A", Value: "1"}, {Name: name, Value: value}}}
	}
	for _, tc := range []struct {
		name, field string
		call        func() error
	}{
		{"claim tenant", "id.tenant", func() error {
			_, err := cl.Claim(ctx, withID(func(i *client.ID) { i.Tenant = bad }), nil)
			return err
		}},
		{"claim scope", "id.scope", func() error {
			_, err := cl.Claim(ctx, withID(func(i *client.ID) { i.Scope = bad }), nil)
			return err
		}},
		{"claim owner", "owner", func() error { _, err := cl.Claim(ctx, id, nil, client.WithOwner(bad)); return err }},
		{"do key", "id.key", func() error {
			_, err := cl.Do(ctx, withID(func(i *client.ID) { i.Key = bad }), nil, func(context.Context) (client.Response, error) {
				t.Error("the function ran")
				return client.Response{}, nil
			})
			return err
		}},
		{"complete header name", "response.headers[1].name", func() error {
			_, err := cl.Complete(ctx, id, 1<<16, resp(bad, "v"))
			return err
		}},
		{"complete header value", "response.headers[1].value", func() error {
			_, err := cl.Complete(ctx, id, 1<<16, resp("X", bad))
			return err
		}},
		{"release", "id.key", func() error {
			_, err := cl.Release(ctx, withID(func(i *client.ID) { i.Key = bad }), 1<<16)
			return err
		}},
		{"extend", "id.tenant", func() error {
			_, err := cl.Extend(ctx, withID(func(i *client.ID) { i.Tenant = bad }), 1<<16, 0)
			return err
		}},
		{"get", "id.scope", func() error { _, err := cl.Get(ctx, withID(func(i *client.ID) { i.Scope = bad })); return err }},
		{"wait", "id.key", func() error {
			_, err := cl.Wait(ctx, withID(func(i *client.ID) { i.Key = bad }), time.Second)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			st, _ := status.FromError(err)
			if st.Code() != codes.InvalidArgument {
				t.Fatalf("got %v, want InvalidArgument", err)
			}
			var info *errdetails.ErrorInfo
			for _, d := range st.Details() {
				if i, ok := d.(*errdetails.ErrorInfo); ok {
					info = i
				}
			}
			if info.GetReason() != "INVALID_FIELD" || info.GetMetadata()["field"] != tc.field {
				t.Errorf("ErrorInfo = %v, want INVALID_FIELD for %s", info, tc.field)
			}
		})
	}
	if _, err := cl.Get(ctx, id); err == nil {
		t.Errorf("a record of %s exists after refused calls", id)
	}
}
