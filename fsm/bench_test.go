package fsm

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// Record sizes of the peer benchmark's workload (../shared/bench-peers): an
// 8-byte tenant, an 8-byte scope, a 46-byte key, a SHA-256 fingerprint, a
// 16-byte owner and a 512-byte response body without headers.
const (
	benchTenant = "acct-042"
	benchScope  = "POST /v1"
	benchBody   = 512
	// benchPer is the number of commands in one group-committed entry.
	benchPer = 64
)

// benchKey is 46 bytes: "idem/<8-byte run id>/<32 hex>".
func benchKey(i int) RecordKey {
	return RecordKey{Tenant: benchTenant, Scope: benchScope, Key: fmt.Sprintf("idem/run00001/%032x", i)}
}

func benchClaim(i int) *Command {
	k := benchKey(i)
	fp := sha256.Sum256([]byte(k.Key))
	return &Command{Type: TypeClaim, Now: t0 + int64(i), Key: k, Fingerprint: fp[:],
		Owner: fmt.Sprintf("%016x", i), Lease: defLease, TTL: defTTL}
}

func benchResponse() *Response {
	return &Response{Status: 201, Body: bytes.Repeat([]byte("x"), benchBody)}
}

func benchComplete(i int, token uint64) *Command {
	return &Command{Type: TypeComplete, Now: t0 + int64(i), Key: benchKey(i), Token: token, Response: benchResponse()}
}

// benchClaimed returns a machine holding n PENDING records; record i was claimed
// at log index i+1, so its token is tok(i+1).
func benchClaimed(b *testing.B, n int) *Machine {
	m := NewMachine()
	for i := range n {
		if res := m.Apply(uint64(i+1), benchClaim(i)); res.Outcome != OutcomeWon {
			b.Fatalf("claim %d: %v", i, res.Outcome)
		}
	}
	return m
}

// benchApply applies cmds[i] at log index first+i, one per iteration, and
// fails on any outcome other than want.
func benchApply(b *testing.B, m *Machine, first int, cmds []*Command, want Outcome) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if res := m.Apply(uint64(first+i), cmds[i]); res.Outcome != want {
			b.Fatalf("%s %d: %v", cmds[i].Type, i, res.Outcome)
		}
	}
}

func BenchmarkApplyClaim(b *testing.B) {
	cmds := make([]*Command, b.N)
	for i := range cmds {
		cmds[i] = benchClaim(i)
	}
	benchApply(b, NewMachine(), 1, cmds, OutcomeWon)
}

func BenchmarkApplyComplete(b *testing.B) {
	m := benchClaimed(b, b.N)
	cmds := make([]*Command, b.N)
	for i := range cmds {
		cmds[i] = benchComplete(i, tok(uint64(i+1)))
	}
	benchApply(b, m, b.N+1, cmds, OutcomeOK)
}

func BenchmarkApplyRelease(b *testing.B) {
	m := benchClaimed(b, b.N)
	cmds := make([]*Command, b.N)
	for i := range cmds {
		cmds[i] = &Command{Type: TypeRelease, Now: t0 + int64(i), Key: benchKey(i), Token: tok(uint64(i + 1))}
	}
	benchApply(b, m, b.N+1, cmds, OutcomeOK)
}

func BenchmarkApplyExtend(b *testing.B) {
	m := benchClaimed(b, b.N)
	cmds := make([]*Command, b.N)
	for i := range cmds {
		cmds[i] = &Command{Type: TypeExtend, Now: t0 + int64(i), Key: benchKey(i), Token: tok(uint64(i + 1)), Lease: 2 * defLease}
	}
	benchApply(b, m, b.N+1, cmds, OutcomeOK)
}

// BenchmarkApplyExpire deletes one expired record per Expire entry, so
// ns/op is the cost of an entry plus one deletion.
func BenchmarkApplyExpire(b *testing.B) {
	m := benchClaimed(b, b.N)
	late := t0 + int64(b.N) + defTTL
	cmds := make([]*Command, b.N)
	for i := range cmds {
		cmds[i] = &Command{Type: TypeExpire, Now: late, Limit: 1}
	}
	benchApply(b, m, b.N+1, cmds, OutcomeOK)
	if m.Len() != 0 {
		b.Fatalf("%d records left", m.Len())
	}
}

// benchBatches groups cmd(0..n*benchPer-1) into n Batch entries.
func benchBatches(n int, cmd func(i int) *Command) []*Command {
	batches := make([]*Command, n)
	for i := range batches {
		batches[i] = &Command{Type: TypeBatch}
		for j := range benchPer {
			batches[i].Batch = append(batches[i].Batch, cmd(i*benchPer+j))
		}
	}
	return batches
}

// benchApplyBatches applies batches at indexes first, first+1, ... and
// reports the cost per command as well.
func benchApplyBatches(b *testing.B, m *Machine, first int, batches []*Command, want Outcome) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if res := m.Apply(uint64(first+i), batches[i]); res.Batch[benchPer-1].Outcome != want {
			b.Fatalf("batch %d: %v", i, res.Batch[benchPer-1].Outcome)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchPer), "ns/command")
}

