package rpc

import (
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// FuzzValidateRequests feeds arbitrary wire bytes through the request
// validation: nothing panics, and whatever passes respects every limit.
func FuzzValidateRequests(f *testing.F) {
	seed := func(m proto.Message) {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
	id := &idempb.RecordId{Tenant: "t", Scope: "POST /x", Key: "k"}
	seed(&idempb.ClaimRequest{Id: id, Owner: "o", Fingerprint: []byte{1}, Lease: durationpb.New(time.Second), Ttl: durationpb.New(time.Hour)})
	seed(&idempb.CompleteRequest{Id: id, Token: 1, Response: &idempb.Response{Status: 201, Headers: []*idempb.Header{{Name: "A", Value: "b"}}, Body: []byte("x")}})
	seed(&idempb.ClaimRequest{Id: &idempb.RecordId{Tenant: "a b", Scope: "POST /x\x00", Key: "k"}, Owner: "o"})
	seed(&idempb.CompleteRequest{Id: id, Token: 1, Response: &idempb.Response{Headers: []*idempb.Header{{Name: "X", Value: "a\r\nB: c"}}}})
	seed(&idempb.ExtendRequest{Id: id, Token: 7, Lease: &durationpb.Duration{Seconds: -1}})
	seed(&idempb.CheckpointRequest{Id: id, Token: 7, Point: "charged", Data: []byte("ch_1")})
	seed(&idempb.CheckpointRequest{Id: id, Token: 7, Point: "two words"})
	l := DefaultLimits()
	f.Fuzz(func(t *testing.T, b []byte) {
		var claim idempb.ClaimRequest
		if proto.Unmarshal(b, &claim) == nil {
			if cmd, wait, err := l.claim(&claim); err == nil {
				checkKey(t, cmd.Key.Key)
				checkIDText(t, cmd.Key.Tenant, cmd.Key.Scope)
				if cmd.Owner == "" || len(cmd.Owner) > l.MaxOwner || len(cmd.Fingerprint) > l.MaxFingerprint {
					t.Fatalf("claim passed with owner %q fingerprint %d bytes", cmd.Owner, len(cmd.Fingerprint))
				}
				if cmd.Lease < int64(l.MinLease) || cmd.Lease > int64(l.MaxLease) || cmd.TTL < int64(l.MinTTL) ||
					cmd.TTL > int64(l.MaxTTL) || wait < 0 || wait > l.MaxWait {
					t.Fatalf("claim passed with lease %d ttl %d wait %s", cmd.Lease, cmd.TTL, wait)
				}
			}
		}
		var complete idempb.CompleteRequest
		if proto.Unmarshal(b, &complete) == nil {
			if cmd, err := l.complete(&complete); err == nil {
				checkKey(t, cmd.Key.Key)
				size := 0
				for _, h := range cmd.Response.Headers {
					size += len(h.Name) + len(h.Value)
					if !httpguts.ValidHeaderFieldName(h.Name) || strings.ContainsAny(h.Value, "\r\n\x00") {
						t.Fatalf("complete passed with header %q: %q", h.Name, h.Value)
					}
				}
				if cmd.Token == 0 || len(cmd.Response.Body) > l.MaxBody || len(cmd.Response.Headers) > l.MaxHeaders || size > l.MaxHeaderBytes {
					t.Fatalf("complete passed: token %d body %d headers %d/%d B", cmd.Token, len(cmd.Response.Body), len(cmd.Response.Headers), size)
				}
			}
		}
		var extend idempb.ExtendRequest
		if proto.Unmarshal(b, &extend) == nil {
			if cmd, err := l.extend(&extend); err == nil && (cmd.Lease < int64(l.MinLease) || cmd.Lease > int64(l.MaxLease)) {
				t.Fatalf("extend passed with lease %d", cmd.Lease)
			}
		}
		var cp idempb.CheckpointRequest
		if proto.Unmarshal(b, &cp) == nil {
			if cmd, err := l.checkpoint(&cp); err == nil {
				checkKey(t, cmd.Key.Key)
				p := cmd.Checkpoint.Point
				if cmd.Token == 0 || p == "" || len(p) > l.MaxPoint || strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r > '~' }) ||
					len(cmd.Checkpoint.Data) > l.MaxCheckpointData {
					t.Fatalf("checkpoint passed: token %d point %q data %d bytes", cmd.Token, p, len(cmd.Checkpoint.Data))
				}
			}
		}
	})
}

func checkKey(t *testing.T, key string) {
	t.Helper()
	if len(key) == 0 || len(key) > 255 {
		t.Fatalf("key of %d bytes passed", len(key))
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			t.Fatalf("key %q passed with byte %d not printable", key, i)
		}
	}
}

// checkIDText holds a tenant and scope that passed to the text rules.
func checkIDText(t *testing.T, tenant, scope string) {
	t.Helper()
	for i := 0; i < len(tenant); i++ {
		if tenant[i] <= ' ' || tenant[i] > '~' {
			t.Fatalf("tenant %q passed with byte %d not printable ASCII without spaces", tenant, i)
		}
	}
	if !utf8.ValidString(scope) || strings.IndexFunc(scope, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		t.Fatalf("scope %q passed with a character that is not printable", scope)
	}
}
