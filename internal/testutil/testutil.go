// Package testutil holds the few helpers that tests of several packages
// share: waiting for a condition (Eventually), picking a free port, and
// awaiting a call run in a goroutine. Loopback addresses of their own come
// from package testaddr.
package testutil

import (
	"errors"
	"net"
	"testing"
	"time"
)

// Check is a condition Eventually polls: a func() error says why it does
// not hold yet (nil when it does), a func() bool only whether it holds.
type Check interface{ func() error | func() bool }

// errFalse is what a func() bool check that has not held says.
var errFalse = errors.New("the condition was still false")

// Eventually polls check until it holds, failing t after timeout with what
// was awaited and the check's last error. It is for conditions nothing
// broadcasts (a waiter registered, a process ready, a leader elected); it is
// never a stand-in for a fixed sleep. A func() bool check is polled every
// 2 ms: it reads a counter or a map, and some callers move a test clock on
// each poll, so the cadence is theirs to count on. A func() error check,
// which usually makes a call, is polled every 20 ms.
func Eventually[C Check](t testing.TB, timeout time.Duration, what string, check C) {
	t.Helper()
	var poll func() error
	pause := 20 * time.Millisecond
	switch c := any(check).(type) {
	case func() error:
		poll = c
	case func() bool:
		pause = 2 * time.Millisecond
		poll = func() error {
			if c() {
				return nil
			}
			return errFalse
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		err := poll()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(pause)
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
