package store

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/idemnode/idemnode/fsm"
)

// BenchmarkClaimCompleteWorkload replays, on one store on disk, what a
// node's state machine commits under the benchmark's claim+complete load:
// groups of 64 claims of fresh random keys (a small PENDING record due at
// its lease's end), each followed by a group completing them (a record
// with a 512-byte response, due at the end of its TTL). It reports the
// process's CPU per record (making the records and Pebble's background
// work included) and what the compactions wrote, so that a change to the
// store's layout or Pebble's options is measured without a cluster's
// noise. Records per op: $IDEMNODE_BENCH_WORKLOAD_RECORDS, 400 000 when
// unset (about what one node stores in a two-minute cluster run).
// $IDEMNODE_BENCH_WORKLOAD_RATE paces the commits to that many records a
// second: compactions cost more per record at a cluster's pace (about
// 3 000) than flat out, where they fall behind and merge more at a time.
func BenchmarkClaimCompleteWorkload(b *testing.B) {
	records, _ := strconv.Atoi(os.Getenv("IDEMNODE_BENCH_WORKLOAD_RECORDS"))
	if records <= 0 {
		records = 400_000
	}
	for b.Loop() {
		s, err := Open(b.TempDir(), Options{Fatal: func(err error) { b.Errorf("fatal: %v", err) }})
		if err != nil {
			b.Fatal(err)
		}
		cpu0 := processCPU()
		commitClaimsAndCompletes(b, s, records)
		if err := s.Sync(); err != nil {
			b.Fatal(err)
		}
		settleCompactions(b, s)
		cpu := processCPU() - cpu0
		m := s.db.Metrics()
		total := m.Total()
		b.ReportMetric(float64(cpu.Microseconds())/float64(records), "cpu-µs/record")
		b.ReportMetric(float64(total.TableBytesCompacted)/float64(m.Levels[0].TableBytesFlushed), "compacted/flushed")
		b.ReportMetric(float64(m.Levels[0].TableBytesFlushed)/float64(records), "flushed-B/record")
		b.ReportMetric(float64(m.Compact.Count), "compactions")
		b.ReportMetric(float64(m.Compact.EstimatedDebt)/(1<<20), "debt-MiB")
		s.Close()
	}
}

func commitClaimsAndCompletes(tb testing.TB, s *Store, records int) {
	rng := rand.New(rand.NewPCG(7, 7))
	pending := make([]byte, 120)
	done := make([]byte, 650)
	const group = 64
	var applied uint64
	commit := func(rcs []fsm.RecordChange) {
		applied++
		if err := s.Commit(&fsm.Changes{Meta: fsm.Meta{Applied: applied}, Records: rcs}); err != nil {
			tb.Fatal(err)
		}
	}
	rate, _ := strconv.Atoi(os.Getenv("IDEMNODE_BENCH_WORKLOAD_RATE"))
	start := time.Now()
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC).UnixNano()
	claims := make([]fsm.RecordChange, group)
	completes := make([]fsm.RecordChange, group)
	for n := 0; n < records; n += group {
		if rate > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(n) * time.Second / time.Duration(rate))))
		}
		now += int64(20 * time.Millisecond)
		for i := range claims {
			key := fsm.EncodeKey(fsm.RecordKey{Tenant: "default", Scope: "default",
				Key: fmt.Sprintf("idem/0badcafe/%016x%016x", rng.Uint64(), rng.Uint64())})
			fillAlnum(rng, pending)
			fillAlnum(rng, done)
			lease, ttl := now+int64(30*time.Second), now+int64(24*time.Hour)
			claims[i] = fsm.RecordChange{Key: key, New: append([]byte(nil), pending...), NewExpiresAt: lease}
			completes[i] = fsm.RecordChange{Key: key, HadOld: true, OldExpiresAt: lease,
				New: append([]byte(nil), done...), NewExpiresAt: ttl}
		}
		commit(claims)
		commit(completes)
	}
}

func fillAlnum(rng *rand.Rand, b []byte) {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
}

// settleCompactions waits until Pebble has started no compaction for a
// second, so that the CPU measured includes what the records cost it.
func settleCompactions(tb testing.TB, s *Store) {
	last := int64(-1)
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		m := s.db.Metrics()
		if m.Compact.NumInProgress == 0 && m.Compact.Count == last {
			return
		}
		last = m.Compact.Count
	}
	tb.Fatal("compactions did not settle in 5 minutes")
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
