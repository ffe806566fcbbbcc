package testcluster

import (
	"fmt"
	"strings"
	"testing"
)

// TestSubnetLockNamesTheHolder: a second cluster on a subnet in use fails
// at once with the holder's name, and the subnet is free once the holder
// ends.
func TestSubnetLockNamesTheHolder(t *testing.T) {
	const subnet = 253 // no cluster is started: nothing listens on it
	holder := &recordingTB{TB: t, name: "TestHolder"}
	if msg := holder.run(func() { lockSubnet(holder, subnet) }); msg != "" {
		t.Fatalf("first lock: %s", msg)
	}

	second := &recordingTB{TB: t, name: "TestSecond"}
	msg := second.run(func() { lockSubnet(second, subnet) })
	if !strings.Contains(msg, "held by another test running now (TestHolder") || !strings.Contains(msg, "TestSecond") {
		t.Fatalf("second lock: got %q, want it to name the holder and the test", msg)
	}
	holder.end()

	third := &recordingTB{TB: t, name: "TestThird"}
	if msg := third.run(func() { lockSubnet(third, subnet) }); msg != "" {
		t.Fatalf("after the holder ended: %s", msg)
	}
	third.end()
}

// recordingTB stands for one test: it keeps its cleanups until end, and a
// Fatalf ends only the function given to run, whose message run returns.
type recordingTB struct {
	testing.TB
	name     string
	cleanups []func()
}

type fatal string

func (r *recordingTB) Name() string     { return r.name }
func (r *recordingTB) Helper()          {}
func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) Fatalf(format string, args ...any) {
	panic(fatal(fmt.Sprintf(format, args...)))
}

func (r *recordingTB) run(f func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg = string(p.(fatal))
		}
	}()
	f()
	return ""
}

func (r *recordingTB) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}
