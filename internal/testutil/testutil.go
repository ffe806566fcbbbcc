// Package testutil holds the few helpers that tests of several packages
// share: waiting for a condition and picking free loopback addresses.
package testutil

import (
	"net"
	"testing"
	"time"
)

// WaitFor polls cond until it holds, failing t after timeout. It is for
// conditions nothing broadcasts (a waiter registered, a process ready); it is
// never a stand-in for a fixed sleep.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// FreeAddr returns a loopback address whose port was free a moment ago: it
// listens on 127.0.0.1:0 and closes the listener. For a process that must be
// told its port on the command line; in-process servers listen on :0 instead.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pick a free port: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("close probe listener: %v", err)
	}
	return addr
}

// Answer is the result of a call run by Go.
type Answer[T any] struct {
	V   T
	Err error
}

// Go runs call in a goroutine and delivers its answer on the channel.
func Go[T any](call func() (T, error)) <-chan Answer[T] {
	ch := make(chan Answer[T], 1)
	go func() {
		v, err := call()
		ch <- Answer[T]{v, err}
	}()
	return ch
}

// Await returns the answer, failing t when none comes within timeout.
func Await[T any](t testing.TB, what string, timeout time.Duration, ch <-chan Answer[T]) Answer[T] {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(timeout):
		t.Fatalf("%s: no answer within %s", what, timeout)
	}
	return Answer[T]{}
}
