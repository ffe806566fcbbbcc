package store

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/idemnode/idemnode/fsm"
)

// BenchmarkApplyOnStore measures what applying costs on a store of many
// records: groups of 64 claims (seven in eight of a fresh random key, one
// in eight a replay of a stored record, whose read goes to the disk or the
// cache), then 64 completes of the new claims with 512-byte responses. It
// runs on the store at $IDEMNODE_BENCH_STORE, written by `idemgen` and
// `idemnode snapshot restore` (scripts/bigstate.sh runs it at each size,
// inside the node's memory limit); $IDEMNODE_BENCH_RECORDS says how many
// records idemgen wrote there, for the replays. ns/op is per command.
func BenchmarkApplyOnStore(b *testing.B) {
	dir := os.Getenv("IDEMNODE_BENCH_STORE")
	if dir == "" {
		b.Skip("set IDEMNODE_BENCH_STORE to a store dir (scripts/bigstate.sh does)")
	}
	stored, _ := strconv.Atoi(os.Getenv("IDEMNODE_BENCH_RECORDS"))
	s, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	m, err := fsm.New(s)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	index, now := m.Applied(), max(m.Now(), time.Now().UnixNano())
	fp := sha256.Sum256([]byte("fingerprint"))
	body := make([]byte, 512)
	rng := rand.New(rand.NewPCG(1, uint64(index)))
	const group = 64
	var replays, completed int
	b.ResetTimer()
	for n := 0; n < b.N; n += 2 * group {
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
