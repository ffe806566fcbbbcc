package main

import (
	"os"
	"testing"
	"time"
)

func TestSummarise(t *testing.T) {
	var d []time.Duration
	for i := 1000; i >= 1; i-- { // unsorted on purpose
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	l := summarise(d)
	want := latencies{p50: 500, p90: 900, p99: 990, p999: 999, max: 1000, mean: 500.5}
	if l != want {
		t.Fatalf("summarise = %+v, want %+v", l, want)
	}
	if d[0] != 1000*time.Millisecond {
		t.Fatal("summarise sorted its input in place")
	}
	if (summarise(nil) != latencies{}) || percentile([]time.Duration{3 * time.Millisecond}, .999) != 3 {
		t.Fatal("empty or single sample")
	}
}

func TestCPUBetween(t *testing.T) {
	t0 := time.Now()
	var a, b cpuSnap
	a = cpuSnap{at: t0, pids: map[int]uint64{42: 100}, names: map[int]string{42: "idemnode"}}
	b = cpuSnap{at: t0.Add(2 * time.Second), self: 500 * time.Millisecond,
		pids: map[int]uint64{42: 250, 43: 10}, names: map[int]string{42: "idemnode", 43: "late"}}
	a.addMachine([]string{"cpu", "100", "0", "100", "700", "50", "0", "0", "50", "999", "999"})
	b.addMachine([]string{"cpu", "400", "0", "200", "800", "100", "0", "0", "100", "999", "999"})
	r := cpuBetween(a, b, 2)
	// total went 1000 -> 1600, busy (user+system) 200 -> 600, iowait +50, steal +50.
	if r.MachineBusy != 66.7 || r.MachineIOWait != 8.3 || r.MachineSteal != 8.3 {
		t.Fatalf("machine: %+v", r)
	}
	// 150 jiffies in 2 s = 0.75 cores; a pid missing at the start is skipped.
	if r.ServerCores != 0.75 || r.PerPID["42/idemnode"] != 0.75 || len(r.PerPID) != 1 || r.LoadgenCores != 0.25 {
		t.Fatalf("processes: %+v", r)
	}
}

func TestProcCPUOfSelf(t *testing.T) {
	name, _, ok := procCPU(os.Getpid())
	if !ok || name == "" {
		t.Fatalf("procCPU(self) = %q, %v", name, ok)
	}
	if _, _, ok := procCPU(-1); ok {
		t.Fatal("procCPU of no process succeeded")
	}
}
