package tlsconfig

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
)

// reloading holds a value parsed from files and parses them again when
// they change, so certificates and CA bundles rotate without a restart.
// Whether a file changed is told by its size and modification time, checked
// on every use: a stat per TLS handshake is cheap next to the handshake.
// A Kubernetes Secret update swaps a symlink, which changes both.
type reloading[T any] struct {
	what  string
	files []string
	parse func() (T, error)
	log   *slog.Logger

	// mu guards tried and val: handshakes on many connections ask at once.
	mu sync.Mutex
	// tried is the stamp of the files last parsed, successfully or not, so
	// a bad file is reported once, not on every handshake.
	tried string
	val   T
}

// newReloading parses the files now; a failure here is a startup error.
func newReloading[T any](what string, log *slog.Logger, parse func() (T, error), files ...string) (*reloading[T], error) {
	r := &reloading[T]{what: what, files: files, parse: parse, log: log}
	stamp, err := r.stamp()
	if err != nil {
		return nil, err
	}
	if r.val, err = parse(); err != nil {
		return nil, err
	}
	r.tried = stamp
	return r, nil
}

// get returns the current value, parsing the files again if they changed
// since they were last tried. A file that fails to parse (half written: the
// certificate replaced, its key not yet) keeps the previous value in use.
func (r *reloading[T]) get() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	stamp, err := r.stamp()
	if err != nil || stamp == r.tried {
		return r.val
	}
	r.tried = stamp
	v, err := r.parse()
	if err != nil {
		r.log.Warn("reload failed; still using the previous one", "what", r.what, "err", err)
		return r.val
	}
	r.val = v
	r.log.Info("reloaded", "what", r.what, "files", strings.Join(r.files, ","))
	return r.val
}

// reload parses the files whether or not they changed (SIGHUP) and reports
// a failure; the previous value stays in use then.
func (r *reloading[T]) reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	stamp, _ := r.stamp()
	r.tried = stamp
	v, err := r.parse()
	if err != nil {
		return fmt.Errorf("reload %s: %w", r.what, err)
	}
	r.val = v
	return nil
}

// stamp identifies the files' current contents by size and mtime.
func (r *reloading[T]) stamp() (string, error) {
	var b strings.Builder
	for _, f := range r.files {
		st, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("%s: %w", r.what, err)
		}
		fmt.Fprintf(&b, "%d/%d;", st.Size(), st.ModTime().UnixNano())
	}
	return b.String(), nil
}
