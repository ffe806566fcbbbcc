package certgen

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// output is one file to write.
type output struct {
	name   string
	data   []byte
	secret bool // a private key: mode 0600; otherwise 0644
}

// publish writes outs into the directory, all or none. Each is staged in a
// temporary file there, check runs on the staged paths (by name), and only
// then do they take their names: without Force by a hard link, which fails
// if the name was taken in the meantime, so nothing is ever replaced; with
// Force by a rename. It returns the paths written (none when Keep found
// them all and they passed check, see keepExisting).
func (d Dir) publish(outs []output, check func(staged map[string]string) error) ([]string, error) {
	if d.Force && d.Keep {
		return nil, fmt.Errorf("%w: force and keep exclude each other", ErrInvalid)
	}
	if err := os.MkdirAll(d.Path, 0o700); err != nil {
		return nil, fmt.Errorf("create directory %s: %w", d.Path, err)
	}
	if !d.Force {
		var taken []error
		for _, o := range outs {
			if _, err := os.Lstat(d.path(o.name)); err == nil {
				taken = append(taken, fmt.Errorf("%s: %w (nothing written; --force replaces it)", d.path(o.name), ErrExists))
			}
		}
		if d.Keep && len(taken) == len(outs) {
			return nil, d.keepExisting(outs, check)
		}
		if len(taken) > 0 {
			return nil, errors.Join(taken...)
		}
	}
	staged := make(map[string]string, len(outs))
	defer func() {
		for _, p := range staged {
			os.Remove(p)
		}
	}()
	for _, o := range outs {
		p, err := stage(d.Path, o)
		if err != nil {
			return nil, err
		}
		staged[o.name] = p
	}
	if check != nil {
		if err := check(staged); err != nil {
			return nil, err
		}
	}
	var written []string
	for _, o := range outs {
		final := d.path(o.name)
		if err := d.place(staged[o.name], final); err != nil {
			// All or none: take back what this call placed (without Force
			// those were new files; with Force the old ones are gone).
			if !d.Force {
				for _, w := range written {
					os.Remove(w)
				}
			}
			return nil, err
		}
		written = append(written, final)
	}
	return written, nil
}

// keepExisting runs on the files that exist the checks a staged file goes
// through, so that Keep keeps only what this call would have written: an
// init job that runs again with other names, beside another CA or after a
// key was replaced learns it here, not from a node that refuses to start
// or a client that is refused. Keys must be readable by their owner alone.
func (d Dir) keepExisting(outs []output, check func(existing map[string]string) error) error {
	existing := make(map[string]string, len(outs))
	var errs []error
	for _, o := range outs {
		p := d.path(o.name)
		existing[o.name] = p
		if !o.secret {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("keep %s: %w", p, err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			errs = append(errs, fmt.Errorf("%w: %s has mode %v: a key must be readable by its owner alone (0600)", ErrRefused, p, fi.Mode().Perm()))
		}
	}
	if check != nil {
		if err := check(existing); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		var names []string
		for _, o := range outs {
			names = append(names, o.name)
		}
		return fmt.Errorf("--keep: the existing %s are not what this command makes (nothing written; --force replaces them): %w",
			strings.Join(names, ", "), err)
	}
	return nil
}

// place gives a staged file its final name.
func (d Dir) place(staged, final string) error {
	if d.Force {
		if err := os.Rename(staged, final); err != nil {
			return fmt.Errorf("write %s: %w", final, err)
		}
		return nil
	}
	if err := os.Link(staged, final); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w (nothing written; --force replaces it)", final, ErrExists)
		}
		return fmt.Errorf("write %s: %w", final, err)
	}
	return nil
}

// stage writes o to a new temporary file in dir, synced, with o's mode.
func stage(dir string, o output) (string, error) {
	// CreateTemp makes the file 0600, so a key is never readable by others,
	// not even for a moment.
	f, err := os.CreateTemp(dir, "."+o.name+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", filepath.Join(dir, o.name), err)
	}
	_, err = f.Write(o.data)
	if err == nil && !o.secret {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write %s: %w", filepath.Join(dir, o.name), err)
	}
	return f.Name(), nil
}

// exists reports whether the directory holds name.
func (d Dir) exists(name string) bool {
	_, err := os.Stat(d.path(name))
	return err == nil
}

// copyCACerts puts, with CADir set, the CA certificates of CADir into Path
// (cluster-ca.crt, and client-ca.crt when it exists): what a node or a
// client needs beside its own pair, without the CAs' keys. A copy that is
// there already must hold the same bytes; one that another process placed
// meanwhile is checked the same way. It returns the paths written.
func (d Dir) copyCACerts() ([]string, error) {
	if d.CADir == "" {
		return nil, nil
	}
	var written []string
	for _, name := range []string{ClusterCACert, ClientCACert} {
		src, err := os.ReadFile(d.caPath(name))
		if errors.Is(err, fs.ErrNotExist) && name == ClientCACert {
			continue
		}
		if err != nil {
			return written, fmt.Errorf("read %s: %w", d.caPath(name), err)
		}
		same := func() (bool, error) {
			old, err := os.ReadFile(d.path(name))
			if err != nil {
				return false, err
			}
			if !bytes.Equal(old, src) {
				return false, fmt.Errorf("%w: %s is another certificate than %s (nothing written)", ErrExists, d.path(name), d.caPath(name))
			}
			return true, nil
		}
		if ok, err := same(); ok || !errors.Is(err, fs.ErrNotExist) {
			if err != nil {
				return written, err
			}
			continue
		}
		w, err := Dir{Path: d.Path}.publish([]output{{name: name, data: src}}, nil)
		if errors.Is(err, ErrExists) {
			_, err = same()
		}
		if err != nil {
			return written, err
		}
		written = append(written, w...)
	}
	return written, nil
}
