package cluster

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

const zeroTestSize = 256 << 10

// requireZeroed fails unless path holds exactly size zero bytes, written:
// no hole and no preallocated (unwritten) extent, which ext4 and XFS report
// as holes and which read as zeros just the same. The holes are looked for
// first: reading puts zero pages in the page cache, which then count as data.
func requireZeroed(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if hole, err := f.Seek(0, unix.SEEK_HOLE); err != nil || hole != size {
		t.Fatalf("%s: first hole at %d (err %v), want none before the end (%d)", filepath.Base(path), hole, err, size)
	}
	f.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != size || !bytes.Equal(b, make([]byte, size)) {
		t.Fatalf("%s: %d bytes, want %d zero bytes", filepath.Base(path), len(b), size)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestSegmentTakesThePreparedSpare: a new segment is the spare prepared in
// the background, renamed (the same inode), already zero-filled, and the
// next spare is prepared at once.
func TestSegmentTakesThePreparedSpare(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	z := newZeroedSegments(dir, zeroTestSize)
	defer z.Close()
	if err := z.waitSpare(); err != nil {
		t.Fatal(err)
	}
	spare := filepath.Join(dir, spareName)
	requireZeroed(t, spare, zeroTestSize)
	was := inode(t, spare)

	f, err := z.Create(dir, "00001.wal", zeroTestSize)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seg := filepath.Join(dir, "00001.wal")
	if inode(t, seg) != was {
		t.Fatal("the segment is a new file, not the prepared spare")
	}
	requireZeroed(t, seg, zeroTestSize)
	if _, err := f.WriteAt([]byte("entry"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := z.waitSpare(); err != nil {
		t.Fatal(err)
	}
	requireZeroed(t, spare, zeroTestSize)
	if inode(t, spare) == was {
		t.Fatal("no new spare after the old one was taken")
	}
}

// TestCreateZeroFillsWithoutSpare: with no spare ready (here: preparation
// stopped), Create writes the zeros itself, and refuses a name in use.
func TestCreateZeroFillsWithoutSpare(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	z := newZeroedSegments(dir, zeroTestSize)
	z.Close()
	os.Remove(filepath.Join(dir, spareName))

	f, err := z.Create(dir, "00001.wal", zeroTestSize)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	requireZeroed(t, filepath.Join(dir, "00001.wal"), zeroTestSize)
	if _, err := z.Create(dir, "00001.wal", zeroTestSize); !errors.Is(err, os.ErrExist) {
		t.Fatal("Create over an existing segment succeeded")
	}
	if _, err := z.Create(dir, "00002.wal", zeroTestSize/2); err == nil {
		t.Fatal("Create of another size than the log's succeeded")
	}
}

// TestLeftoverSparesAfterACrash: a spare that was still being written when
// the process died, or one of another segment size, is thrown away and a
// complete one prepared; a complete spare of the right size is kept.
func TestLeftoverSparesAfterACrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	partial, wrongSize := filepath.Join(dir, spareTempName), filepath.Join(dir, spareName)
	if err := os.WriteFile(partial, []byte("half written"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wrongSize, make([]byte, zeroTestSize/2), 0o644); err != nil {
		t.Fatal(err)
	}
	z := newZeroedSegments(dir, zeroTestSize)
	if err := z.waitSpare(); err != nil {
		t.Fatal(err)
	}
	z.Close()
	if _, err := os.Stat(partial); !os.IsNotExist(err) {
		t.Fatalf("incomplete spare left behind: %v", err)
	}
	requireZeroed(t, filepath.Join(dir, spareName), zeroTestSize)
	kept := inode(t, filepath.Join(dir, spareName))

	again := newZeroedSegments(dir, zeroTestSize)
	defer again.Close()
	if err := again.waitSpare(); err != nil {
		t.Fatal(err)
	}
	if inode(t, filepath.Join(dir, spareName)) != kept {
		t.Fatal("a complete spare was thrown away and written again")
	}
}
