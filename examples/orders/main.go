// Command orders is a tiny order service that knows nothing about
// idempotency: every POST /orders creates an order, so a retried request
// creates another. docker-compose.yml runs it behind `idemnode proxy`,
// which makes each Idempotency-Key create one order, without changing a
// line here.
//
//	POST /orders               create an order; 201 with its number, and
//	                           the key and fencing token the proxy passed
//	GET  /orders/count?key=K   how many orders were created with key K
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"sync"
	"time"
)

// orders counts what was created, in total and per Idempotency-Key.
type orders struct {
	mu    sync.Mutex
	next  int
	byKey map[string]int
}

func (o *orders) create(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.next++
	n := o.next
	key := r.Header.Get("Idempotency-Key")
	o.byKey[key]++
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"order": n, "key": key, "token": r.Header.Get("Idempotency-Token")})
}

func (o *orders) count(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	o.mu.Lock()
	n := o.byKey[key]
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"key": key, "count": n})
}

func handler() http.Handler {
	o := &orders{byKey: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", o.create)
	mux.HandleFunc("GET /orders/count", o.count)
	return mux
}

func main() {
	listen := flag.String("listen", "127.0.0.1:9000", "address to serve on")
	flag.Parse()
	srv := &http.Server{Addr: *listen, Handler: handler(), ReadHeaderTimeout: 5 * time.Second}
	log.Printf("orders serving on %s", *listen)
	log.Fatal(srv.ListenAndServe())
}
