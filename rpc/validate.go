package rpc

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// The text rules of the record id, the same with and without --auth
// (docs/API.md, "Data model"). Each refusal names the field and the rule.
const (
	ruleTenant = "printable ASCII without spaces"
	ruleScope  = "printable UTF-8 without control characters (spaces allowed)"
	ruleKey    = "printable ASCII"
	rulePoint  = "printable ASCII without spaces"
)

// recordKey validates a RecordId against the limits. An empty tenant is
// the default tenant; with --auth the interceptor has already filled in
// the caller's tenant.
func (l Limits) recordKey(id *idempb.RecordId) (fsm.RecordKey, error) {
	if id == nil {
		return fsm.RecordKey{}, invalid("id", "required", "missing")
	}
	if err := checkTenant(id.GetTenant(), l.MaxTenant); err != nil {
		return fsm.RecordKey{}, err
	}
	if err := checkScope(id.GetScope(), l.MaxScope); err != nil {
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
	return checkASCII("id.key", key, 1, maxLen, ' ', ruleKey)
}

// checkTenant checks a request's tenant; empty is the default tenant (or,
// with --auth, the caller's).
func checkTenant(tenant string, maxLen int) error {
	return checkASCII("id.tenant", tenant, 0, maxLen, '!', ruleTenant)
}

// checkASCII checks that s is minLen-maxLen bytes, each from lowest to '~'
// (' ' admits spaces, '!' does not). The limit is spelled out only for a
// refusal: this runs on every call.
func checkASCII(field, s string, minLen, maxLen int, lowest byte, rule string) error {
	limit := func() string { return fmt.Sprintf("%d-%d bytes of %s", minLen, maxLen, rule) }
	if len(s) < minLen || len(s) > maxLen {
		return invalid(field, limit(), "%d bytes", len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < lowest || c > '~' {
			return invalid(field, limit(), "byte %d is 0x%02x", i, c)
		}
	}
	return nil
}

// checkScope checks the scope: up to maxLen bytes of UTF-8 whose every
// character is printable (unicode.IsPrint: no control or format
// characters; the ASCII space is allowed, as in "POST /v1/charges").
func checkScope(scope string, maxLen int) error {
	limit := func() string { return fmt.Sprintf("0-%d bytes of %s", maxLen, ruleScope) }
	if len(scope) > maxLen {
		return invalid("id.scope", limit(), "%d bytes", len(scope))
	}
	for i, r := range scope {
		if r == utf8.RuneError && !strings.HasPrefix(scope[i:], "\uFFFD") {
			return invalid("id.scope", limit(), "byte %d is not valid UTF-8", i)
		}
		if !unicode.IsPrint(r) {
			return invalid("id.scope", limit(), "byte %d is %U, not printable", i, r)
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
		Owner: req.GetOwner(), Lease: int64(lease), TTL: int64(ttl), Quota: l.quota(), Tombstone: l.tombstone(),
		WatchAbandon: true}, wait, nil
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
	return &fsm.Command{Type: fsm.TypeComplete, Key: key, Token: req.GetToken(), Response: resp, Quota: l.quota(),
		Tombstone: l.tombstone()}, nil
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
		if err := checkHeader(i, h); err != nil {
			return nil, err
		}
		size += len(h.GetName()) + len(h.GetValue())
		out.Headers = append(out.Headers, fsm.Header{Name: h.GetName(), Value: h.GetValue()})
	}
	if size > l.MaxHeaderBytes {
		return nil, invalid("response.headers", fmt.Sprintf("%d bytes", l.MaxHeaderBytes), "%d bytes", size)
	}
	return out, nil
}

// checkHeader holds a stored header to what may be replayed on the wire:
// the name an HTTP token (RFC 9110 §5.1: tchar), the value free of CR, LF
// and NUL, so a replay can neither split the response nor add headers.
func checkHeader(i int, h *idempb.Header) error {
	if name := h.GetName(); !httpguts.ValidHeaderFieldName(name) {
		return invalid(fmt.Sprintf("response.headers[%d].name", i), "an HTTP token (RFC 9110 tchar), non-empty", "%q", name)
	}
	if j := strings.IndexAny(h.GetValue(), "\r\n\x00"); j >= 0 {
		return invalid(fmt.Sprintf("response.headers[%d].value", i), "no CR, LF or NUL", "byte %d is 0x%02x", j, h.GetValue()[j])
	}
	return nil
}

// checkConsistency refuses a consistency this server does not know, rather
// than serving it as the default.
func checkConsistency(c idempb.Consistency) error {
	if _, ok := idempb.Consistency_name[int32(c)]; !ok {
		return invalid("consistency", "LINEARIZABLE (0) or STALE (1)", "%d", int32(c))
	}
	return nil
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

func (l Limits) checkpoint(req *idempb.CheckpointRequest) (*fsm.Command, error) {
	key, err := l.recordKey(req.GetId())
	if err != nil {
		return nil, err
	}
	if err := checkToken(req.GetToken()); err != nil {
		return nil, err
	}
	if err := checkASCII("point", req.GetPoint(), 1, l.MaxPoint, '!', rulePoint); err != nil {
		return nil, err
	}
	if n := len(req.GetData()); n > l.MaxCheckpointData {
		return nil, invalid("data", fmt.Sprintf("%d bytes", l.MaxCheckpointData), "%d bytes", n)
	}
	return &fsm.Command{Type: fsm.TypeCheckpoint, Key: key, Token: req.GetToken(),
		Checkpoint: &fsm.Checkpoint{Point: req.GetPoint(), Data: req.GetData()}, Quota: l.quota()}, nil
}

func (l Limits) get(req *idempb.GetRequest) (fsm.RecordKey, error) {
	key, err := l.recordKey(req.GetId())
	if err != nil {
		return fsm.RecordKey{}, err
	}
	return key, checkConsistency(req.GetConsistency())
}

func (l Limits) wait(req *idempb.WaitRequest) (fsm.RecordKey, time.Duration, error) {
	key, err := l.recordKey(req.GetId())
	if err != nil {
		return fsm.RecordKey{}, 0, err
	}
	timeout, err := duration("timeout", req.GetTimeout(), 0, l.MaxWait, l.DefaultWait)
	if err != nil {
		return fsm.RecordKey{}, 0, err
	}
	return key, timeout, checkConsistency(req.GetConsistency())
}
