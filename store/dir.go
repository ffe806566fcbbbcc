package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A node's store lives in its own dir under the fsm dir, named by the file
// CURRENT there. A restored snapshot is built in a new dir and swapped in by
// rewriting CURRENT (a temporary file, synced, renamed, the dir synced), so
// a crash at any moment opens either the old store or the whole new one.
// Open removes the dirs CURRENT does not name: a build a crash cut short, or
// a store a restore replaced.
const (
	currentFile = "CURRENT"
	storePrefix = "store-"
)

// Open opens the store under root (created when absent).
func Open(root string, o Options) (*Store, error) {
	o = o.withDefaults()
	if err := o.FS.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create store dir: %w", err)
	}
	name, err := readCurrent(o.FS, root)
	if errors.Is(err, os.ErrNotExist) {
		name = storePrefix + "000001"
		err = nil
	}
	if err != nil {
		return nil, err
	}
	if err := reapExcept(o.FS, root, name); err != nil {
		return nil, err
	}
	cache := pebble.NewCache(o.CacheSize)
	brk := newBreaker(o.Fatal)
	db, version, err := openDB(o.FS.PathJoin(root, name), o, cache, brk)
	if err != nil {
		cache.Unref()
		return nil, err
	}
	if version != FormatVersion {
		if name, db, err = migrate(o, root, name, db, version, cache, brk); err != nil {
			cache.Unref()
			return nil, err
		}
	}
	// The dirs Open and Pebble made must survive a crash like the files
	// in them: sync their parents.
	if err := syncDirs(o.FS, root); err != nil {
		db.Close()
		cache.Unref()
		return nil, err
	}
	s, err := newStore(root, name, o, db, cache, brk)
	if err != nil {
		db.Close()
		cache.Unref()
		return nil, err
	}
	if err := writeCurrent(o.FS, root, name); err != nil {
		s.release()
		return nil, err
	}
	s.startFilterBuild()
	return s, nil
}

func readCurrent(fs vfs.FS, root string) (string, error) {
	f, err := fs.Open(fs.PathJoin(root, currentFile))
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", currentFile, err)
	}
	name := strings.TrimSpace(string(b))
	if !strings.HasPrefix(name, storePrefix) || strings.ContainsAny(name, "/\\") {
		return "", fmt.Errorf("%w: %s names %q", ErrCorrupt, currentFile, name)
	}
	return name, nil
}

// writeCurrent points CURRENT at name durably.
func writeCurrent(fs vfs.FS, root, name string) error {
	tmp := fs.PathJoin(root, currentFile+".tmp")
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("write %s: %w", currentFile, err)
	}
	_, err = f.Write([]byte(name + "\n"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, fs.PathJoin(root, currentFile))
	}
	if err == nil {
		err = syncDir(fs, root)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", currentFile, err)
	}
	return nil
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// syncDirs syncs root and its parent, so the store dir's entry and root's
// own survive a crash.
func syncDirs(fs vfs.FS, root string) error {
	for _, d := range []string{root, fs.PathDir(root)} {
		if err := syncDir(fs, d); err != nil {
			return fmt.Errorf("sync dir %s: %w", d, err)
		}
	}
	return nil
}

// reapExcept removes every store dir under root but keep, and any table a
// build left for ingestion.
func reapExcept(fs vfs.FS, root, keep string) error {
	names, err := fs.List(root)
	if err != nil {
		return fmt.Errorf("list store dir: %w", err)
	}
	for _, n := range names {
		if (strings.HasPrefix(n, storePrefix) && n != keep) || strings.HasPrefix(n, ingestPrefix) {
			if err := fs.RemoveAll(fs.PathJoin(root, n)); err != nil {
				return fmt.Errorf("remove stale store %s: %w", n, err)
			}
		}
	}
	return nil
}

// nextName returns the name of the store dir after cur.
func nextName(cur string) string {
	var n int
	fmt.Sscanf(strings.TrimPrefix(cur, storePrefix), "%d", &n)
	return fmt.Sprintf("%s%06d", storePrefix, n+1)
}
