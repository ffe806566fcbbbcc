//go:build !linux

package cluster

import "os"

// datasync makes f durable with the platform's full sync: where fdatasync
// does not exist (macOS), Go's File.Sync is fcntl F_FULLFSYNC, which also
// flushes the drive's cache, as plain fsync there does not.
func datasync(f *os.File) error { return f.Sync() }
