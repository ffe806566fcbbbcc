package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestEveryPostCreates: the service is not idempotent by itself; a retried
// POST creates another order (which is why it runs behind the proxy).
func TestEveryPostCreates(t *testing.T) {
	srv := httptest.NewServer(handler())
	defer srv.Close()
	for range 2 {
		req, _ := http.NewRequest("POST", srv.URL+"/orders", nil)
		req.Header.Set("Idempotency-Key", "k1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 201 {
			t.Fatalf("POST: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	resp, err := http.Get(srv.URL + "/orders/count?key=k1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct{ Count int }
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || c.Count != 2 {
		t.Fatalf("count %d (%v), want 2", c.Count, err)
	}
}
