package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemnode/idemnode/rpc"
)

// tokensPoll is how often the tokens file is checked for a change. In
// Kubernetes a Secret update reaches the mounted file (within a minute or
// so) but nobody sends SIGHUP; SIGHUP still reloads at once.
const tokensPoll = 10 * time.Second

// tokensWatcher reloads the tokens table when its file changes and on
// SIGHUP. The table swaps atomically (rpc.TokenTable.Reload), and a file
// that fails to parse leaves the table in use as it was.
type tokensWatcher struct {
	tokens *rpc.TokenTable
	path   string
	log    *slog.Logger
	// last is the file's content when last read. It is read before each
	// Reload, which reads the file again: a change between the two reads
	// is loaded and seen as a change once more at the next poll, so the
	// table is never older than last.
	last []byte
}

// newTokensWatcher reads the file's content and reloads the table from a
// read that follows it, so a change made since the table was first loaded
// is not missed.
func newTokensWatcher(tokens *rpc.TokenTable, path string, log *slog.Logger) *tokensWatcher {
	w := &tokensWatcher{tokens: tokens, path: path, log: log}
	w.last, _ = os.ReadFile(path) // unreadable: the first poll tries again
	if _, err := tokens.Reload(); err != nil {
		log.Error("reload tokens; keeping the tokens in use", "err", err)
	}
	return w
}

// watchTokens reloads the tokens table on SIGHUP and when the file changes,
// until ctx ends.
func (a *authFlags) watchTokens(ctx context.Context, tokens *rpc.TokenTable, log *slog.Logger) {
	if tokens == nil {
		return // SIGHUP keeps its default meaning
	}
	w := newTokensWatcher(tokens, a.tokensFile, log)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	tick := time.NewTicker(tokensPoll)
	go func() {
		defer signal.Stop(hup)
		defer tick.Stop()
		w.run(ctx, hup, tick.C)
	}()
}

// run reloads on every hup and, when the content changed, on every tick.
func (w *tokensWatcher) run(ctx context.Context, hup <-chan os.Signal, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			w.reload(true)
		case <-tick:
			w.reload(false)
		}
	}
}

// reload re-reads the table if the file changed, or always when forced
// (SIGHUP). Either way a file that fails to parse keeps the tokens in use;
// it is logged once per change, not on every poll (an unreadable file is
// logged at each check).
func (w *tokensWatcher) reload(force bool) {
	b, err := os.ReadFile(w.path)
	if err != nil {
		w.log.Error("read tokens file; keeping the tokens in use", "file", w.path, "err", err)
		return
	}
	if !force && bytes.Equal(b, w.last) {
		return
	}
	w.last = b
	n, err := w.tokens.Reload()
	if err != nil {
		w.log.Error("reload tokens; keeping the tokens in use", "err", err)
		return
	}
	w.log.Info("tokens reloaded", "tokens", n)
}
