package testcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// lockSubnet holds 127.0.<subnet>.x for this test until it ends. Tests of
// every package run at once and pick their subnets by hand; two that pick
// the same one fail later with a bind error that names neither. The lock
// (flock on a file in the system temp dir, released by the kernel when the
// process dies) turns that into a failure that names the test holding it.
func lockSubnet(t testing.TB, subnet int) {
	t.Helper()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("idemnode-testcluster-subnet-%d.lock", subnet))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("lock subnet %d: %v", subnet, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		t.Fatalf("subnet %d (127.0.%d.x) is held by another test running now (%s): give %s its own Options.Subnet",
			subnet, subnet, strings.TrimSpace(string(holder)), t.Name())
	}
	f.Truncate(0)
	fmt.Fprintf(f, "%s, pid %d\n", t.Name(), os.Getpid())
	t.Cleanup(func() { f.Close() })
}
