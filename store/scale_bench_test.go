package store

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/fsm"
)

// BenchmarkApplyOnStore measures what applying costs on a store of many
// records: groups of 64 claims, then 64 completes of the new claims with
// 512-byte responses. In "fresh" every claim is of a fresh random key,
// which the key filter answers; in "replay-1in8" one claim in eight
// replays a stored record picked at random, whose read goes to the disk
// once the store outgrows the memory (a retry long after its claim: most
// come within seconds, and find their record in the cache). It runs on
// the store at $IDEMNODE_BENCH_STORE, written by `idemgen` and `idemnode
// snapshot restore` (scripts/bigstate.sh runs it at each size, inside the
// node's memory limit); $IDEMNODE_BENCH_RECORDS says how many records
// idemgen wrote there, for the replays. ns/op is per command.
//
// Each also reports what the reads cost, per command: the block cache's
// misses, the read calls the process made (a miss reads a block from a
// file, through the page cache) and the bytes those calls fetched from
// the disk (the kernel's read_bytes, which the page cache does not count).
func BenchmarkApplyOnStore(b *testing.B) {
	m, s := openBenchStore(b)
	defer m.Close()
	stored, _ := strconv.Atoi(os.Getenv("IDEMNODE_BENCH_RECORDS"))
	b.Run("fresh", func(b *testing.B) {
		defer reportReads(b, s)()
		applyClaimsAndCompletes(b, m, 0)
	})
	b.Run("replay-1in8", func(b *testing.B) {
		if stored == 0 {
			b.Skip("set IDEMNODE_BENCH_RECORDS to the records idemgen wrote")
		}
		defer reportReads(b, s)()
		applyClaimsAndCompletes(b, m, stored)
	})
}

// reportReads notes the read counters now; the function it returns
// reports their growth per operation of b.
func reportReads(b *testing.B, s *Store) func() {
	misses, calls, disk := s.db.Metrics().BlockCache.Misses, procIO(b, "syscr"), procIO(b, "read_bytes")
	return func() {
		per := func(grew int64) float64 { return float64(grew) / float64(b.N) }
		b.ReportMetric(per(s.db.Metrics().BlockCache.Misses-misses), "cache-misses/op")
		b.ReportMetric(per(procIO(b, "syscr")-calls), "read-calls/op")
		b.ReportMetric(per(procIO(b, "read_bytes")-disk), "disk-bytes/op")
	}
}

// procIO reads one of the process's I/O counters from /proc/self/io.
func procIO(b *testing.B, field string) int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Skipf("the read counters need Linux's /proc/self/io: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+": "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatalf("/proc/self/io: %s: %v", line, err)
			}
			return n
		}
	}
	b.Fatalf("/proc/self/io has no %s", field)
	return 0
}

// applyClaimsAndCompletes applies b.N commands to m, claims and their
// completes; with stored > 0, one claim in eight is of one of idemgen's
// stored keys.
func applyClaimsAndCompletes(b *testing.B, m *fsm.Machine, stored int) {
	index, now := m.Applied(), max(m.Now(), time.Now().UnixNano())
	fp := sha256.Sum256([]byte("fingerprint"))
	body := make([]byte, 512)
	rng := rand.New(rand.NewPCG(1, uint64(index)))
	const group = 64
	var replays, completed int
	b.ResetTimer()
	for n := 0; n < b.N; n += 2 * group {
		now += int64(time.Millisecond) // the leader stamps each entry, as a cluster under load does
		claims := &fsm.Command{Type: fsm.TypeBatch, Now: now}
		for i := range group {
			k := fmt.Sprintf("fresh-%016x%016x", rng.Uint64(), rng.Uint64())
			if stored > 0 && i%8 == 0 {
				k = fmt.Sprintf("bench-key-%036d", rng.IntN(stored)) // idemgen's keys
			}
			claims.Batch = append(claims.Batch, &fsm.Command{Type: fsm.TypeClaim, Now: now,
				Key: fsm.RecordKey{Tenant: "tenant-1", Scope: "POST /v1", Key: k}, Fingerprint: fp[:],
				Owner: "bench-owner", Lease: int64(30 * time.Second), TTL: int64(24 * time.Hour)})
		}
		index++
		res := m.ApplyEntries([]fsm.Entry{{Index: index, Term: 1, Cmd: claims}})[0]
		completes := &fsm.Command{Type: fsm.TypeBatch, Now: now}
		for i, r := range res.Batch {
			if r.Outcome != fsm.OutcomeWon {
				replays++
				continue
			}
			completes.Batch = append(completes.Batch, &fsm.Command{Type: fsm.TypeComplete, Now: now,
				Key: claims.Batch[i].Key, Token: r.Record.Token, Response: &fsm.Response{Status: 201, Body: body}})
		}
		index++
		for _, r := range m.ApplyEntries([]fsm.Entry{{Index: index, Term: 1, Cmd: completes}})[0].Batch {
			if r.Outcome == fsm.OutcomeOK {
				completed++
			}
		}
	}
	b.StopTimer()
	if stored > 0 && replays == 0 {
		b.Fatal("no claim was a replay: IDEMNODE_BENCH_RECORDS does not match the store")
	}
	if completed == 0 {
		b.Fatal("no completion was applied")
	}
	b.ReportMetric(float64(m.Len()), "records")
}

