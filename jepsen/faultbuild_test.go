package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBinMustBeAFaultBuild: the harness builds its nodes with -tags faults,
// and refuses a release build given as -bin (it has no --fault-* flag, so
// its nodes would not start).
func TestBinMustBeAFaultBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds idemnode twice (a release and a fault build)")
	}
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	build := exec.Command("go", "build", "-o", release, "github.com/idemnode/idemnode/cmd/idemnode")
	build.Dir = moduleRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build idemnode: %v: %s", err, out)
	}
	if _, err := buildBinary(config{bin: release}, dir); err == nil || !strings.Contains(err.Error(), "-tags faults") {
		t.Errorf("a release build as -bin: %v; want refused, naming -tags faults", err)
	}
	faulty, err := buildBinary(config{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkFaultBuild(faulty); err != nil {
		t.Errorf("the harness's own build: %v", err)
	}
}
