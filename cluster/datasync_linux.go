package cluster

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync makes f's data durable without its times: the segment's blocks
// are written before use, so fdatasync need not commit the file system's
// journal.
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
