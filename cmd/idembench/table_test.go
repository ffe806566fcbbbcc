package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeLines(t *testing.T, name string, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWriteTable(t *testing.T) {
	idem := writeLines(t, "idemnode.jsonl",
		`{"target":"idemnode","mode":"claim","clients":64,"ops_per_s":3000,"p50_ms":10,"p99_ms":30,"errors":0,"cpu":{"server_cores":0.3}}`,
		`{"target":"idemnode","mode":"race","clients":64,"ops_per_s":1000,"p50_ms":20,"p99_ms":90,"errors":2,"race_violations":1}`)
	etcd := writeLines(t, "etcd.jsonl",
		`[12:00:00] a log line that is not JSON`,
		`{"target":"etcd","mode":"claim","clients":64,"ops_per_s":2000,"p50_ms":20,"p99_ms":60,"cpu":{"server_cores":0.5}}`,
		`{"target":"etcd","mode":"claim","clients":64,"ops_per_s":1000,"p50_ms":30,"p99_ms":70}`,
		`{"target":"etcd","mode":"claim","clients":64,"ops_per_s":4000,"p50_ms":5,"p99_ms":20}`,
		`{"target":"etcd","mode":"race","clients":64,"ops_per_s":2000,"p50_ms":10,"p99_ms":40}`)
	var b strings.Builder
	if err := writeTable(&b, []string{idem, etcd}); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		// The median etcd claim run is the 2000 ops/s one.
		// 0.3 cores over 3000 req/s is 100 µs a request; 0.5 over 2000, 250.
		"| claim | 64 | 3000 | 10.00 | 30.00 | 100.0 | etcd | 2000 | 20.00 | 60.00 | 250.0 | 1.50 | yes | none |",
		// No server CPU in either line: no figure rather than 0.
		"| race | 64 | 1000 | 20.00 | 90.00 | – | etcd | 2000 | 10.00 | 40.00 | – | 0.50 | no | idemnode errors 2, idemnode race violations 1 |",
		"the median run by ops/s",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

// TestWriteTableTwoPeers: each peer has its own row, with its own ratio.
func TestWriteTableTwoPeers(t *testing.T) {
	idem := writeLines(t, "idemnode.jsonl", `{"target":"idemnode","mode":"claim","clients":64,"ops_per_s":8000,"p50_ms":7,"p99_ms":21,"cpu":{"server_cores":1.2}}`)
	etcd := writeLines(t, "etcd.jsonl", `{"target":"etcd","mode":"claim","clients":64,"ops_per_s":4000,"p50_ms":14,"p99_ms":43,"cpu":{"server_cores":1.4}}`)
	redis := writeLines(t, "redis.jsonl", `{"target":"redis","label":"appendfsync=always","mode":"claim","clients":64,"ops_per_s":32000,"p50_ms":1.7,"p99_ms":5.5,"cpu":{"server_cores":0.64}}`)
	var b strings.Builder
	if err := writeTable(&b, []string{idem, etcd, redis}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| claim | 64 | 8000 | 7.00 | 21.00 | 150.0 | etcd | 4000 | 14.00 | 43.00 | 350.0 | 2.00 | yes | none |",
		"| claim | 64 | 8000 | 7.00 | 21.00 | 150.0 | redis | 32000 | 1.70 | 5.50 | 20.0 | 0.25 | no | none |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestWriteTableWithoutPeer(t *testing.T) {
	idem := writeLines(t, "idemnode.jsonl", `{"target":"idemnode","mode":"claim","clients":16,"ops_per_s":900,"p50_ms":1,"p99_ms":3}`)
	var b strings.Builder
	if err := writeTable(&b, []string{idem}); err != nil {
		t.Fatal(err)
	}
	if want := "| claim | 16 | 900 | 1.00 | 3.00 | – | (no peer) | – | – | – | – | – | – | none |"; !strings.Contains(b.String(), want) {
		t.Fatalf("table lacks %q:\n%s", want, b.String())
	}
}

func TestWriteTableRejectsBrokenLine(t *testing.T) {
	bad := writeLines(t, "bad.jsonl", `{"target":"idemnode","mode":`)
	if err := writeTable(&strings.Builder{}, []string{bad}); err == nil || !strings.Contains(err.Error(), "bad.jsonl:1") {
		t.Fatalf("err = %v", err)
	}
}
