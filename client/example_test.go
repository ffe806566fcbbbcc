package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/idemnode/idemnode/client"
)

// The examples run against the three-node cluster that TestMain starts,
// whose gRPC addresses nodeAddrs lists; point Addrs at your own nodes
// (default port 7400), as in []string{"10.0.0.1:7400", "10.0.0.2:7400"}.

// Do runs a side effect once per key; the retry is answered from the record.
func ExampleClient_Do() {
	c, err := client.New(client.Config{Addrs: nodeAddrs})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The key is generated once, when the operation is created, and sent
	// again on every retry; the fingerprint identifies the request.
	id := client.ID{Tenant: "acme", Scope: "POST /v1/charges", Key: client.NewKey()}
	request := []byte(`{"amount":100,"currency":"EUR"}`)
	fingerprint := client.Fingerprint([]byte("charge"), request)

	charge := func(ctx context.Context) (client.Response, error) {
		fmt.Println("charging the card")
		return client.Response{Status: 201, Body: []byte(`{"id":"ch_1","amount":100}`)}, nil
	}
	for range 2 { // the second call is a retry
		res, err := c.Do(ctx, id, fingerprint, charge)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.Response.Status, string(res.Response.Body), "replayed:", res.Replayed)
	}
	// Output:
	// charging the card
	// 201 {"id":"ch_1","amount":100} replayed: false
	// 201 {"id":"ch_1","amount":100} replayed: true
}

// A permanent failure is stored and replayed; a transient one is released
// so that the retry runs the function again.
func ExampleClient_Do_failures() {
	c, err := client.New(client.Config{Addrs: nodeAddrs})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	id := client.ID{Tenant: "acme", Scope: "POST /v1/charges", Key: client.NewKey()}

	attempts := 0
	charge := func(ctx context.Context) (client.Response, error) {
		attempts++
		if attempts == 1 {
			return client.Response{}, errors.New("bank timed out") // transient: released
		}
		declined := client.Response{Status: 402, Body: []byte(`{"title":"card declined"}`)}
		return declined, client.Permanent(errors.New("card declined")) // stored
	}
	for range 3 {
		res, err := c.Do(ctx, id, []byte("request"), charge)
		fmt.Printf("status %d replayed %v err %v\n", res.Response.Status, res.Replayed, err)
	}
	fmt.Println("attempts:", attempts)
	// Output:
	// status 0 replayed false err bank timed out
	// status 402 replayed false err card declined
	// status 402 replayed true err <nil>
	// attempts: 2
}

// The low-level calls: claim, run the side effect, complete.
func ExampleClient_Claim() {
	c, err := client.New(client.Config{Addrs: nodeAddrs})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	id := client.ID{Tenant: "acme", Scope: "POST /v1/charges", Key: client.NewKey()}

	claim, err := c.Claim(ctx, id, []byte("request"), client.WithLease(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("claim:", claim.Outcome)
	// ... run the side effect while the lease lasts, then store its response:
	outcome, err := c.Complete(ctx, id, claim.Token, client.Response{Status: 201, Body: []byte("done")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("complete:", outcome)

	retry, err := c.Claim(ctx, id, []byte("request"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retry:", retry.Outcome, string(retry.Response.Body))
	other, err := c.Claim(ctx, id, []byte("another request"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("key reused:", other.Outcome)
	// Output:
	// claim: won
	// complete: ok
	// retry: completed done
	// key reused: mismatch
}

// A consumer of redelivered messages keeps no state between deliveries, so
// it derives the key from the message's business identifiers.
func ExampleDeriveKey() {
	key := client.DeriveKey("payments/charge", "acme", "order-42", "v1")
	fmt.Println(key)
	fmt.Println(key == client.DeriveKey("payments/charge", "acme", "order-42", "v1"))
	fmt.Println(key == client.DeriveKey("payments/charge", "acme", "order-42", "v2"))
	// Output:
	// a9f7f429-334c-5ed1-92ce-c7ced9cacb27
	// true
	// false
}

// NewKey is generated once per logical operation and kept for its retries.
func ExampleNewKey() {
	key := client.NewKey()
	fmt.Println(len(key), key[14:15])
	// Output: 36 4
}

// Outside HTTP, the fingerprint names what the request does, part by part
// in a fixed order, so that a retry of the same transfer matches and a key
// reused for another transfer is refused (MISMATCH).
func ExampleFingerprint() {
	fp := client.Fingerprint([]byte("transfer"), []byte("acct-1"), []byte("acct-2"), []byte("100.00 EUR"))
	fmt.Printf("%x\n", fp[:8])
	fmt.Println(bytes.Equal(fp, client.Fingerprint([]byte("transfer"), []byte("acct-1"), []byte("acct-2"), []byte("100.00 EUR"))))
	fmt.Println(bytes.Equal(fp, client.Fingerprint([]byte("transfer"), []byte("acct-1"), []byte("acct-2"), []byte("999.00 EUR"))))
	// Output:
	// 1f74b4b12fdcc115
	// true
	// false
}

// A multi-step operation records each step it finishes. When a run fails
// between the steps (here the receipt service is down; a crash is the same,
// once the lease runs out), the next call resumes after the last step
// instead of charging the card again.
func ExampleRun_Checkpoint() {
	c, err := client.New(client.Config{Addrs: nodeAddrs})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	id := client.ID{Tenant: "acme", Scope: "POST /v1/rides", Key: client.NewKey()}
	fingerprint := client.Fingerprint([]byte("ride"), []byte(`{"from":"A","to":"B"}`))

	receiptsDown := true
	ride := func(ctx context.Context) (client.Response, error) {
		run, _ := client.RunFrom(ctx)
		charge, resumed := run.Resume()
		if resumed {
			fmt.Println("resuming after", charge.Name, string(charge.Data))
		} else {
			fmt.Println("charging the card")
			charge = client.RecoveryPoint{Name: "charged", Data: []byte("ch_1")}
			if err := run.Checkpoint(ctx, charge.Name, charge.Data); err != nil {
				return client.Response{}, err
			}
		}
		if receiptsDown {
			return client.Response{}, errors.New("receipt service unavailable") // transient
		}
		fmt.Println("sending the receipt for", string(charge.Data))
		return client.Response{Status: 201, Body: charge.Data}, nil
	}
	if _, err := c.Do(ctx, id, fingerprint, ride); err != nil {
		fmt.Println("first attempt:", err)
	}
	receiptsDown = false
	res, err := c.Do(ctx, id, fingerprint, ride)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Response.Status, string(res.Response.Body))
	// Output:
	// charging the card
	// first attempt: receipt service unavailable
	// resuming after charged ch_1
	// sending the receipt for ch_1
	// 201 ch_1
}
