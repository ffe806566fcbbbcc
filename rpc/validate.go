package rpc

import (
	"fmt"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// recordKey validates a RecordId against the limits.
func (l Limits) recordKey(id *idempb.RecordId) (fsm.RecordKey, error) {
	if id == nil {
		return fsm.RecordKey{}, invalid("id", "required", "missing")
	}
	if err := l.text("id.tenant", id.GetTenant(), 0, l.MaxTenant); err != nil {
		return fsm.RecordKey{}, err
	}
	if err := l.text("id.scope", id.GetScope(), 0, l.MaxScope); err != nil {
		return fsm.RecordKey{}, err
	}
	if err := CheckKey(id.GetKey(), l.MaxKey); err != nil {
		return fsm.RecordKey{}, err
	}
	return fsm.RecordKey{Tenant: id.GetTenant(), Scope: id.GetScope(), Key: id.GetKey()}, nil
}

// CheckKey reports whether key is a valid Idempotency-Key: 1 to max bytes of
// printable ASCII.
func CheckKey(key string, maxLen int) error {
	// The limit is spelled out only for a refusal: this runs on every call.
	limit := func() string { return fmt.Sprintf("1-%d bytes of printable ASCII", maxLen) }
	if len(key) == 0 || len(key) > maxLen {
		return invalid("id.key", limit(), "%d bytes", len(key))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return invalid("id.key", limit(), "byte %d is 0x%02x", i, c)
		}
	}
	return nil
}

func (l Limits) text(field, s string, minLen, maxLen int) error {
	if len(s) < minLen || len(s) > maxLen {
		return invalid(field, fmt.Sprintf("%d-%d bytes", minLen, maxLen), "%d bytes", len(s))
	}
	if !utf8.ValidString(s) {
		return invalid(field, "valid UTF-8", "not valid UTF-8")
	}
	return nil
}

// duration validates an optional duration field; nil or zero takes def.
func duration(field string, d *durationpb.Duration, lo, hi, def time.Duration) (time.Duration, error) {
	if d == nil || (d.Seconds == 0 && d.Nanos == 0) {
		return def, nil
	}
	limit := func() string { return fmt.Sprintf("%s-%s", lo, hi) }
	if err := d.CheckValid(); err != nil {
		return 0, invalid(field, limit(), "%v", err)
	}
	v := d.AsDuration()
	if v < lo || v > hi {
		return 0, invalid(field, limit(), "%s", v)
	}
	return v, nil
}

func (l Limits) claim(req *idempb.ClaimRequest) (*fsm.Command, time.Duration, error) {
	key, err := l.recordKey(req.GetId())
	if err != nil {
		return nil, 0, err
	}
	if n := len(req.GetFingerprint()); n > l.MaxFingerprint {
		return nil, 0, invalid("fingerprint", fmt.Sprintf("%d bytes", l.MaxFingerprint), "%d bytes", n)
	}
	if err := l.text("owner", req.GetOwner(), 1, l.MaxOwner); err != nil {
		return nil, 0, err
	}
	lease, err := duration("lease", req.GetLease(), l.MinLease, l.MaxLease, l.DefaultLease)
	if err != nil {
		return nil, 0, err
	}
	ttl, err := duration("ttl", req.GetTtl(), l.MinTTL, l.MaxTTL, l.DefaultTTL)
	if err != nil {
		return nil, 0, err
	}
	wait, err := duration("wait", req.GetWait(), 0, l.MaxWait, 0)
	if err != nil {
		return nil, 0, err
	}
	return &fsm.Command{Type: fsm.TypeClaim, Key: key, Fingerprint: req.GetFingerprint(),
		Owner: req.GetOwner(), Lease: int64(lease), TTL: int64(ttl), Quota: l.quota()}, wait, nil
}

func (l Limits) complete(req *idempb.CompleteRequest) (*fsm.Command, error) {
	key, err := l.recordKey(req.GetId())
	if err != nil {
		return nil, err
	}
	if err := checkToken(req.GetToken()); err != nil {
		return nil, err
	}
	resp, err := l.response(req.GetResponse())
	if err != nil {
		return nil, err
	}
	return &fsm.Command{Type: fsm.TypeComplete, Key: key, Token: req.GetToken(), Response: resp, Quota: l.quota()}, nil
}

func (l Limits) response(r *idempb.Response) (*fsm.Response, error) {
	if r == nil {
		return &fsm.Response{}, nil
	}
	if r.GetStatus() < 0 || r.GetStatus() > 999 {
		return nil, invalid("response.status", "0-999", "%d", r.GetStatus())
	}
	if n := len(r.GetBody()); n > l.MaxBody {
		return nil, invalid("response.body", fmt.Sprintf("%d bytes", l.MaxBody), "%d bytes", n)
	}
	if n := len(r.GetHeaders()); n > l.MaxHeaders {
		return nil, invalid("response.headers", fmt.Sprintf("%d entries", l.MaxHeaders), "%d entries", n)
	}
	out := &fsm.Response{Status: r.GetStatus(), Body: r.GetBody()}
	size := 0
	for i, h := range r.GetHeaders() {
		if h.GetName() == "" {
			return nil, invalid(fmt.Sprintf("response.headers[%d].name", i), "non-empty", "empty")
		}
		size += len(h.GetName()) + len(h.GetValue())
		out.Headers = append(out.Headers, fsm.Header{Name: h.GetName(), Value: h.GetValue()})
	}
	if size > l.MaxHeaderBytes {
		return nil, invalid("response.headers", fmt.Sprintf("%d bytes", l.MaxHeaderBytes), "%d bytes", size)
	}
	return out, nil
}

func checkToken(token uint64) error {
	if token == 0 {
		return invalid("token", "non-zero", "missing")
	}
	return nil
}

func (l Limits) release(req *idempb.ReleaseRequest) (*fsm.Command, error) {
	key, err := l.recordKey(req.GetId())
	if err != nil {
		return nil, err
	}
	if err := checkToken(req.GetToken()); err != nil {
		return nil, err
	}
	return &fsm.Command{Type: fsm.TypeRelease, Key: key, Token: req.GetToken()}, nil
}

func (l Limits) extend(req *idempb.ExtendRequest) (*fsm.Command, error) {
	key, err := l.recordKey(req.GetId())
	if err != nil {
		return nil, err
	}
	if err := checkToken(req.GetToken()); err != nil {
		return nil, err
	}
	lease, err := duration("lease", req.GetLease(), l.MinLease, l.MaxLease, l.DefaultLease)
	if err != nil {
		return nil, err
	}
	return &fsm.Command{Type: fsm.TypeExtend, Key: key, Token: req.GetToken(), Lease: int64(lease)}, nil
}
