package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// preflight checks on one key, before any load, that the cluster answers
// with the semantics the benchmark assumes (docs/API.md): a fast store that
// does not is no result. It returns a one-line summary for the result.
func preflight(ctx context.Context, c idempb.IdempotencyClient, prefix string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	key := prefix + "preflight"
	fpA, fpB := fingerprint(key, 1), fingerprint(key, 2)
	body := responseBody(1)
	check := func(what string, got, want idempb.Outcome, err error) error {
		if err != nil {
			return fmt.Errorf("preflight %s: %w", what, err)
		}
		if got != want {
			return fmt.Errorf("preflight %s: got %v, want %v", what, got, want)
		}
		return nil
	}

	first, err := c.Claim(ctx, claimRequest(key, fpA, "preflight-a"))
	if err := check("first claim wins", first.GetOutcome(), idempb.Outcome_OUTCOME_WON, err); err != nil {
		return "", err
	}
	token := first.GetToken()
	retry, err := c.Claim(ctx, claimRequest(key, fpA, "preflight-a"))
	if err := check("retried claim (same owner) wins again", retry.GetOutcome(), idempb.Outcome_OUTCOME_WON, err); err != nil {
		return "", err
	}
	if retry.GetToken() != token {
		return "", fmt.Errorf("preflight retried claim: token %d, want the first claim's %d", retry.GetToken(), token)
	}
	claim := func(fp []byte, owner string) func() (idempb.Outcome, error) {
		return func() (idempb.Outcome, error) {
			res, err := c.Claim(ctx, claimRequest(key, fp, owner))
			return res.GetOutcome(), err
		}
	}
	complete := func(key string, token uint64, body []byte) func() (idempb.Outcome, error) {
		return func() (idempb.Outcome, error) {
			res, err := c.Complete(ctx, completeRequest(key, token, body))
			return res.GetOutcome(), err
		}
	}
	steps := []struct {
		what string
		do   func() (idempb.Outcome, error)
		want idempb.Outcome
	}{
		{"claim by another owner", claim(fpA, "preflight-b"), idempb.Outcome_OUTCOME_IN_PROGRESS},
		{"claim with another fingerprint", claim(fpB, "preflight-c"), idempb.Outcome_OUTCOME_MISMATCH},
		{"complete with a wrong token", complete(key, token+1, responseBody(2)), idempb.Outcome_OUTCOME_FENCED},
		{"complete of an absent key", complete(key+"-absent", token, body), idempb.Outcome_OUTCOME_NOT_FOUND},
		{"complete by the winner", complete(key, token, body), idempb.Outcome_OUTCOME_OK},
	}
	for _, s := range steps {
		got, err := s.do()
		if err := check(s.what, got, s.want, err); err != nil {
			return "", err
		}
	}
	return checkReplay(ctx, c, key, fpA, token, body)
}

// checkReplay is the end of the preflight: a retry of the completed request
// gets the stored body byte for byte, and the record keeps its 24 h TTL.
func checkReplay(ctx context.Context, c idempb.IdempotencyClient, key string, fp []byte, token uint64, body []byte) (string, error) {
	replay, err := c.Claim(ctx, claimRequest(key, fp, "preflight-d"))
	if err != nil || replay.GetOutcome() != idempb.Outcome_OUTCOME_COMPLETED {
		return "", fmt.Errorf("preflight replay: outcome %v, err %v; want COMPLETED", replay.GetOutcome(), err)
	}
	if got := replay.GetResponse().GetBody(); !bytes.Equal(got, body) || replay.GetToken() != token {
		return "", fmt.Errorf("preflight replay: token %d body %.40q, want token %d body %.40q", replay.GetToken(), got, token, body)
	}
	got, err := c.Get(ctx, getRequest(key))
	rec := got.GetRecord()
	if err != nil || rec.GetState() != idempb.State_STATE_COMPLETED || !bytes.Equal(rec.GetFingerprint(), fp) {
		return "", fmt.Errorf("preflight get: state %v fingerprint %x err %v; want COMPLETED with %x", rec.GetState(), rec.GetFingerprint(), err, fp)
	}
	left := time.Until(rec.GetExpiresAt().AsTime())
	if left < ttl-time.Hour || left > ttl+time.Minute {
		return "", fmt.Errorf("preflight: TTL after complete is %v, want about %v", left, ttl)
	}
	return fmt.Sprintf("preflight ok: first claim wins, retry (same owner) wins with the same token, other owner IN_PROGRESS, "+
		"other fingerprint MISMATCH, wrong token FENCED, absent NOT_FOUND, complete OK, replay byte-identical, TTL after complete %v",
		left.Round(time.Second)), nil
}
