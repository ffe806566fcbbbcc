package testutil

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestEventuallyFailureNamesWhatAndLastError: a check that never holds
// fails the test with what was awaited and the check's last word.
func TestEventuallyFailureNamesWhatAndLastError(t *testing.T) {
	for name, run := range map[string]func(tb testing.TB){
		"error": func(tb testing.TB) {
			n := 0
			Eventually(tb, 30*time.Millisecond, "the leader", func() error { n++; return fmt.Errorf("attempt %d: no leader", n) })
		},
		"bool": func(tb testing.TB) { Eventually(tb, 30*time.Millisecond, "the leader", func() bool { return false }) },
	} {
		rec := &fatalTB{TB: t}
		func() {
			defer func() { recover() }()
			run(rec)
		}()
		if !strings.Contains(rec.msg, "waiting for the leader") {
			t.Errorf("%s: failure %q does not name what was awaited", name, rec.msg)
		}
		if name == "error" && !strings.Contains(rec.msg, ": no leader") {
			t.Errorf("%s: failure %q does not carry the last error", name, rec.msg)
		}
		if name == "bool" && !strings.Contains(rec.msg, errFalse.Error()) {
			t.Errorf("%s: failure %q", name, rec.msg)
		}
	}
}

// TestEventuallyReturnsOnceItHolds: both kinds of check end the wait as
// soon as they hold, without failing.
func TestEventuallyReturnsOnceItHolds(t *testing.T) {
	n := 0
	Eventually(t, time.Second, "the third poll", func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	m := 0
	Eventually(t, time.Second, "the third poll", func() bool { m++; return m >= 3 })
	if n != 3 || m != 3 {
		t.Fatalf("polled %d and %d times, want 3", n, m)
	}
}

// fatalTB records Fatalf's message and stops the caller as FailNow does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic("fatal")
}
