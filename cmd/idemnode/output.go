package main

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// The views below are the CLI's output: one JSON object with -o json, or
// "field: value" lines. Empty fields are left out of both.

type outcomeView struct {
	Outcome        string `json:"outcome"`
	LeaseExpiresAt string `json:"lease_expires_at,omitempty"`
}

type claimOut struct {
	Outcome        string `json:"outcome"`
	Token          uint64 `json:"token,omitempty"`
	Attempt        uint32 `json:"attempt,omitempty"`
	Owner          string `json:"owner,omitempty"`
	LeaseExpiresAt string `json:"lease_expires_at,omitempty"`
	ExpiresAt      string `json:"expires_at,omitempty"`
	// CompletedAt is when the response was stored (completed, and expired
	// when it had completed).
	CompletedAt string        `json:"completed_at,omitempty"`
	Response    *responseView `json:"response,omitempty"`
	// RecoveryPoint, on a takeover, is where this holder resumes.
	RecoveryPoint *pointView `json:"recovery_point,omitempty"`
}

// pointView is a recovery point: its data as text when it is valid UTF-8,
// and always as base64.
type pointView struct {
	Name       string `json:"name"`
	Data       string `json:"data,omitempty"`
	DataBase64 string `json:"data_base64,omitempty"`
}

func pointViewOf(p *client.RecoveryPoint) *pointView {
	if p == nil {
		return nil
	}
	v := &pointView{Name: p.Name}
	v.Data, v.DataBase64 = bytesView(p.Data)
	return v
}

// bytesView shows bytes as text when they are valid UTF-8, and always as
// base64, which holds them exactly.
func bytesView(b []byte) (text, b64 string) {
	if utf8.Valid(b) {
		text = string(b)
	}
	return text, base64.StdEncoding.EncodeToString(b)
}

type responseView struct {
	Status  int32        `json:"status"`
	Headers []headerView `json:"headers,omitempty"`
	// Body is the body as text when it is valid UTF-8; BodyBase64 always
	// holds the exact bytes.
	Body       string `json:"body,omitempty"`
	BodyBase64 string `json:"body_base64,omitempty"`
}

type headerView struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type recordOut struct {
	Outcome string      `json:"outcome"`
	Record  *recordView `json:"record,omitempty"`
	// Note says that a PENDING record's lease has lapsed.
	Note string `json:"note,omitempty"`
}

type recordView struct {
	Tenant         string        `json:"tenant"`
	Scope          string        `json:"scope"`
	Key            string        `json:"key"`
	State          string        `json:"state"`
	Fingerprint    string        `json:"fingerprint,omitempty"`
	Token          uint64        `json:"token"`
	Attempt        uint32        `json:"attempt"`
	LeaseExpiresAt string        `json:"lease_expires_at,omitempty"`
	LeaseLapsed    bool          `json:"lease_lapsed,omitempty"`
	CreatedAt      string        `json:"created_at,omitempty"`
	ExpiresAt      string        `json:"expires_at,omitempty"`
	CompletedAt    string        `json:"completed_at,omitempty"`
	Response       *responseView `json:"response,omitempty"`
	RecoveryPoint  *pointView    `json:"recovery_point,omitempty"`
}

// statusView is every field of a node's status, zeros included. A caller
// that is not an admin is shown only the first four (rpc's redactStatus):
// the others are nil, left out of the JSON and named under "redacted".
type statusView struct {
	NodeID       string   `json:"node_id"`
	State        string   `json:"state"`
	LeaderID     string   `json:"leader_id"`
	LeaderAddr   string   `json:"leader_addr"`
	Term         *uint64  `json:"term,omitempty"`
	CommitIndex  *uint64  `json:"commit_index,omitempty"`
	AppliedIndex *uint64  `json:"applied_index,omitempty"`
	Records      *uint64  `json:"records,omitempty"`
	Digest       *string  `json:"digest,omitempty"`
	FSMTime      *string  `json:"fsm_time,omitempty"`
	ClusterID    *string  `json:"cluster_id,omitempty"`
	Redacted     []string `json:"redacted,omitempty"`
}

