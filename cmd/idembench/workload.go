package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	mrand "math/rand/v2"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// The workload is bench-peers' (shared/bench-peers/README.md): one tenant and
// scope, keys idem/<run id>/<32 random hex>, a fingerprint that is a real
// SHA-256 over method, path, key and a 240-byte request body, a 24 h TTL and
// a 512-byte stored response.
const (
	tenant       = "bench"
	scope        = "POST /v1/payments"
	lease        = 30 * time.Second // -lease changes the load's
	ttl          = 24 * time.Hour
	responseSize = 512
)

// requestBody stands in for the HTTP request the idempotency key guards
// (240 bytes, the same body bench-peers hashes).
var requestBody = strings.Repeat(`{"amount":1999,"currency":"EUR","customer":"cus_0123456789"}`, 4)

// fingerprint is the SHA-256 of method, path, key and body. variant lets the
// members of a race group send the same key with differing requests.
func fingerprint(key string, variant int) []byte {
	h := sha256.New()
	io.WriteString(h, scope+"\n")
	io.WriteString(h, key)
	h.Write([]byte{byte(variant)})
	io.WriteString(h, requestBody)
	return h.Sum(nil)
}

// runPrefix returns "idem/<8 random hex>/", so that runs against the same
// cluster never share a key.
func runPrefix() string {
	var id [4]byte
	rand.Read(id[:])
	return "idem/" + hex.EncodeToString(id[:]) + "/"
}

// newRNG returns a fast per-client generator seeded from crypto/rand: keys
// and owners must not collide across clients or runs.
func newRNG() *mrand.Rand {
	var seed [32]byte
	rand.Read(seed[:])
	return mrand.New(mrand.NewChaCha8(seed))
}

// randomHex returns n random bytes as 2n hex digits.
func randomHex(rng *mrand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return hex.EncodeToString(b)
}

func randomKey(prefix string, rng *mrand.Rand) string { return prefix + randomHex(rng, 16) }

// newOwner is the nonce of one claim attempt: fresh for every claim the
// benchmark sends, since it never retries.
func newOwner(rng *mrand.Rand) string { return "bench-" + randomHex(rng, 8) }

// responseBody is a deterministic 512-byte body per seed.
func responseBody(seed uint64) []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	rng := mrand.New(mrand.NewPCG(seed, 0x5eed))
	b := make([]byte, responseSize)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return b
}

func recordID(key string) *idempb.RecordId {
	return &idempb.RecordId{Tenant: tenant, Scope: scope, Key: key}
}

func claimRequest(key string, fp []byte, owner string) *idempb.ClaimRequest {
	return &idempb.ClaimRequest{Id: recordID(key), Fingerprint: fp, Owner: owner,
		Lease: durationpb.New(lease), Ttl: durationpb.New(ttl)}
}

func completeRequest(key string, token uint64, body []byte) *idempb.CompleteRequest {
	return &idempb.CompleteRequest{Id: recordID(key), Token: token,
		Response: &idempb.Response{Status: 201, Body: body}}
}

func getRequest(key string) *idempb.GetRequest {
	return &idempb.GetRequest{Id: recordID(key), Consistency: idempb.Consistency_CONSISTENCY_LINEARIZABLE}
}
