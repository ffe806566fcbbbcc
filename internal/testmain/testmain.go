// Package testmain lends a testing.TB to TestMain, where no *testing.T
// exists yet, so that a test package can start one shared in-process
// cluster (package testcluster) for its tests and its runnable examples.
package testmain

import (
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
)

// TB implements the part of testing.TB that testcluster and testutil use:
// Helper, Name, TempDir, Cleanup, Log, Logf, Error, Errorf, Fatal, Fatalf
// and Failed. Any other method panics (the embedded interface is nil).
// A fatal error runs the cleanups and exits the process with status 1.
type TB struct {
	testing.TB

	name string
	// mu guards the fields below: testcluster calls in from goroutines.
	mu       sync.Mutex
	cleanups []func()
	failed   bool
	quiet    bool
}

// New returns a TB named name. Logs are dropped unless the tests run with
// -v, as testing does for passing tests. It parses the test flags if
// TestMain has not yet.
func New(name string) *TB {
	if !flag.Parsed() {
		flag.Parse()
	}
	return &TB{name: name, quiet: !testing.Verbose()}
}

// Helper does nothing.
func (t *TB) Helper() {}

// Name returns the name given to New.
func (t *TB) Name() string { return t.name }

// TempDir returns a new directory, removed by Close.
func (t *TB) TempDir() string {
	dir, err := os.MkdirTemp("", t.name+"-")
	if err != nil {
		t.Fatalf("TempDir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Cleanup registers f to run at Close, the last registered first.
func (t *TB) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// Log prints its arguments with -v.
func (t *TB) Log(args ...any) { t.log(fmt.Sprintln(args...)) }

// Logf prints a formatted line with -v.
func (t *TB) Logf(format string, args ...any) { t.log(fmt.Sprintf(format, args...) + "\n") }

func (t *TB) log(s string) {
	if !t.quiet {
		fmt.Fprintf(os.Stderr, "%s: %s", t.name, s)
	}
}

// Error prints its arguments and marks the TB failed.
func (t *TB) Error(args ...any) { t.fail(fmt.Sprintln(args...)) }

// Errorf prints a formatted line and marks the TB failed.
func (t *TB) Errorf(format string, args ...any) { t.fail(fmt.Sprintf(format, args...) + "\n") }

func (t *TB) fail(s string) {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
	fmt.Fprintf(os.Stderr, "%s: %s", t.name, s)
}

// Failed reports whether Error, Errorf, Fatal or Fatalf was called.
func (t *TB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// Fatal prints its arguments, runs the cleanups and exits with status 1.
func (t *TB) Fatal(args ...any) {
	t.fail(fmt.Sprintln(args...))
	t.Close()
	os.Exit(1)
}

// Fatalf prints a formatted line, runs the cleanups and exits with status 1.
func (t *TB) Fatalf(format string, args ...any) { t.Fatal(fmt.Sprintf(format, args...)) }

// Close runs the registered cleanups, the last registered first.
func (t *TB) Close() {
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
