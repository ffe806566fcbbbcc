//go:build unix

package cluster

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// lockFileAt takes an exclusive flock on path, creating it. flock, unlike
// fcntl's record locks, belongs to the open file, so a second node in the
// same process (a test) is refused as one in another process is. held
// says another holder has it.
func lockFileAt(path string) (_ io.Closer, held bool, _ error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, errors.Is(err, syscall.EWOULDBLOCK), err
	}
	return f, false, nil // closing the file releases the lock
}
