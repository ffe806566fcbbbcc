package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// tolerance bounds how old or new a delivery's webhook-timestamp may be,
// against replays of a captured delivery (the spec's advice).
const tolerance = 5 * time.Minute

// events handles verified deliveries and counts them per event id.
type events struct {
	secret  []byte
	mu      sync.Mutex
	handled map[string]int
}

func newEvents(secret []byte) *events { return &events{secret: secret, handled: map[string]int{}} }

// handle verifies the delivery's signature and handles the event; under
// the middleware it runs once per webhook-id.
func (e *events) handle(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	id := r.Header.Get("webhook-id")
	if err := verify(e.secret, id, r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature"), body, time.Now()); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var ev struct{ Type string }
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(w, "the payload is not JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	e.mu.Lock()
	e.handled[id]++
	e.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"handled": id, "type": ev.Type})
}

// count answers how often the event ?id= was handled.
func (e *events) count(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	n := e.handled[r.URL.Query().Get("id")]
	e.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int{"count": n})
}

// parseSecret decodes a Standard Webhooks secret: whsec_ and base64.
func parseSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		return nil, errors.New("want the endpoint's signing secret, whsec_ and base64")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) == 0 {
		return nil, fmt.Errorf("the part after whsec_ is not base64: %v", err)
	}
	return key, nil
}

// sign is the v1 signature of one attempt: HMAC-SHA256 over
// "id.timestamp.body", in base64.
func sign(secret []byte, id, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "%s.%s.%s", id, timestamp, body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// verify checks a delivery as the Standard Webhooks spec says: a
// timestamp within tolerance of now, and one of the space-separated
// signatures (several while the sender rotates its secret) matching.
func verify(secret []byte, id, timestamp, signatures string, body []byte, now time.Time) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not a Unix time", timestamp)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook-timestamp is %s away from now, more than %s", d.Round(time.Second), tolerance)
	}
	want := sign(secret, id, timestamp, body)
	for _, s := range strings.Fields(signatures) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return errors.New("no webhook-signature matches")
}