// BenchmarkApplyBatch applies group-committed entries of 64 claims each.
func BenchmarkApplyBatch(b *testing.B) {
	benchApplyBatches(b, NewMachine(), 1, benchBatches(b.N, benchClaim), OutcomeWon)
}

// BenchmarkApplyBatchComplete applies entries of 64 completes (512-byte
// bodies) of records claimed in batches of 64.
func BenchmarkApplyBatchComplete(b *testing.B) {
	m := NewMachine()
	for i, c := range benchBatches(b.N, benchClaim) {
		m.Apply(uint64(i+1), c)
	}
	dones := benchBatches(b.N, func(i int) *Command { return benchComplete(i, TokenFor(uint64(i/benchPer+1), i%benchPer)) })
	benchApplyBatches(b, m, b.N+1, dones, OutcomeOK)
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
		{"complete512", benchComplete(7, tok(9))},
		{"release", &Command{Type: TypeRelease, Now: t0, Key: benchKey(7), Token: tok(9)}},
		{"extend", &Command{Type: TypeExtend, Now: t0, Key: benchKey(7), Token: tok(9), Lease: defLease}},
		{"expire", &Command{Type: TypeExpire, Now: t0, Limit: 1000}},
		{"batch64claims", benchBatches(1, benchClaim)[0]},
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

// buildCompleted claims and completes n records in Batch entries of 64
// commands, each encoded and decoded as the log carries it, so the records
// hold exactly what a node builds from its log.
func buildCompleted(m *Machine, n int) {
	index := uint64(0)
	apply := func(cs []*Command) []Result {
		index++
		c, err := DecodeCommand(EncodeCommand(&Command{Type: TypeBatch, Now: cs[0].Now, Batch: cs}))
		if err != nil {
			panic(err)
		}
		return m.Apply(index, c).Batch
	}
	claims := make([]*Command, 0, benchPer)
	dones := make([]*Command, 0, benchPer)
	for from := 0; from < n; from += benchPer {
		claims, dones = claims[:0], dones[:0]
		for i := from; i < min(from+benchPer, n); i++ {
			claims = append(claims, benchClaim(i))
		}
		for j, res := range apply(claims) {
			dones = append(dones, benchComplete(from+j, res.Record.Token))
		}
		for j, res := range apply(dones) {
			if res.Outcome != OutcomeOK {
				panic(fmt.Sprintf("complete %d: %v", from+j, res.Outcome))
			}
		}
	}
}

var bench100k = sync.OnceValues(func() (*Machine, []byte) {
	m := NewMachine()
	buildCompleted(m, 100_000)
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

// randomKeyStored is how many records the random-key benchmarks hold before
// they measure: about what a node holds after a minute of the peer
// benchmark, more than the CPU caches take.
const randomKeyStored = 200_000

// randomKeyBatches is n entries of benchPer claims of random keys, as the
// peer benchmark and real clients (UUIDs) send: each lands at a random place
// in the key tree, not at its end as benchKey's counter does. Every command
// of an entry has the entry's time, as the leader stamps them, from first
// on, a millisecond apart.
func randomKeyBatches(rng *rand.Rand, n int, first int64) []*Command {
	batches := benchBatches(n, func(i int) *Command {
		c := benchClaim(i)
		c.Key.Key = fmt.Sprintf("idem/run00001/%016x%016x", rng.Uint64(), rng.Uint64())
		return c
	})
	for i, b := range batches {
		stampAll(b, first+int64(i)*int64(time.Millisecond))
	}
	return batches
}

func stampAll(c *Command, now int64) {
	c.Now = now
	for _, sub := range c.Batch {
		sub.Now = now
	}
}

// BenchmarkApplyBatchRandomKeys applies entries of 64 claims of random keys
// to a machine that holds randomKeyStored records already.
func BenchmarkApplyBatchRandomKeys(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := NewMachine()
	preload := randomKeyBatches(rng, randomKeyStored/benchPer, t0)
	for i, c := range preload {
		m.Apply(uint64(i+1), c)
	}
	later := t0 + int64(len(preload))*int64(time.Millisecond)
	benchApplyBatches(b, m, len(preload)+1, randomKeyBatches(rng, b.N, later), OutcomeWon)
}

// BenchmarkApplyBatchCompleteRandomKeys completes, 64 per entry, records of
// random keys among randomKeyStored, in another order than they were claimed.
func BenchmarkApplyBatchCompleteRandomKeys(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	m := NewMachine()
	claims := randomKeyBatches(rng, max(randomKeyStored, b.N*benchPer)/benchPer, t0)
	for i, c := range claims {
		m.Apply(uint64(i+1), c)
	}
	later := t0 + int64(len(claims))*int64(time.Millisecond)
	var dones []*Command
	for n, i := range rng.Perm(len(claims))[:b.N] {
		done := &Command{Type: TypeBatch}
		for j, c := range claims[i].Batch {
			done.Batch = append(done.Batch, &Command{Type: TypeComplete, Key: c.Key,
				Token: TokenFor(uint64(i+1), j), Response: benchResponse()})
		}
		stampAll(done, later+int64(n)*int64(time.Millisecond))
		dones = append(dones, done)
	}
	benchApplyBatches(b, m, len(claims)+1, dones, OutcomeOK)
}
