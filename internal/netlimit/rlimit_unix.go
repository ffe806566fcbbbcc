//go:build unix

package netlimit

import (
	"fmt"
	"syscall"
)

// DescriptorLimit returns the process's limit on open files (the soft
// RLIMIT_NOFILE, which Go raises to the hard limit at start), or 0 when it
// is unlimited.
func DescriptorLimit() (int, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("read the open-file limit: %w", err)
	}
	if rl.Cur > 1<<30 { // RLIM_INFINITY, or too many to matter
		return 0, nil
	}
	return int(rl.Cur), nil
}
