//go:build !unix

package cluster

import (
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// lockFileAt takes pebble's portable file lock on path; it cannot tell a
// lock held elsewhere from another failure, so held is always false.
func lockFileAt(path string) (io.Closer, bool, error) {
	l, err := vfs.Default.Lock(path)
	return l, false, err
}
