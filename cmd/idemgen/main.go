// Command idemgen writes a backup stream (the snapshot format, version 3)
// of synthetic COMPLETED records with the benchmark's sizes: 8-byte tenant
// and scope, 46-byte key, 32-byte fingerprint, 16-byte owner, a 512-byte
// body by default. `idemnode snapshot restore` seeds a node with it, so a
// store of tens of millions of records is built in minutes instead of the
// hours loading them through Raft takes (scripts/bigstate.sh).
//
//	idemgen -records 1000000 -out backup.snap
package main

import (
	"bufio"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/idemnode/idemnode/fsm"
)

func main() {
	records := flag.Int("records", 1_000_000, "how many records")
	body := flag.Int("body", 512, "response body bytes")
	ttl := flag.Duration("ttl", 24*time.Hour, "the records' TTL from now")
	out := flag.String("out", "", "file to write (required)")
	flag.Parse()
	if *out == "" || *records < 0 || *body < 0 {
		fmt.Fprintln(os.Stderr, "idemgen: -out is required; -records and -body must not be negative")
		os.Exit(2)
	}
	start := time.Now()
	v := newSynthetic(*records, *body, start.UnixNano(), ttl.Nanoseconds())
	f, err := os.Create(*out)
	if err == nil {
		w := bufio.NewWriterSize(f, 1<<20)
		if err = fsm.WriteSnapshot(w, v); err == nil {
			err = w.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "idemgen:", err)
		os.Exit(1)
	}
	st, _ := os.Stat(*out)
	fmt.Printf("wrote %d records, %d bytes, digest %s, in %s\n", *records, st.Size(), v.meta.Digest(), time.Since(start).Round(time.Millisecond))
}

// synthetic is an fsm.View of generated records, in key order.
type synthetic struct {
	n, body  int
	now, ttl int64
	meta     fsm.Meta
}

func newSynthetic(n, body int, now, ttl int64) *synthetic {
	s := &synthetic{n: n, body: body, now: now, ttl: ttl}
	s.meta = fsm.Meta{Applied: 1, Term: 1, Now: now}
	// The stream carries the records' Sum and size up front: one pass to
	// count them.
	var sum fsm.Sum
	s.Records(func(enc []byte) error {
		sum.AddRecord(enc)
		s.meta.StreamBytes += uint64(uvarintLen(len(enc)) + len(enc))
		return nil
	})
	s.meta.Records, s.meta.Sum = uint64(n), sum
	return s
}

func (s *synthetic) Meta() fsm.Meta { return s.meta }
func (s *synthetic) Close() error   { return nil }

// Events: a generated state has no abandoned feed.
func (s *synthetic) Events(func(enc []byte) error) error { return nil }

// Records generates record i with key "bench-key-…" (zero-padded, so key
// order is i's order) and a body of pseudo-random bytes seeded by i, which
// compresses no better than a real response would.
func (s *synthetic) Records(fn func(enc []byte) error) error {
	body := make([]byte, s.body)
	fp := sha256.Sum256([]byte("fingerprint"))
	for i := range s.n {
		fill(body, uint64(i))
		r := &fsm.Record{
			RecordKey:   fsm.RecordKey{Tenant: "tenant-1", Scope: "POST /v1", Key: fmt.Sprintf("bench-key-%036d", i)},
			State:       fsm.StateCompleted,
			Fingerprint: fp[:],
			Owner:       fmt.Sprintf("owner-%010d", i),
			Token:       fsm.TokenFor(1, 0),
			Attempt:     1,
			CreatedAt:   s.now, CompletedAt: s.now,
			ExpiresAt: s.now + s.ttl + int64(i), // spread over the TTL's end, one a nanosecond
			Response:  &fsm.Response{Status: 201, Headers: []fsm.Header{{Name: "Content-Type", Value: "application/json"}}, Body: body},
		}
		if err := fn(fsm.EncodeRecord(r)); err != nil {
			return err
		}
	}
	return nil
}

// fill writes xorshift64* output seeded by seed into b.
func fill(b []byte, seed uint64) {
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := 0; i < len(b); i += 8 {
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		v := x * 0x2545F4914F6CDD1D
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
}

func uvarintLen(n int) int {
	l := 1
	for n >= 0x80 {
		n >>= 7
		l++
	}
	return l
}
