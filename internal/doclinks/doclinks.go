// Package doclinks checks the relative links of the repository's Markdown
// files: each must name a file that exists and, with a fragment, a heading
// of that file, so that moving a section (docs/journal/ holds the dated
// ones) cannot leave a link pointing nowhere.
package doclinks

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Broken is one link that names a missing file or heading.
type Broken struct {
	File   string // the Markdown file holding the link, relative to the root
	Line   int
	Target string // the link as written
	Reason string
}

func (b Broken) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", b.File, b.Line, b.Target, b.Reason)
}

// skipped are directories whose Markdown is not documentation: raw
// benchmark output, run results, version control.
var skipped = map[string]bool{".git": true, "docs/bench-runs": true, "bench-results": true, "jepsen/results": true}

var (
	link       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineCode = regexp.MustCompile("`[^`]*`")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// Check reads every Markdown file under root and returns the links that
// point nowhere. Links with a scheme (https:, mailto:) are not followed.
func Check(root string) ([]Broken, error) {
	var broken []Broken
	anchors := map[string]map[string]bool{} // by file, read once
	err := walkMarkdown(root, func(path, rel string) error {
		lines, err := proseLines(path)
		if err != nil {
			return err
		}
		for i, line := range lines {
			for _, m := range link.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if scheme.MatchString(target) {
					continue
				}
				if reason := checkTarget(path, target, anchors); reason != "" {
					broken = append(broken, Broken{File: rel, Line: i + 1, Target: target, Reason: reason})
				}
			}
		}
		return nil
	})
	return broken, err
}

// walkMarkdown calls fn with the path of every Markdown file under root
// outside the skipped directories, and its path relative to root with
// forward slashes.
func walkMarkdown(root string, fn func(path, rel string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skipped[rel] {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".md") {
			return nil
		}
		return fn(path, rel)
	})
}

// checkTarget returns why the link target from file from is broken, or "".
func checkTarget(from, target string, anchors map[string]map[string]bool) string {
	file, frag, _ := strings.Cut(target, "#")
	dest := from
	if file != "" {
		dest = filepath.Join(filepath.Dir(from), filepath.FromSlash(file))
		if _, err := os.Stat(dest); err != nil {
			return "no such file"
		}
	}
	if frag == "" {
		return ""
	}
	if !strings.HasSuffix(dest, ".md") {
		return "a fragment on a file that is not Markdown"
	}
	if anchors[dest] == nil {
		a, err := headingAnchors(dest)
		if err != nil {
			return err.Error()
		}
		anchors[dest] = a
	}
	if !anchors[dest][frag] {
		return "no heading with this anchor"
	}
	return ""
}

// proseLines returns the file's lines with those of fenced code blocks
// blanked, so the numbering stays the file's.
func proseLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	var lines []string
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			line = ""
		} else if fenced {
			line = ""
		}
		lines = append(lines, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return lines, nil
}

// headingAnchors returns the anchors GitHub gives the file's headings.
func headingAnchors(path string) (map[string]bool, error) {
	lines, err := proseLines(path)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range lines {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := Anchor(m[1])
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out, nil
}

// Anchor is the fragment GitHub makes of a heading's text: lower case,
// letters, digits, hyphens and underscores kept, spaces made hyphens,
// everything else (punctuation, backticks, symbols such as ×) dropped.
// A repeated heading gets -1, -2… after it (headingAnchors).
func Anchor(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
