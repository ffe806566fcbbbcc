package cluster

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/idemnode/idemnode/store"
)

// probeSize is what the start-up probe writes: a disk that cannot take
// 1 MiB cannot take a snapshot or a batch of log entries either.
const probeSize = 1 << 20

// probeDataDir checks that dir takes durable writes before anything is
// opened in it: it creates a file, writes probeSize bytes, syncs and
// removes it, and syncs the directory. A read-only, full or unwritable data
// dir then stops the node at start with an error that says which, instead
// of a node that joins the cluster and fails on its first log write.
func probeDataDir(dir string) error {
	if err := probeWrite(dir); err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrDataDir, dir, probeReason(err), err)
	}
	return nil
}

func probeWrite(dir string) (err error) {
	f, err := os.CreateTemp(dir, ".write-probe-*")
	if err != nil {
		return err
	}
	defer func() {
		if rerr := os.Remove(f.Name()); rerr != nil && err == nil {
			err = rerr
		}
	}()
	_, err = f.Write(make([]byte, probeSize))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes the directory's entries (the probe's removal) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// probeReason names the common causes in the operator's terms.
func probeReason(err error) string {
	switch {
	case errors.Is(err, syscall.EROFS):
		return "is on a read-only file system"
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Sprintf("is full (no space for a %d MiB write)", probeSize>>20)
	case errors.Is(err, os.ErrPermission):
		return "is not writable by this process"
	}
	return "failed a write probe"
}

// Free space to start with. A node that starts on a nearly full disk
// fails its first flush or log rotation soon after, and advice to wipe it
// then would delete data. So a node refuses to start below a reserve that
// covers what its next writes need, derived from its configuration:
//
//   - 6 memtables: Pebble queues up to two full memtables (its stop-writes
//     threshold) and writes each out as a table, and compacts the first
//     level when about four such tables have gathered there, writing the
//     compaction's output whole before it deletes the inputs;
//   - one log segment: the next one, zero-filled ahead (segmentfiles.go).
//
// With the defaults (32 MiB memtables, 64 MiB segments) that is 256 MiB.
const reserveMemTables = 6

// freeSpaceReserve is the free space a node needs to start with.
func freeSpaceReserve(memTableSize uint64, segmentSize int) uint64 {
	if memTableSize == 0 {
		memTableSize = store.DefaultMemTableSize
	}
	return reserveMemTables*memTableSize + uint64(segmentSize)
}

// checkFreeSpace refuses to start while the data dir's file system has
// less than the reserve free. Freeing space is the whole remedy: nothing
// on the disk is damaged.
func checkFreeSpace(dir string, memTableSize uint64, segmentSize int) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("%w: %s: read free space: %w", ErrDataDir, dir, err)
	}
	free := st.Bavail * uint64(st.Bsize)
	need := freeSpaceReserve(memTableSize, segmentSize)
	if free >= need {
		return nil
	}
	if memTableSize == 0 {
		memTableSize = store.DefaultMemTableSize
	}
	return fmt.Errorf("%w: %s has %d MiB free and needs %d MiB free to start: free space on its disk (or grow the volume) and start the node again, it resumes where it stopped; "+
		"do not wipe the data dir. The reserve is %d × --memtable-size (%d MiB: the memtables the store flushes and a compaction of them) + one log segment (%d MiB, prepared ahead)",
		ErrDataDir, dir, free>>20, need>>20, reserveMemTables, memTableSize>>20, segmentSize>>20)
}

// diskFull reports whether err is the disk's "no space" (or quota) error,
// however deeply a library wrapped it.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		strings.Contains(err.Error(), syscall.ENOSPC.Error())
}

// failureAdvice is what to do after a failed write of the log or the
// store. A full disk is freed, never wiped: on a single node, or in a
// cluster whose disks are all full, wiping deletes the only copy.
func failureAdvice(err error) string {
	if diskFull(err) {
		return "the disk is full: free space on the data dir's disk (or grow the volume) and restart the node; it resumes where it stopped and nothing is lost. Do not wipe the data dir"
	}
	return "restart the node; if it fails again reading a block that is corrupt, the store is damaged: wipe the data dir and let the node rejoin, only while its peers are healthy (a single node: restore a backup)"
}
