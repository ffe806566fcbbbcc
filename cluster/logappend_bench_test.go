package cluster

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
)

// BenchmarkLogAppend appends 5 kB entries (a group-committed batch of about
// 25 claims) with StoreLogs, each append one write and one sync, from 1 or 3
// logs at once on one disk, as three nodes on one machine do. "fallocate" is
// raft-wal's own preallocation, "zeroed" this package's (segmentfiles.go).
// It reports the mean and the p50/p99 of one append.
//
//	go test ./cluster -run xxx -bench LogAppend -benchtime 3000x
func BenchmarkLogAppend(b *testing.B) {
	for _, writers := range []int{1, 3} {
		for _, kind := range []string{"fallocate", "zeroed"} {
			b.Run(fmt.Sprintf("%s/writers=%d", kind, writers), func(b *testing.B) {
				benchLogAppend(b, kind, writers)
			})
		}
	}
}

func benchLogAppend(b *testing.B, kind string, writers int) {
	logs := make([]*raftwal.WAL, writers)
	for i := range logs {
		dir := b.TempDir()
		if kind == "zeroed" {
			w, segs, err := openWAL(dir, DefaultLogSegmentSize)
			if err != nil {
				b.Fatal(err)
			}
			defer segs.Close()
			logs[i] = w
		} else {
			w, err := raftwal.Open(dir, raftwal.WithSegmentSize(DefaultLogSegmentSize))
			if err != nil {
				b.Fatal(err)
			}
			logs[i] = w
		}
		defer logs[i].Close()
	}
	data := make([]byte, 5000)
	lat := make([][]time.Duration, writers)
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range b.N {
				start := time.Now()
				if err := logs[w].StoreLogs([]*raft.Log{{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: data}}); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(start))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}
