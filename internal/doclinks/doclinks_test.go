package doclinks

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRepositoryLinks holds the repository's Markdown to its own links.
func TestRepositoryLinks(t *testing.T) {
	broken, err := Check(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Error(b)
	}
}

func TestCheckFindsMissingFilesAndHeadings(t *testing.T) {
	dir := t.TempDir()
	write := writer(t, dir)
	write("docs/journal/history.md", "# History\n\n## 22fec71: the release beside the store (2026-11-30, 09:47–10:50 UTC)\n\n## Runs\n\n## Runs\n")
	write("docs/PAGE.md", "# Page\n\n## Current figures\n\n"+
		"[ok](journal/history.md#22fec71-the-release-beside-the-store-2026-11-30-09471050-utc)\n"+
		"[ok, repeated heading](journal/history.md#runs-1) [ok, same file](#current-figures) [web](https://example.com/x#y)\n"+
		"[gone](OLD.md) [no heading](journal/history.md#runs-2)\n"+
		"```\n[in code](nowhere.md)\n```\n"+
		"`[inline](nowhere.md)` [not markdown](../go.mod#x)\n")
	write("go.mod", "module x\n")
	write("docs/bench-runs/raw.md", "[ignored](nowhere.md)\n")

	broken, err := Check(dir)
	got := found(t, broken, err)
	want := []string{
		"docs/PAGE.md:7: OLD.md: no such file",
		"docs/PAGE.md:7: journal/history.md#runs-2: no heading with this anchor",
		"docs/PAGE.md:11: ../go.mod#x: a fragment on a file that is not Markdown",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Check found\n%q\nwant\n%q", got, want)
	}
}

func TestAnchor(t *testing.T) {
	for text, want := range map[string]string{
		"Current figures": "current-figures",
		"Memory held to `--memory-limit`, and the apply cost at 30 M again (2026-11-28, afternoon)": "memory-held-to---memory-limit-and-the-apply-cost-at-30-m-again-2026-11-28-afternoon",
		"The log moved to raft-wal: a bug found, then the CI profile — 2026-11-26":                  "the-log-moved-to-raft-wal-a-bug-found-then-the-ci-profile--2026-11-26",
		"After group commit and stream forwarding: CI profile and 5 nodes × 30 clients":             "after-group-commit-and-stream-forwarding-ci-profile-and-5-nodes--30-clients",
		"A caller's `Connection:` header stripped the fencing token":                                "a-callers-connection-header-stripped-the-fencing-token",
	} {
		if got := Anchor(text); got != want {
			t.Errorf("Anchor(%q) = %q, want %q", text, got, want)
		}
	}
}

// writer returns a function that writes a file under dir, making its
// directories.
func writer(t *testing.T, dir string) func(name, text string) {
	return func(name, text string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// found returns what a check found, one line each, or fails on its error.
func found(t *testing.T, broken []Broken, err error) []string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range broken {
		got = append(got, b.String())
	}
	return got
}
