package store

import (
	"bytes"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestTableFileShowsEveryWrite: a table's writes wait in its buffer, yet
// whatever reads the file, asks its size or syncs it sees every write, and
// a crash keeps everything written before the last sync.
func TestTableFileShowsEveryWrite(t *testing.T) {
	mem := vfs.NewCrashableMem()
	fs := tableFS{mem}
	mustNot(mem.MkdirAll("d", 0o755))
	f, err := fs.Create("d/t.sst", vfs.WriteCategoryUnspecified)
	mustNot(err)
	mustNot(syncDirs(mem, "d"))
	if _, ok := f.(*tableFile); !ok {
		t.Fatalf("a table is created as %T, want *tableFile", f)
	}
	var want []byte
	write := func(n int, b byte) {
		p := bytes.Repeat([]byte{b}, n)
		want = append(want, p...) // first: a file may scramble what it was given (MemFS does, in race builds)
		if _, err := f.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	write(5000, 'a')
	write(3000, 'b')
	if info, err := f.Stat(); err != nil || info.Size() != int64(len(want)) {
		t.Fatalf("size %v (%v) after %d bytes written", info.Size(), err, len(want))
	}
	got := make([]byte, 3000)
	if _, err := f.ReadAt(got, 5000); err != nil || !bytes.Equal(got, want[5000:]) {
		t.Fatalf("read back %q (%v)", got[:8], err)
	}
	write(tableWriteBytes+100, 'c') // past the buffer: written through
	write(700, 'd')
	mustNot(f.Sync())
	write(900, 'e') // never synced: a crash loses it
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	mustNot(f.Close())

	synced := want[:len(want)-900]
	for name, tc := range map[string]struct {
		fs   vfs.FS
		want []byte
	}{"after the crash": {crashed, synced}, "closed": {mem, want}} {
		r, err := tc.fs.Open("d/t.sst")
		mustNot(err)
		all, err := io.ReadAll(r)
		mustNot(err)
		r.Close()
		if !bytes.Equal(all, tc.want) {
			t.Errorf("%s the file holds %d bytes, want %d", name, len(all), len(tc.want))
		}
	}
}

// TestOnlyTablesAreBuffered: every other file Pebble writes (its manifest,
// CURRENT, OPTIONS) goes to the file system as it is written.
func TestOnlyTablesAreBuffered(t *testing.T) {
	fs := tableFS{vfs.NewMem()}
	for _, name := range []string{"MANIFEST-000001", "CURRENT", "OPTIONS-000003", "marker.format-version.000001.013"} {
		f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
		mustNot(err)
		if _, ok := f.(*tableFile); ok {
			t.Errorf("%s is buffered", name)
		}
		f.Close()
	}
}

// BenchmarkTableWrite writes a table of 64 MiB of 600-byte records to the
// disk through Pebble's table writer, as a hand-off does, with Pebble's own
// 4 KiB writes and through tableFS, and reports the process's CPU per MiB.
func BenchmarkTableWrite(b *testing.B) {
	const records = 64 << 20 / 600
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, 600)
	fillAlnum(rng, val) // as the benchmark's responses: Snappy cannot shrink them
	po := Options{}.withDefaults().pebbleOptions(nil, newBreaker(nil))
	wo := po.MakeWriterOptions(len(po.Levels)-1, po.FormatMajorVersion.MaxTableFormat())
	for _, tc := range []struct {
		name string
		fs   vfs.FS
	}{{"writes-of-4KiB", vfs.Default}, {"tableFS", tableFS{vfs.Default}}} {
		b.Run(tc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "t.sst")
			var cpu time.Duration
			for b.Loop() {
				f, err := tc.fs.Create(path, vfs.WriteCategoryUnspecified)
				mustNot(err)
				cpu0 := processCPU()
				w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), wo)
				var k []byte
				for i := range records {
					k = appendValueKey(k[:0], uint64(i))
					mustNot(w.Set(k, val))
				}
				mustNot(w.Close())
				cpu += processCPU() - cpu0
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/64, "cpu-µs/MiB")
		})
	}
}