// timeString is t in UTC, to the nanosecond; "" for the zero time (none).
func timeString(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func claimView(r client.ClaimResult) claimOut {
	out := claimOut{Outcome: r.Outcome.String(), Token: r.Token, Attempt: r.Attempt,
		LeaseExpiresAt: timeString(r.LeaseExpiresAt), ExpiresAt: timeString(r.ExpiresAt),
		CompletedAt: timeString(r.CompletedAt),
		Response:    responseViewOf(r.Response), RecoveryPoint: pointViewOf(r.RecoveryPoint)}
	if r.Outcome == client.OutcomeWon {
		out.Owner = r.Owner
	}
	return out
}

func responseViewOf(r *client.Response) *responseView {
	if r == nil {
		return nil
	}
	v := &responseView{Status: int32(r.Status)}
	v.Body, v.BodyBase64 = bytesView(r.Body)
	for _, h := range r.Headers {
		v.Headers = append(v.Headers, headerView{Name: h.Name, Value: h.Value})
	}
	return v
}

// recordResult is the view of a Get or Wait answer; now (this machine's
// clock) tells whether a PENDING record's lease has lapsed.
func recordResult(o client.Outcome, r *client.Record, now time.Time) recordOut {
	out := recordOut{Outcome: o.String()}
	if r == nil {
		return out
	}
	out.Record = &recordView{
		Tenant: r.ID.Tenant, Scope: r.ID.Scope, Key: r.ID.Key,
		State:       r.State.String(),
		Fingerprint: hex.EncodeToString(r.Fingerprint),
		Token:       r.Token, Attempt: r.Attempt,
		LeaseExpiresAt: timeString(r.LeaseExpiresAt), CreatedAt: timeString(r.CreatedAt),
		ExpiresAt: timeString(r.ExpiresAt), CompletedAt: timeString(r.CompletedAt),
		Response: responseViewOf(r.Response), RecoveryPoint: pointViewOf(r.RecoveryPoint),
	}
	if lease := r.LeaseExpiresAt; r.State == client.StatePending && !lease.IsZero() && lease.Before(now) {
		out.Record.LeaseLapsed = true
		out.Note = fmt.Sprintf("the lease lapsed %s ago (by this machine's clock): the holder is presumed dead, and the next claim takes the key over",
			now.Sub(lease).Round(time.Millisecond))
	}
	return out
}

func statusViewOf(s client.NodeStatus) statusView {
	v := statusView{NodeID: s.NodeID, State: s.State, LeaderID: s.LeaderID, LeaderAddr: s.LeaderAddr}
	if s.Redacted {
		v.Redacted = []string{"term", "commit_index", "applied_index", "records", "digest", "fsm_time", "cluster_id"}
		return v
	}
	v.Term, v.CommitIndex, v.AppliedIndex, v.Records = ptr(s.Term), ptr(s.CommitIndex), ptr(s.AppliedIndex), ptr(s.Records)
	v.Digest, v.FSMTime, v.ClusterID = ptr(s.Digest), ptr(timeString(s.FSMTime)), ptr(s.ClusterID)
	return v
}

func ptr[T any](v T) *T { return &v }

// writeStatusText prints every field of v as "name: value": a redacted one
// as "redacted", an empty one as "none".
func writeStatusText(w io.Writer, v statusView) error {
	rv, t := reflect.ValueOf(v), reflect.TypeOf(v)
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		f := rv.Field(i)
		var val any
		switch {
		case name == "redacted":
			continue
		case f.Kind() == reflect.Pointer && f.IsNil():
			val = "redacted"
		case f.Kind() == reflect.Pointer:
			val = f.Elem().Interface()
		default:
			val = f.Interface()
		}
		if val == "" {
			val = "none"
		}
		if _, err := fmt.Fprintf(w, "%s: %v\n", name, val); err != nil {
			return err
		}
	}
	return nil
}

// print writes v in the chosen format and returns the outcome's exit code
// (exit.go) as an exitError when it is not 0.
func (c *clientFlags) print(v any, o idempb.Outcome) error {
	var err error
	switch sv, isStatus := v.(statusView); {
	case c.output == "json":
		err = json.NewEncoder(os.Stdout).Encode(v)
	case isStatus:
		err = writeStatusText(os.Stdout, sv)
	default:
		err = printText(os.Stdout, "", reflect.ValueOf(v))
	}
	if err != nil {
		return runtimeError{fmt.Errorf("write output: %w", err)}
	}
	if code := outcomeExit(o); code != exitOK {
		return exitError{code}
	}
	return nil
}

// printText prints a view's non-empty fields as "name: value" lines, nested
// views indented, using the JSON names so both formats read alike.
func printText(w io.Writer, indent string, v reflect.Value) error {
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := v.Field(i)
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if f.IsZero() {
			continue
		}
		var err error
		switch f.Kind() {
		case reflect.Pointer:
			if _, err = fmt.Fprintf(w, "%s%s:\n", indent, name); err == nil {
				err = printText(w, indent+"  ", f)
			}
		case reflect.Slice:
			for j := 0; j < f.Len() && err == nil; j++ {
				h := f.Index(j).Interface().(headerView)
				_, err = fmt.Fprintf(w, "%sheader: %s: %s\n", indent, h.Name, h.Value)
			}
		default:
			_, err = fmt.Fprintf(w, "%s%s: %v\n", indent, name, f.Interface())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func readAll(r io.Reader) ([]byte, error) { return io.ReadAll(r) }
