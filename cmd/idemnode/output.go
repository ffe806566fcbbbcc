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

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// The views below are the CLI's output: one JSON object with -o json, or
// "field: value" lines. Empty fields are left out of both.

type outcomeView struct {
	Outcome        string `json:"outcome"`
	LeaseExpiresAt string `json:"lease_expires_at,omitempty"`
}

type claimOut struct {
	Outcome        string        `json:"outcome"`
	Token          uint64        `json:"token,omitempty"`
	Attempt        uint32        `json:"attempt,omitempty"`
	Owner          string        `json:"owner,omitempty"`
	LeaseExpiresAt string        `json:"lease_expires_at,omitempty"`
	ExpiresAt      string        `json:"expires_at,omitempty"`
	Response       *responseView `json:"response,omitempty"`
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
	CreatedAt      string        `json:"created_at,omitempty"`
	ExpiresAt      string        `json:"expires_at,omitempty"`
	CompletedAt    string        `json:"completed_at,omitempty"`
	Response       *responseView `json:"response,omitempty"`
}

type statusView struct {
	NodeID       string `json:"node_id"`
	State        string `json:"state"`
	LeaderID     string `json:"leader_id"`
	LeaderAddr   string `json:"leader_addr"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	Records      uint64 `json:"records"`
	Digest       string `json:"digest"`
	FSMTime      string `json:"fsm_time,omitempty"`
}

func outcomeName(o idempb.Outcome) string {
	return strings.ToLower(strings.TrimPrefix(o.String(), "OUTCOME_"))
}

func tsString(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return ""
	}
	return ts.AsTime().UTC().Format(time.RFC3339Nano)
}

func claimView(r *idempb.ClaimResponse, owner string) claimOut {
	out := claimOut{Outcome: outcomeName(r.GetOutcome()), Token: r.GetToken(), Attempt: r.GetAttempt(),
		LeaseExpiresAt: tsString(r.GetLeaseExpiresAt()), ExpiresAt: tsString(r.GetExpiresAt()),
		Response: responseViewOf(r.GetResponse())}
	if r.GetOutcome() == idempb.Outcome_OUTCOME_WON {
		out.Owner = owner
	}
	return out
}

func responseViewOf(r *idempb.Response) *responseView {
	if r == nil {
		return nil
	}
	v := &responseView{Status: r.GetStatus(), BodyBase64: base64.StdEncoding.EncodeToString(r.GetBody())}
	if utf8.Valid(r.GetBody()) {
		v.Body = string(r.GetBody())
	}
	for _, h := range r.GetHeaders() {
		v.Headers = append(v.Headers, headerView{Name: h.GetName(), Value: h.GetValue()})
	}
	return v
}

func recordResult(o idempb.Outcome, r *idempb.Record) recordOut {
	out := recordOut{Outcome: outcomeName(o)}
	if r == nil {
		return out
	}
	out.Record = &recordView{
		Tenant: r.GetId().GetTenant(), Scope: r.GetId().GetScope(), Key: r.GetId().GetKey(),
		State:       strings.ToLower(strings.TrimPrefix(r.GetState().String(), "STATE_")),
		Fingerprint: hex.EncodeToString(r.GetFingerprint()),
		Token:       r.GetToken(), Attempt: r.GetAttempt(),
		LeaseExpiresAt: tsString(r.GetLeaseExpiresAt()), CreatedAt: tsString(r.GetCreatedAt()),
		ExpiresAt: tsString(r.GetExpiresAt()), CompletedAt: tsString(r.GetCompletedAt()),
		Response: responseViewOf(r.GetResponse()),
	}
	return out
}

func statusViewOf(s *idempb.StatusResponse) statusView {
	return statusView{NodeID: s.GetNodeId(), State: s.GetState(), LeaderID: s.GetLeaderId(),
		LeaderAddr: s.GetLeaderAddr(), Term: s.GetTerm(), CommitIndex: s.GetCommitIndex(),
		AppliedIndex: s.GetAppliedIndex(), Records: s.GetRecords(), Digest: s.GetDigest(),
		FSMTime: tsString(s.GetFsmTime())}
}

// print writes v in the chosen format; a refused outcome (MISMATCH, FENCED)
// is printed and then reported as refusedError so the exit code is 1.
func (c *clientFlags) print(v any, o idempb.Outcome) error {
	var err error
	if c.output == "json" {
		err = json.NewEncoder(os.Stdout).Encode(v)
	} else {
		err = printText(os.Stdout, "", reflect.ValueOf(v))
	}
	if err != nil {
		return runtimeError{fmt.Errorf("write output: %w", err)}
	}
	if o == idempb.Outcome_OUTCOME_MISMATCH || o == idempb.Outcome_OUTCOME_FENCED {
		return refusedError{outcomeName(o)}
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
