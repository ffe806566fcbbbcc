package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.addrs) != 3 || c.clients != 64 || c.duration != 20*time.Second || c.warmup != 5*time.Second ||
		c.mode != modeClaim || c.raceGroup != 8 || c.timeout != 10*time.Second || c.verifyMax != 2000 || !c.preflight || c.conns != 2 || c.lease != 30*time.Second {
		t.Fatalf("defaults: %+v", c)
	}
	c, err = parseFlags([]string{"-addrs", "a:1, b:2,", "-pids", "10,20", "-mode", "race", "-clients", "16"}, io.Discard)
	if err != nil || !slices.Equal(c.addrs, []string{"a:1", "b:2"}) || !slices.Equal(c.pids, []int{10, 20}) {
		t.Fatalf("parse: %+v %v", c, err)
	}
	c, err = parseFlags([]string{"-table", "x.jsonl", "y.jsonl"}, io.Discard)
	if err != nil || !slices.Equal(c.table, []string{"x.jsonl", "y.jsonl"}) {
		t.Fatalf("-table: %+v %v", c, err)
	}
}

func TestParseFlagsRejects(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-mode", "put"}, "-mode"},
		{[]string{"-addrs", " , "}, "-addrs"},
		{[]string{"-clients", "0"}, "-clients"},
		{[]string{"-mode", "race", "-clients", "1"}, "race mode"},
		{[]string{"-mode", "race", "-race-group", "1"}, "race mode"},
		{[]string{"-conns", "0"}, "-conns"},
		{[]string{"-duration", "0s"}, "-duration"},
		{[]string{"-warmup", "-1s"}, "-warmup"},
		{[]string{"-race-verify", "-1"}, "-race-verify"},
		{[]string{"-lease", "500ms"}, "-lease"},
		{[]string{"-lease", "25h"}, "-lease"},
		{[]string{"-pids", "1,x"}, "-pids"},
		{[]string{"-table"}, "-table"},
		{[]string{"stray.jsonl"}, "unexpected arguments"},
		{[]string{"-nope"}, "not defined"},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one mentioning %q", tc.args, err, tc.want)
		}
	}
}

func TestRealMainExitCodes(t *testing.T) {
	var out, errOut strings.Builder
	if code := realMain([]string{"-clients", "-3"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "-clients") {
		t.Fatalf("bad flag: exit %d, stderr %q", code, errOut.String())
	}
	if code := realMain([]string{"-table", "/nonexistent.jsonl"}, &out, &errOut); code != 1 {
		t.Fatalf("missing table file: exit %d", code)
	}
}
