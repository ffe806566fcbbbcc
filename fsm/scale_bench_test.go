package fsm

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// The 1 M-record benchmarks of the performance issue, with the record sizes
// of bench_test.go.
const scaleRecords = 1_000_000

func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkMemory1M reports the live heap one completed record takes beyond
// its response body, indexes included, with 1 M records stored. Like the
// other 1 M benchmarks it measures once per call whatever b.N, since one
// build takes seconds; run it with -benchtime 1x.
func BenchmarkMemory1M(b *testing.B) {
	before := liveHeap()
	m := NewMachine()
	buildCompleted(m, scaleRecords)
	after := liveHeap()
	if m.Len() != scaleRecords {
		b.Fatalf("stored %d records", m.Len())
	}
	runtime.KeepAlive(m)
	perRecord := float64(int64(after)-int64(before))/scaleRecords - benchBody
	b.ReportMetric(perRecord, "B/record")
}

// BenchmarkSnapshotRestore1M writes a snapshot of 1 M completed records with
// 512-byte responses to a file (synced) and restores it into a fresh
// machine, once per call (see BenchmarkMemory1M).
func BenchmarkSnapshotRestore1M(b *testing.B) {
	src := NewMachine()
	buildCompleted(src, scaleRecords)
	want := src.Digest()
	path := filepath.Join(b.TempDir(), "state.bin")
	start := time.Now()
	size := writeSnapshotFile(b, src, path)
	wrote := time.Since(start)
	dst := NewMachine()
	restoreSnapshotFile(b, dst, path)
	total := time.Since(start)
	if dst.Len() != scaleRecords || dst.Digest() != want {
		b.Fatalf("restored %d records, digest differs: %v", dst.Len(), dst.Digest() != want)
	}
	b.ReportMetric(wrote.Seconds(), "s-snapshot")
	b.ReportMetric((total - wrote).Seconds(), "s-restore")
	b.ReportMetric(total.Seconds(), "s-total")
	b.ReportMetric(float64(size)/1e6, "MB")
}

// writeSnapshotFile persists m to path and syncs it, as the snapshot store does.
func writeSnapshotFile(b *testing.B, m *Machine, path string) int64 {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := m.WriteSnapshot(f); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	return st.Size()
}

// restoreSnapshotFile restores m from path through a buffered reader, as
// raft's file snapshot store hands the file over.
func restoreSnapshotFile(b *testing.B, m *Machine, path string) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := m.Restore(bufio.NewReader(f)); err != nil {
		b.Fatal(err)
	}
}
