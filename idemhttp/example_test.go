package idemhttp_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
)

// The example runs against the three-node cluster that TestMain starts,
// whose gRPC addresses nodeAddrs lists; point Addrs at your own nodes
// (default port 7400), as in []string{"10.0.0.1:7400", "10.0.0.2:7400"}.
func ExampleMiddleware_Handler() {
	c, err := client.New(client.Config{Addrs: nodeAddrs})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	m, err := idemhttp.New(idemhttp.Config{
		Client: c,
		// The tenant is the authenticated caller; here, demo bearer tokens.
		Tenant: idemhttp.BearerTenant,
	})
	if err != nil {
		log.Fatal(err)
	}
	charges := 0
	mux := http.NewServeMux()
	mux.Handle("POST /v1/charges", m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"ch_%d"}`, charges)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	key := client.NewKey() // one per operation, the same on every retry
	send := func(body string) {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/charges", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer acme")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d replayed=%q %s\n", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), b)
	}
	send(`{"amount":100,"currency":"EUR"}`)
	send(`{"currency":"EUR", "amount":100}`) // a retry: same request, other key order
	send(`{"amount":999,"currency":"EUR"}`)  // the key reused for another request
	fmt.Println("charges:", charges)
	// Output:
	// 201 replayed="" {"id":"ch_1"}
	// 201 replayed="true" {"id":"ch_1"}
	// 422 replayed="" {"type":"https://idemnode.io/problems/idempotency-key-reused","title":"Idempotency-Key reused","status":422,"detail":"This key was already used with a different request; use a new key for a new operation.","operation_state":"mismatch","safe_new_key":true}
	// charges: 1
}
