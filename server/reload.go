package server

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/idemnode/idemnode/internal/tlsconfig"
	"github.com/idemnode/idemnode/rpc"
)

// reloadPoll is how often the watched files are checked for a change. In
// Kubernetes a Secret update reaches the mounted file (within a minute or
// so) but nobody sends SIGHUP; Server.Reload (serve's SIGHUP) re-reads at
// once.
const reloadPoll = 10 * time.Second

// reloader is the one mechanism that re-reads a server's files: the
// certificates, the gossip key file and the tokens file, when they change
// (polled) and on Reload. (A handshake also takes in a certificate whose
// files changed since the last poll: internal/tlsconfig checks them on use.)
type reloader struct {
	certs *tlsconfig.Node // nil without TLS
	files []*watchedFile
	log   *slog.Logger
}

// watching reports whether anything is polled.
func (r *reloader) watching() bool { return r.certs != nil || len(r.files) > 0 }

// poll applies the files that changed.
func (r *reloader) poll() {
	if r.certs != nil {
		r.certs.Refresh()
	}
	for _, f := range r.files {
		f.check(false)
	}
}

// reload re-reads every file now, changed or not.
func (r *reloader) reload() {
	r.log.Info("reloading certificates, gossip keys and tokens")
	if r.certs != nil {
		if err := r.certs.Reload(); err != nil {
			r.log.Warn("reload certificates", "err", err)
		}
	}
	for _, f := range r.files {
		f.check(true)
	}
}

// run polls at every tick and reloads at every hup until ctx ends: the
// only goroutine that reads the files, so a reload and a poll never read
// one at once.
func (r *reloader) run(ctx context.Context, tick <-chan time.Time, hup <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.reload()
		case <-tick:
			r.poll()
		}
	}
}

// watchedFile is a setting read from a file: load takes a new content in
// and says how many entries (keys, tokens) it holds; a content that fails
// to load leaves the setting in use as it was.
type watchedFile struct {
	// what names the setting in the logs ("tokens", "gossip keys"); unit
	// is the attribute that counts its entries.
	what, unit string
	path       string
	load       func(content []byte) (int, error)
	log        *slog.Logger
	// last is the file's content when last read. With a load that reads
	// the file again (the tokens table), a change between the two reads is
	// loaded and seen as a change once more at the next poll, so the
	// setting is never older than last.
	last []byte
}

// newWatchedFile watches path. The setting was loaded from the file before:
// from loaded, when its content is known, or else from a read the watcher
// cannot see, so the file is read and loaded once more here, and a change
// made since is not missed.
func newWatchedFile(what, unit, path string, loaded []byte, load func([]byte) (int, error), log *slog.Logger) *watchedFile {
	w := &watchedFile{what: what, unit: unit, path: path, load: load, log: log}
	if loaded != nil {
		w.last = loaded
		return w
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return w // unreadable: the first poll tries again
	}
	w.last = b
	if _, err := load(b); err != nil {
		log.Error("reload "+what+"; keeping the "+what+" in use", "file", path, "err", err)
	}
	return w
}

// watchTokens watches the tokens file of a table loaded from path. The
// table re-reads the file itself and swaps atomically (rpc.TokenTable.Reload).
func watchTokens(tokens *rpc.TokenTable, path string, log *slog.Logger) *watchedFile {
	return newWatchedFile("tokens", "tokens", path, nil, func([]byte) (int, error) { return tokens.Reload() }, log)
}

// check loads the file if it changed, or always when forced (Reload).
// Either way a file that fails to load keeps the setting in use; it is
// logged once per change, not on every poll (an unreadable file is logged
// at each check).
func (w *watchedFile) check(force bool) {
	b, err := os.ReadFile(w.path)
	if err != nil {
		w.log.Error("read "+w.what+" file; keeping the "+w.what+" in use", "file", w.path, "err", err)
		return
	}
	if !force && bytes.Equal(b, w.last) {
		return
	}
	w.last = b
	n, err := w.load(b)
	if err != nil {
		w.log.Error("reload "+w.what+"; keeping the "+w.what+" in use", "file", w.path, "err", err)
		return
	}
	w.log.Info(w.what+" reloaded", w.unit, n)
}
