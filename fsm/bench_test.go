package fsm

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
)

// Realistic sizes: a 10-byte tenant, the usual scope, a 36-byte UUID key, a
// SHA-256 fingerprint and a 32-byte owner nonce.
const benchTenant = "tenant-042"

func benchKey(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

func benchClaim(i int) *Command {
	fp := sha256.Sum256([]byte(benchKey(i)))
	return &Command{Type: TypeClaim, Now: t0 + int64(i), Fingerprint: fp[:],
		Key:   RecordKey{Tenant: benchTenant, Scope: testScope, Key: benchKey(i)},
		Owner: fmt.Sprintf("%032x", i), Lease: defLease, TTL: defTTL}
}

// bench512 is a response with a 512-byte body and two headers.
func bench512() *Response {
	return &Response{Status: 201, Body: bytes.Repeat([]byte("x"), 512),
		Headers: []Header{{"Content-Type", "application/json"}, {"Request-Id", "req_0123456789abcdef"}}}
}

func BenchmarkApplyClaim(b *testing.B) {
	m := NewMachine()
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = benchKey(i)
	}
	c := benchClaim(0) // records copy the key and share the (immutable) fingerprint
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		c.Key.Key, c.Now = keys[i], t0+int64(i)
		if res := m.Apply(uint64(i+1), c); res.Outcome != OutcomeWon {
			b.Fatalf("claim %d: %v", i, res.Outcome)
		}
	}
}

func BenchmarkApplyComplete(b *testing.B) {
	m := NewMachine()
	for i := range b.N {
		m.Apply(uint64(i+1), benchClaim(i))
	}
	cs := make([]*Command, b.N)
	for i := range cs {
		cs[i] = &Command{Type: TypeComplete, Now: t0 + int64(b.N+i), Token: tok(uint64(i + 1)),
			Key: RecordKey{Tenant: benchTenant, Scope: testScope, Key: benchKey(i)}, Response: bench512()}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if res := m.Apply(uint64(b.N+i+1), cs[i]); res.Outcome != OutcomeOK {
			b.Fatalf("complete %d: %v", i, res.Outcome)
		}
	}
}

// BenchmarkApplyBatch applies group-committed entries of 64 claims each.
func BenchmarkApplyBatch(b *testing.B) {
	const per = 64
	m := NewMachine()
	batches := make([]*Command, b.N)
	for i := range batches {
		batches[i] = &Command{Type: TypeBatch}
		for j := range per {
			batches[i].Batch = append(batches[i].Batch, benchClaim(i*per+j))
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if res := m.Apply(uint64(i+1), batches[i]); res.Batch[per-1].Outcome != OutcomeWon {
			b.Fatalf("batch %d: %v", i, res.Batch[per-1].Outcome)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*per), "ns/claim")
}

func codecCases() []struct {
	name string
	cmd  *Command
} {
	return []struct {
		name string
		cmd  *Command
	}{
		{"claim", benchClaim(7)},
		{"complete512", &Command{Type: TypeComplete, Now: t0, Token: tok(9),
			Key: RecordKey{Tenant: benchTenant, Scope: testScope, Key: benchKey(7)}, Response: bench512()}},
	}
}

func BenchmarkEncodeCommand(b *testing.B) {
	for _, tc := range codecCases() {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(EncodeCommand(tc.cmd))))
			b.ReportAllocs()
			for b.Loop() {
				EncodeCommand(tc.cmd)
			}
		})
	}
}

func BenchmarkDecodeCommand(b *testing.B) {
	for _, tc := range codecCases() {
		b.Run(tc.name, func(b *testing.B) {
			enc := EncodeCommand(tc.cmd)
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeCommand(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// insertRecords claims and completes (empty body) n records through the codec, the
// way a node builds its state from the log.
func insertRecords(m *Machine, from, n int) {
	for i := from; i < from+n; i++ {
		c, _ := DecodeCommand(EncodeCommand(benchClaim(i)))
		m.Apply(uint64(2*i+1), c)
		done := &Command{Type: TypeComplete, Now: c.Now, Key: c.Key, Token: tok(uint64(2*i + 1)),
			Response: &Response{Status: 200}}
		c, _ = DecodeCommand(EncodeCommand(done))
		m.Apply(uint64(2*i+2), c)
	}
}

var bench100k = sync.OnceValues(func() (*Machine, []byte) {
	m := NewMachine()
	insertRecords(m, 0, 100_000)
	var buf bytes.Buffer
	if err := m.WriteSnapshot(&buf); err != nil {
		panic(err)
	}
	return m, buf.Bytes()
})

func BenchmarkSnapshot100k(b *testing.B) {
	m, snap := bench100k()
	b.SetBytes(int64(len(snap)))
	b.ReportAllocs()
	for b.Loop() {
		if err := m.WriteSnapshot(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRestore100k(b *testing.B) {
	_, snap := bench100k()
	m := NewMachine()
	b.SetBytes(int64(len(snap)))
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Restore(bytes.NewReader(snap)); err != nil {
			b.Fatal(err)
		}
	}
	if m.Len() != 100_000 {
		b.Fatalf("restored %d records", m.Len())
	}
}

// BenchmarkMemoryPerRecord inserts b.N completed records and reports the
// live heap they take, indexes included, after a full GC.
func BenchmarkMemoryPerRecord(b *testing.B) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	b.ResetTimer()
	m := NewMachine()
	insertRecords(m, 0, b.N)
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if m.Len() != b.N {
		b.Fatalf("stored %d records", m.Len())
	}
	runtime.KeepAlive(m)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "B/record")
}
