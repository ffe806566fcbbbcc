package idempg_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idempg"
)

// TestResponseIdemnodeRefuses: a response idemnode's Complete would refuse
// (or, for invalid UTF-8, alter) is refused before COMMIT, as a success and
// as a permanent failure: nothing is committed, no row is kept, the key is
// released and the error says what is wrong.
func TestResponseIdemnodeRefuses(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r, err := idempg.New(e.db, e.cl, idempg.Options{MaxBody: 16})
	if err != nil {
		t.Fatal(err)
	}
	many := make([]client.Header, 65)
	for i := range many {
		many[i] = client.Header{Name: fmt.Sprintf("H%d", i), Value: "v"}
	}
	for _, tc := range []struct {
		name string
		resp client.Response
		want string
	}{
		{"status", client.Response{Status: 1000}, "status 1000"},
		{"negative status", client.Response{Status: -1}, "status -1"},
		{"header CRLF", client.Response{Status: 200, Headers: []client.Header{{Name: "Location", Value: "/a\r\nSet-Cookie: x"}}}, "CR, LF and NUL"},
		{"header NUL", client.Response{Status: 200, Headers: []client.Header{{Name: "X", Value: "a\x00"}}}, "CR, LF and NUL"},
		{"header UTF-8", client.Response{Status: 200, Headers: []client.Header{{Name: "X", Value: "caf\xe9"}}}, "UTF-8"},
		{"header name", client.Response{Status: 200, Headers: []client.Header{{Name: "Bad Name", Value: "v"}}}, "HTTP token"},
		{"too many headers", client.Response{Status: 200, Headers: many}, "65 response headers"},
		{"body", client.Response{Status: 200, Body: []byte(strings.Repeat("x", 17))}, "17 bytes"},
	} {
		for _, permanent := range []bool{false, true} {
			key := fmt.Sprintf("refused-%s-%v", strings.ReplaceAll(tc.name, " ", "-"), permanent)
			res, err := r.Do(ctx, testID(key), fingerprint, func(ctx context.Context, tx *sql.Tx) (client.Response, error) {
				if _, err := effect("refused")(ctx, tx); err != nil {
					return client.Response{}, err
				}
				if permanent {
					return tc.resp, client.Permanent(errors.New("declined"))
				}
				return tc.resp, nil
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) || client.IsPermanent(err) || res.Executed || res.Replayed {
				t.Errorf("%s (permanent %v): %+v, %v; want an error naming %q that is not permanent", tc.name, permanent, res, err, tc.want)
			}
			var rows, effects int
			if err := e.db.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM idempg_effects WHERE key = $1), (SELECT count(*) FROM effects WHERE k = $1)", key).Scan(&rows, &effects); err != nil {
				t.Fatal(err)
			}
			if rows != 0 || effects != 0 {
				t.Errorf("%s (permanent %v): %d rows and %d effects committed; want none", tc.name, permanent, rows, effects)
			}
			if _, err := e.cl.Get(ctx, testID(key)); !errors.Is(err, client.ErrNotFound) {
				t.Errorf("%s (permanent %v): record %v; want released", tc.name, permanent, err)
			}
		}
	}
}

// TestPermanentFailureNotRecorded: a permanent failure whose response the
// table refuses is not recorded, so it is returned as an error that is not
// permanent, and the key is released for a retry.
func TestPermanentFailureNotRecorded(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	opts := idempg.Options{Table: "refuses_402"}
	if err := idempg.Migrate(ctx, e.db, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.ExecContext(ctx, "ALTER TABLE refuses_402 ADD CONSTRAINT no_402 CHECK (status IS DISTINCT FROM 402)"); err != nil {
		t.Fatal(err)
	}
	r, err := idempg.New(e.db, e.cl, opts)
	if err != nil {
		t.Fatal(err)
	}
	declined := errors.New("card declined")
	id := testID("not-recorded")
	res, err := r.Do(ctx, id, fingerprint, func(context.Context, *sql.Tx) (client.Response, error) {
		return client.Response{Status: 402, Body: []byte("declined")}, client.Permanent(declined)
	})
	if err == nil || client.IsPermanent(err) || !strings.Contains(err.Error(), "card declined") || res.Executed {
		t.Fatalf("Do whose permanent failure cannot be recorded: %+v, %v; want a transient error naming the failure", res, err)
	}
	if _, err := e.cl.Get(ctx, id); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("record: %v; want released", err)
	}
}
