package cluster

import (
	"errors"
	"fmt"
	"os"
	"syscall"
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
