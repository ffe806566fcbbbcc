package doclinks

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The docs cite Go benchmarks by name (BenchmarkRestart1M) and by the
// command that runs them (go test ./cluster -bench Restart1M). A benchmark
// renamed or removed leaves a figure nobody can reproduce, so both forms
// are checked against the benchmark functions of the repository's tests.

var (
	benchFunc = regexp.MustCompile(`(?m)^func (Benchmark[A-Z0-9_]\w*)\(`)
	benchName = regexp.MustCompile(`\bBenchmark[A-Z0-9_]\w*`)
	// go test ./PKG … -bench PATTERN, the pattern bare or quoted.
	benchCmd = regexp.MustCompile(`go test (\./\S*).*?-bench[ =](?:'([^']*)'|"([^"]*)"|(\S+))`)
	// ./PKG, ./DIR: a placeholder for the reader to fill in.
	placeholder = regexp.MustCompile(`^\./[A-Z_]+$`)
)

// Removed is a benchmark that no longer exists but that the journal, a
// record of what was run then, still names: Pkg is the package it was in
// ("./fsm"), Commit the one that removed it.
type Removed struct{ Pkg, Commit string }

// journalDir holds the dated records; only there may a removed benchmark
// be named. Everything else describes the code as it is.
const journalDir = "docs/journal/"

// Benchmarks returns the benchmark functions of the repository's tests,
// by package directory ("./cluster") and then name.
func Benchmarks(root string) (map[string]map[string]bool, error) {
	out := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := "./" + filepath.ToSlash(dir)
		if dir == "." {
			pkg = "."
		}
		for _, m := range benchFunc.FindAllStringSubmatch(string(src), -1) {
			if out[pkg] == nil {
				out[pkg] = map[string]bool{}
			}
			out[pkg][m[1]] = true
		}
		return nil
	})
	return out, err
}

// CheckBenchmarks reads every Markdown file under root, code blocks
// included, and returns each benchmark it names that no test defines and
// each go test -bench pattern that selects no benchmark of its package.
// Under docs/journal/ the benchmarks in removed count as existing.
func CheckBenchmarks(root string, removed map[string]Removed) ([]Broken, error) {
	have, err := Benchmarks(root)
	if err != nil {
		return nil, err
	}
	var broken []Broken
	err = walkMarkdown(root, func(path, rel string) error {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		defer f.Close()
		journal := strings.HasPrefix(rel, journalDir)
		known := func(pkg, name string) bool {
			if r, ok := removed[name]; ok && journal && (pkg == "" || r.Pkg == pkg) {
				return true
			}
			if pkg != "" {
				return have[pkg][name]
			}
			for _, names := range have {
				if names[name] {
					return true
				}
			}
			return false
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			for _, name := range benchName.FindAllString(line, -1) {
				if !known("", name) {
					broken = append(broken, Broken{File: rel, Line: n, Target: name, Reason: "no such benchmark"})
				}
			}
			for _, m := range benchCmd.FindAllStringSubmatch(line, -1) {
				pattern := m[2] + m[3] + m[4]
				if reason := checkBenchCmd(root, m[1], pattern, have, removed, known); reason != "" {
					broken = append(broken, Broken{File: rel, Line: n, Target: m[0], Reason: reason})
				}
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		return nil
	})
	return broken, err
}

// checkBenchCmd returns why go test pkg -bench pattern runs no benchmark,
// or "". As go test does, it matches the pattern's first element (before
// a slash, which selects sub-benchmarks) against the function's name.
func checkBenchCmd(root, pkg, pattern string, have map[string]map[string]bool, removed map[string]Removed,
	known func(pkg, name string) bool) string {
	if placeholder.MatchString(pkg) {
		return ""
	}
	pkg = strings.TrimSuffix(pkg, "/")
	all := pkg == "./..."
	var candidates []string
	if all {
		for _, names := range have {
			for name := range names {
				candidates = append(candidates, name)
			}
		}
	} else {
		if st, err := os.Stat(filepath.Join(root, filepath.FromSlash(pkg))); err != nil || !st.IsDir() {
			return "no such package"
		}
		for name := range have[pkg] {
			candidates = append(candidates, name)
		}
	}
	for name, r := range removed {
		if all || r.Pkg == pkg {
			candidates = append(candidates, name)
		}
	}
	first, _, _ := strings.Cut(pattern, "/")
	re, err := regexp.Compile(first)
	if err != nil {
		return fmt.Sprintf("-bench pattern does not compile: %v", err)
	}
	scope := pkg
	if all {
		scope = ""
	}
	for _, name := range candidates {
		if re.MatchString(name) && known(scope, name) {
			return ""
		}
	}
	return "-bench pattern selects no benchmark of " + pkg
}
