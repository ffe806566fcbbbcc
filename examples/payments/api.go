package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
)

// api is the payment service: the charge handler and its run counter.
type api struct {
	// executions counts every run of the charge handler, whatever it
	// answered: it is what the idempotency guarantee keeps down.
	executions atomic.Int64
}

// newAPI returns the routes, with POST /v1/charges behind the middleware.
func newAPI(c *client.Client, wait time.Duration, log *slog.Logger) (http.Handler, error) {
	m, err := idemhttp.New(idemhttp.Config{Client: c, Tenant: idemhttp.BearerTenant, Wait: wait, Logger: log})
	if err != nil {
		return nil, err
	}
	a := &api{}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/charges", m.Handler(http.HandlerFunc(a.charge)))
	mux.HandleFunc("GET /v1/stats", a.stats)
	return mux, nil
}

type chargeRequest struct {
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
}

type charge struct {
	ID       string `json:"id"`
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
}

// charge creates a charge. The demo bank declines an amount of 402 (a
// permanent failure: stored and replayed) and is unavailable for 503 (a
// transient failure: released, so a retry charges again).
func (a *api) charge(w http.ResponseWriter, r *http.Request) {
	a.executions.Add(1)
	var req chargeRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		problem(w, http.StatusBadRequest, "invalid-request", "Invalid request body", err.Error())
		return
	}
	if req.Amount <= 0 || len(req.Currency) != 3 {
		problem(w, http.StatusBadRequest, "invalid-request", "Invalid charge", "amount must be positive and currency a 3-letter code")
		return
	}
	switch req.Amount {
	case http.StatusPaymentRequired:
		problem(w, http.StatusPaymentRequired, "card-declined", "Card declined", "The bank declined the charge.")
		return
	case http.StatusServiceUnavailable:
		problem(w, http.StatusServiceUnavailable, "bank-unavailable", "Bank unavailable", "The bank did not answer; retry with the same Idempotency-Key.")
		return
	}
	ch := charge{ID: "ch_" + randomID(), Amount: req.Amount, Currency: req.Currency}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/v1/charges/"+ch.ID)
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(ch)
}

// stats reports how many times the charge handler ran.
func (a *api) stats(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int64{"executions": a.executions.Load()})
}

func problem(w http.ResponseWriter, status int, typ, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "https://payments.example/problems/" + typ, "title": title, "status": status, "detail": detail})
}

func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
