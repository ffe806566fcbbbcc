package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

func TestPartOf(t *testing.T) {
	for _, tc := range []struct {
		stack []string // leaf first
		want  string
	}{
		// Pebble's work under the state machine's apply is the store's.
		{[]string{"github.com/cockroachdb/pebble/v2.(*Batch).Set", "github.com/idemnode/idemnode/store.(*Store).Commit",
			"github.com/idemnode/idemnode/fsm.(*Machine).commit", "github.com/hashicorp/raft.(*Raft).runFSM"}, "store (ours + Pebble)"},
		{[]string{"runtime.mapassign_faststr", "github.com/idemnode/idemnode/store.(*buffer).note", "github.com/idemnode/idemnode/store.(*Store).Commit",
			"github.com/idemnode/idemnode/fsm.(*Machine).commit", "github.com/hashicorp/raft.(*Raft).runFSM"}, "store (ours + Pebble)"},
		{[]string{"runtime.mallocgc", "github.com/idemnode/idemnode/fsm.(*tx).applyClaim", "github.com/hashicorp/raft.(*Raft).runFSM"}, "state machine apply"},
		// A mark assist is the collector's, wherever it ran.
		{[]string{"runtime.scanobject", "runtime.gcDrainN", "runtime.gcAssistAlloc", "runtime.mallocgc",
			"github.com/idemnode/idemnode/fsm.(*tx).applyClaim"}, "GC"},
		{[]string{"internal/runtime/syscall/linux.Syscall6", "syscall.Syscall", "golang.org/x/sys/unix.Fdatasync",
			"github.com/hashicorp/raft-wal/segment.(*Writer).sync", "github.com/hashicorp/raft.(*Raft).dispatchLogs"}, "raft log append + fsync"},
		{[]string{"google.golang.org/protobuf/internal/impl.(*MessageInfo).unmarshalPointer", "github.com/idemnode/idemnode/rpc.textCodec.Unmarshal",
			"google.golang.org/grpc.(*Server).processUnaryRPC"}, "protobuf (un)marshal"},
		{[]string{"github.com/idemnode/idemnode/rpc.(*Server).Claim", "google.golang.org/grpc.(*Server).processUnaryRPC"}, "request handling (ours)"},
		{[]string{"syscall.write", "google.golang.org/grpc/internal/transport.(*loopyWriter).run"}, "gRPC + HTTP/2"},
		{[]string{"runtime.futex", "runtime.findRunnable", "runtime.schedule"}, "scheduler + netpoll"},
		{[]string{"runtime.memmove"}, otherPart},
	} {
		if got := partOf(tc.stack); got != tc.want {
			t.Errorf("partOf(%s…) = %q, want %q", tc.stack[0], got, tc.want)
		}
	}
}

// cpuProfile builds a CPU profile of d whose samples are the given stacks
// (leaf first) with their CPU time.
func cpuProfile(t *testing.T, d time.Duration, samples map[string]time.Duration) []byte {
	t.Helper()
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        10_000_000,
		DurationNanos: d.Nanoseconds(),
	}
	funcs := map[string]*profile.Function{}
	for stack, v := range samples {
		var locs []*profile.Location
		for _, name := range strings.Split(stack, ";") {
			fn := funcs[name]
			if fn == nil {
				fn = &profile.Function{ID: uint64(len(funcs) + 1), Name: name}
				funcs[name] = fn
				p.Function = append(p.Function, fn)
			}
			loc := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: fn}}}
			p.Location = append(p.Location, loc)
			locs = append(locs, loc)
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: locs, Value: []int64{int64(v / (10 * time.Millisecond)), v.Nanoseconds()}})
	}
	var b bytes.Buffer
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestBreakdownPerRequest(t *testing.T) {
	dir := t.TempDir()
	// 1000 req/s over a 10 s profile: 10 000 requests. The leader spends
	// 0.5 s in fdatasync (50 µs a request, all of it a system call) and
	// 0.2 s applying; the follower 0.1 s applying.
	leader := cpuProfile(t, 10*time.Second, map[string]time.Duration{
		"syscall.Syscall;golang.org/x/sys/unix.Fdatasync;github.com/hashicorp/raft-wal/segment.(*Writer).sync": 500 * time.Millisecond,
		"github.com/idemnode/idemnode/fsm.(*tx).applyClaim;github.com/hashicorp/raft.(*Raft).runFSM":           200 * time.Millisecond,
	})
	follower := cpuProfile(t, 10*time.Second, map[string]time.Duration{
		"github.com/idemnode/idemnode/fsm.(*tx).applyClaim;github.com/hashicorp/raft.(*Raft).runFSM": 100 * time.Millisecond,
	})
	for name, b := range map[string][]byte{"cpu-claim-64-node1.pprof": leader, "cpu-claim-64-node2.pprof": follower} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	line := `{"target":"idemnode","label":"2 nodes","mode":"claim","clients":64,"ops_per_s":1000,"p50_ms":1,"p99_ms":2,"cpu":{"server_cores":0.09}}`
	if err := os.WriteFile(filepath.Join(dir, "idemnode.jsonl"), []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runs, err := readBreakdownDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	writeBreakdown(&out, runs)
	for _, want := range []string{
		"claim, 64 clients, 2 nodes: 1000 req/s",
		"| part | node1 | node2 | all nodes | of which system calls |",
		"| raft log append + fsync | 50.0 | 0.0 | 50.0 | 50.0 |",
		"| state machine apply | 20.0 | 10.0 | 30.0 | 0.0 |",
		"| **total in profiles** | 70.0 | 10.0 | **80.0** | 50.0 |",
		"from /proc over the measured window: 90.0 µs per request",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("breakdown lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBreakdownNeedsProfiles(t *testing.T) {
	dir := t.TempDir()
	line := `{"target":"idemnode","mode":"claim","clients":64,"ops_per_s":1000}`
	if err := os.WriteFile(filepath.Join(dir, "idemnode.jsonl"), []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readBreakdownDir(dir); err == nil || !strings.Contains(err.Error(), "PROFILE=1") {
		t.Fatalf("err = %v, want one naming PROFILE=1", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu-claim-64-node1.pprof"), []byte("not a profile"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readBreakdownDir(dir); err == nil || !strings.Contains(err.Error(), "cpu-claim-64-node1") {
		t.Fatalf("err = %v, want one naming the broken profile", err)
	}
}
