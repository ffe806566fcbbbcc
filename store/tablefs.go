package store

import (
	"bufio"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// tableWriteBytes is the size of the writes of a table. Pebble writes a
// table a block at a time, each 4 KiB block in a system call of its own,
// which costs four times the CPU per byte of 256 KiB writes
// (docs/PERFORMANCE.md): its flushes and compactions write every key the
// store holds again and again, and a hand-off some 13 MB of records every
// few seconds.
const tableWriteBytes = 256 << 10

// tableWriters bounds the tables written at once: a flush, a compaction
// (Pebble runs one at a time) and a hand-off's records, or the three runs
// of a migration, and one for a store being built beside (a restore).
const tableWriters = 4

// tableFS gives the tables Pebble and the store write (.sst files) a
// larger write buffer. Everything that reads the file, learns its size or
// syncs it writes the buffer out first, so Pebble sees the file as if
// each write had gone through; what a crash loses of it is what was not
// yet synced, as before.
type tableFS struct{ vfs.FS }

func (fs tableFS) Unwrap() vfs.FS { return fs.FS }

func (fs tableFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	return &tableFile{File: f, w: bufio.NewWriterSize(f, tableWriteBytes)}, nil
}

// tableFile is a table being written, its writes gathered in w. Unlike an
// *os.File it is not safe for concurrent use: Pebble writes and syncs a
// table from one goroutine at a time.
type tableFile struct {
	vfs.File
	w *bufio.Writer
}

func (f *tableFile) Write(p []byte) (int, error) { return f.w.Write(p) }

func (f *tableFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.w.Flush(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *tableFile) Read(p []byte) (int, error) {
	if err := f.w.Flush(); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *tableFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.w.Flush(); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *tableFile) Stat() (vfs.FileInfo, error) {
	if err := f.w.Flush(); err != nil {
		return nil, err
	}
	return f.File.Stat()
}

func (f *tableFile) Sync() error {
	if err := f.w.Flush(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *tableFile) SyncData() error {
	if err := f.w.Flush(); err != nil {
		return err
	}
	return f.File.SyncData()
}

func (f *tableFile) SyncTo(length int64) (bool, error) {
	if err := f.w.Flush(); err != nil {
		return false, err
	}
	return f.File.SyncTo(length)
}

func (f *tableFile) Close() error {
	err := f.w.Flush()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}