// BenchmarkExpireAll measures expiry at scale: Expire entries of 1 000 (the
// leader's default limit) applied until every record of the store at
// $IDEMNODE_BENCH_STORE has expired. idemgen's records all expire within a
// few milliseconds of each other, so this is the queue-like delete the
// LSM handles worst: each Expire scans from the start of the expiry index
// past what the earlier ones deleted (store.expLow keeps that to the last
// Expire's markers). It reports the mean and the worst entry, and the last
// tenth of the entries against the first, which would grow if the markers
// piled up in the scans. Run it once (-benchtime 1x): it empties the store.
func BenchmarkExpireAll(b *testing.B) {
	m, _ := openBenchStore(b)
	defer m.Close()
	last, ok := m.NextExpiry()
	if !ok {
		b.Fatal("the store holds no record")
	}
	start := m.Len()
	index := m.Applied()
	now := last + int64(48*time.Hour) // past every record's TTL
	var took []time.Duration
	b.ResetTimer()
	for m.Len() > 0 {
		index++
		t := time.Now()
		res := m.ApplyEntries([]fsm.Entry{{Index: index, Term: 1, Cmd: &fsm.Command{Type: fsm.TypeExpire, Now: now, Limit: 1000}}})[0]
		took = append(took, time.Since(t))
		if res.Expired == 0 {
			b.Fatalf("an Expire deleted nothing with %d records left", m.Len())
		}
	}
	b.StopTimer()
	var total, worst time.Duration
	for _, d := range took {
		total += d
		worst = max(worst, d)
	}
	tenth := max(len(took)/10, 1)
	mean := func(ds []time.Duration) float64 {
		var t time.Duration
		for _, d := range ds {
			t += d
		}
		return float64(t.Microseconds()) / float64(len(ds))
	}
	b.ReportMetric(float64(start), "records")
	b.ReportMetric(float64(len(took)), "entries")
	b.ReportMetric(float64(total.Milliseconds())/1000, "s-total")
	b.ReportMetric(mean(took), "µs/entry")
	b.ReportMetric(float64(worst.Microseconds()), "µs-worst")
	b.ReportMetric(mean(took[:tenth]), "µs/entry-first-tenth")
	b.ReportMetric(mean(took[len(took)-tenth:]), "µs/entry-last-tenth")
}

// openBenchStore opens a Machine over the store at $IDEMNODE_BENCH_STORE,
// or skips the benchmark without one (scripts/bigstate.sh sets it).
func openBenchStore(b *testing.B) (*fsm.Machine, *Store) {
	dir := os.Getenv("IDEMNODE_BENCH_STORE")
	if dir == "" {
		b.Skip("set IDEMNODE_BENCH_STORE to a store dir (scripts/bigstate.sh does)")
	}
	s, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	waitForKeyFilter(b, s)
	m, err := fsm.New(s)
	if err != nil {
		b.Fatal(err)
	}
	return m, s
}

// waitForKeyFilter waits for the key filter's build at open, which reads
// the whole expiry index: until it is done every lookup reads Pebble, and
// the benchmark would time the first seconds after a restart, not a node
// serving.
func waitForKeyFilter(b *testing.B, s *Store) {
	start := time.Now()
	for s.filters.cur.Load() == nil {
		if time.Since(start) > 10*time.Minute {
			b.Fatal("the key filter was not built in 10 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
