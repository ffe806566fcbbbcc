package cluster

import (
	"fmt"
	"io"
	"path/filepath"
)

// lockFile is the file whose lock says that a process uses the data dir.
const lockFile = "LOCK"

// lockDataDir takes the data dir for this node until the returned closer
// is closed. The stores inside lock their own files too, but a second node
// on the same dir then fails deep in the first store it opens with the
// kernel's "resource temporarily unavailable"; taken first, this lock says
// what is wrong. The lock is the kernel's, so it goes with the process: a
// node that crashed leaves no stale lock behind.
func lockDataDir(dir string) (io.Closer, error) {
	path := filepath.Join(dir, lockFile)
	l, held, err := lockFileAt(path)
	switch {
	case held:
		return nil, fmt.Errorf("%w: %s is used by another idemnode node (it holds %s); stop that one, or give this node its own --data-dir",
			ErrDataDirInUse, dir, path)
	case err != nil:
		return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
	}
	return l, nil
}
