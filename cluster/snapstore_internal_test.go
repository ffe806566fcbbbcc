package cluster

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

// TestUnclaimedInstallIsDiscardedAtShutdown: a store built from an
// InstallSnapshot stream waits for Restore to claim it; a shutdown in
// between must close and remove it rather than leave it open for ever,
// and a build finishing after the shutdown is discarded at once.
func TestUnclaimedInstallIsDiscardedAtShutdown(t *testing.T) {
	g := newInstallRig(t)
	snaps := g.tracked.installs
	meta, data := g.leaderStream(5)
	before := dirsUnder(t, g.dir)
	build := func() raft.SnapshotSink {
		sink, err := snaps.Create(raft.SnapshotVersionMax, meta.Index, meta.Term, meta.Configuration, meta.ConfigurationIndex, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sink.Write(data); err != nil {
			t.Fatal(err)
		}
		return sink
	}
	if err := build().Close(); err != nil {
		t.Fatal(err)
	}
	built := newDirs(before, dirsUnder(t, g.dir))
	if len(built) == 0 {
		t.Fatal("a finished build left no store on disk; the test cannot see it go")
	}

	snaps.close()
	if left := newDirs(before, dirsUnder(t, g.dir)); len(left) > 0 {
		t.Errorf("after shutdown the unclaimed build is still on disk: %v", left)
	}
	if len(snaps.built) != 0 {
		t.Errorf("after shutdown %d builds still wait for Restore", len(snaps.built))
	}

	if err := build().Close(); !errors.Is(err, ErrShutdown) {
		t.Errorf("a build finishing after shutdown: %v, want %v", err, ErrShutdown)
	}
	if left := newDirs(before, dirsUnder(t, g.dir)); len(left) > 0 {
		t.Errorf("a build finishing after shutdown is still on disk: %v", left)
	}
}

func dirsUnder(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

func newDirs(before, after []string) []string {
	var out []string
	for _, d := range after {
		if !slices.Contains(before, d) {
			out = append(out, d)
		}
	}
	return out
}
