package doclinks

import (
	"path/filepath"
	"slices"
	"testing"
)

// removedBenchmarks are the benchmarks the journal names that are gone; the
// journal says so beside each mention. Nothing outside docs/journal/ may
// name them.
var removedBenchmarks = map[string]Removed{
	"BenchmarkMemoryPerRecord":   {Pkg: "./fsm", Commit: "4a99e40"},
	"BenchmarkMemory1M":          {Pkg: "./fsm", Commit: "5f22b09"},
	"BenchmarkSnapshotRestore1M": {Pkg: "./fsm", Commit: "5f22b09"},
}

// TestRepositoryBenchmarks holds the repository's Markdown to the
// benchmarks its tests define.
func TestRepositoryBenchmarks(t *testing.T) {
	root := filepath.Join("..", "..")
	broken, err := CheckBenchmarks(root, removedBenchmarks)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Error(b)
	}
	// A removed benchmark that came back should leave the list.
	have, err := Benchmarks(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range removedBenchmarks {
		if have[r.Pkg][name] {
			t.Errorf("%s exists in %s again: take it off removedBenchmarks", name, r.Pkg)
		}
	}
}

func TestCheckBenchmarksFindsMissingOnes(t *testing.T) {
	dir := t.TempDir()
	write := writer(t, dir)
	write("cluster/restart_bench_test.go", "package cluster\n\nfunc BenchmarkRestart1M(b *testing.B) {}\n")
	write("proxy/bench_test.go", "package proxy\n\nfunc BenchmarkProxy(b *testing.B) {}\nfunc helperBenchmarkX() {}\n")
	page := "# Page\n\n" +
		"`BenchmarkRestart1M` in prose, BenchmarkProxy/interleaved with a sub-benchmark.\n" + // 3: ok
		"BenchmarkMemory1M is gone.\n" + // 4: removed, outside the journal
		"```\n" +
		"go test ./cluster -run '^$' -bench Restart1M -benchtime 1x\n" + // 6: ok
		"go test ./proxy -bench 'Proxy/interleaved' && go test ./... -bench=Restart\n" + // 7: ok
		"go test ./fsm -bench '1M$'\n" + // 8: no such package
		"go test ./cluster -bench Memory1M\n" + // 9: selects nothing
		"go test ./proxy -bench '(['\n" + // 10: does not compile
		"go test ./PKG -run '^$' -bench NAME\n" + // 11: a placeholder
		"BenchmarkFailover\n" + // 12: in a code block too
		"```\n"
	write("docs/PAGE.md", page)
	write("docs/journal/old.md", "BenchmarkMemory1M was removed. BenchmarkGone was never listed.\n")
	write("docs/bench-runs/raw.md", "BenchmarkGone\n")

	broken, err := CheckBenchmarks(dir, map[string]Removed{"BenchmarkMemory1M": {Pkg: "./fsm", Commit: "5f22b09"}})
	got := found(t, broken, err)
	want := []string{
		"docs/PAGE.md:4: BenchmarkMemory1M: no such benchmark",
		"docs/PAGE.md:8: go test ./fsm -bench '1M$': no such package",
		"docs/PAGE.md:9: go test ./cluster -bench Memory1M: -bench pattern selects no benchmark of ./cluster",
		"docs/PAGE.md:10: go test ./proxy -bench '([': -bench pattern does not compile: error parsing regexp: missing closing ]: `[`",
		"docs/PAGE.md:12: BenchmarkFailover: no such benchmark",
		"docs/journal/old.md:1: BenchmarkGone: no such benchmark",
	}
	if !slices.Equal(got, want) {
		t.Errorf("CheckBenchmarks found\n%q\nwant\n%q", got, want)
	}
}
