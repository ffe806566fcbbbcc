package cluster_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/internal/testaddr"
	"github.com/idemnode/idemnode/internal/testutil"
)

// BenchmarkRestart1M measures how long a node holding 1 M completed records
// (512-byte responses, the record sizes of the peer benchmark) takes from
// Open until it serves again: a linearizable read and a claim both
// succeed. The node snapshots after the 1 M records and takes restartTail
// more, so the restart restores a snapshot, verifies the log kept behind it
// (TrailingLogs) and replays the entries after it, as a node that has been
// running does. It measures once per call whatever b.N (building the data
// dir takes minutes); run it with -benchtime 1x.
func BenchmarkRestart1M(b *testing.B) {
	const records, restartTail = 1_000_000, 10_000
	cfg := soloConfig(b.TempDir(), testaddr.New(b).IP(1))
	n := openSoloB(b, cfg)
	start := time.Now()
	fillRecords(b, n, 0, records)
	if err := n.Raft().Snapshot().Error(); err != nil {
		b.Fatal(err)
	}
	fillRecords(b, n, records, restartTail)
	b.Logf("wrote %d records in %s", records+restartTail, time.Since(start).Round(time.Second))
	if err := n.Close(); err != nil {
		b.Fatal(err)
	}
	n = nil
	runtime.GC()

	b.ResetTimer()
	start = time.Now()
	again, err := cluster.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer again.Close()
	opened := time.Since(start)
	serveAgain(b, again)
	served := time.Since(start)
	b.StopTimer()
	if got := again.Machine().Len(); got != records+restartTail+1 {
		b.Fatalf("restarted node holds %d records, want %d", got, records+restartTail+1)
	}
	b.ReportMetric(opened.Seconds(), "s-open")
	b.ReportMetric(served.Seconds(), "s-serving")
}

// openSoloB opens cfg for a benchmark and waits until it leads.
func openSoloB(b *testing.B, cfg cluster.Config) *cluster.Node {
	b.Helper()
	n, err := cluster.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	serveAgain(b, n)
	return n
}

// serveAgain waits until n answers a linearizable read and a claim.
func serveAgain(b *testing.B, n *cluster.Node) {
	b.Helper()
	testutil.Eventually(b, 2*time.Minute, "the node serves", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := n.LinearizableBarrier(ctx); err != nil {
			return err
		}
		_, err := n.Apply(ctx, benchClaimCmd(-1))
		return err
	})
}

// benchClaimCmd claims record i with the peer benchmark's sizes: 8-byte
// tenant and scope, 46-byte key, SHA-256 fingerprint, 16-byte owner.
func benchClaimCmd(i int) *fsm.Command {
	k := fsm.RecordKey{Tenant: "acct-042", Scope: "POST /v1", Key: fmt.Sprintf("idem/run00001/%032x", i)}
	fp := sha256.Sum256([]byte(k.Key))
	return &fsm.Command{Type: fsm.TypeClaim, Key: k, Fingerprint: fp[:], Owner: fmt.Sprintf("%016x", i),
		Lease: int64(time.Minute), TTL: int64(24 * time.Hour)}
}

// fillRecords claims and completes records from..from+count-1 from many
// goroutines, so the node's group commit packs them into large entries.
func fillRecords(b *testing.B, n *cluster.Node, from, count int) {
	const workers = 256
	body := bytes.Repeat([]byte("x"), 512)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := from + w; i < from+count; i += workers {
				c := benchClaimCmd(i)
				res, err := n.Apply(ctx, c)
				if err == nil && res.Outcome == fsm.OutcomeWon {
					res, err = n.Apply(ctx, &fsm.Command{Type: fsm.TypeComplete, Key: c.Key, Token: res.Record.Token,
						Response: &fsm.Response{Status: 201, Body: body}})
				}
				if err == nil && res.Outcome != fsm.OutcomeOK {
					err = fmt.Errorf("record %d: %v", i, res.Outcome)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}
