package server

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// The tokens of the reload tests, at least 16 bytes each.
const (
	tokenA = "token-a-0123456789"
	tokenB = "token-b-0123456789"
	tokenC = "token-c-0123456789"
)

// syncLog is a logger's output, written by the watcher's goroutine and read
// by the test.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// count returns how many lines contain s.
func (l *syncLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

// tokensFileOf writes a tokens file granting each token tenant acme.
func tokensFileOf(t *testing.T, path string, tokens ...string) {
	t.Helper()
	var lines strings.Builder
	for _, tok := range tokens {
		lines.WriteString(rpc.HashToken(tok) + " acme\n")
	}
	writeFile(t, path, lines.String())
}

// accepts reports whether a Get with token gets past the authenticator of
// the table tokens.
func accepts(t *testing.T, tokens *rpc.TokenTable, token string) bool {
	t.Helper()
	auth, err := rpc.NewAuthenticator(rpc.AuthConfig{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
	admitted := false
	_, err = auth.UnaryInterceptor()(ctx, &idempb.GetRequest{Id: &idempb.RecordId{Key: "k"}},
		&grpc.UnaryServerInfo{FullMethod: idempb.Idempotency_Get_FullMethodName},
		func(ctx context.Context, _ any) (any, error) {
			id, ok := rpc.IdentityFrom(ctx)
			admitted = ok && id.Tenant == "acme"
			return nil, nil
		})
	return err == nil && admitted
}

// wantAccepted fails unless exactly the tokens in want authenticate.
func wantAccepted(t *testing.T, what string, tokens *rpc.TokenTable, want ...string) {
	t.Helper()
	for _, tok := range []string{tokenA, tokenB, tokenC} {
		wanted := false
		for _, w := range want {
			wanted = wanted || w == tok
		}
		if got := accepts(t, tokens, tok); got != wanted {
			t.Errorf("%s: %s accepted = %v, want %v", what, tok, got, wanted)
		}
	}
}

// loadTokenA writes a tokens file granting tokenA and loads it.
func loadTokenA(t *testing.T) (string, *rpc.TokenTable) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	tokensFileOf(t, path, tokenA)
	tokens, err := rpc.LoadTokenTable(path, rpc.DefaultLimits().MaxTenant)
	if err != nil {
		t.Fatal(err)
	}
	return path, tokens
}

// watchedTokens is a tokens table and the watcher of its file.
type watchedTokens struct {
	*watchedFile
	tokens *rpc.TokenTable
}

// newWatched loads a table from a file granting tokenA and watches it.
func newWatched(t *testing.T) (watchedTokens, string, *syncLog) {
	t.Helper()
	path, tokens := loadTokenA(t)
	var logs syncLog
	return watchedTokens{watchTokens(tokens, path, slog.New(slog.NewTextHandler(&logs, nil))), tokens}, path, &logs
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTokensReloadOnChange: a changed file is loaded at the next check, an
// unchanged one is not reloaded, a bad one keeps the table in use (and is
// reported once, not at every check), and SIGHUP reloads even an unchanged
// file.
func TestTokensReloadOnChange(t *testing.T) {
	t.Parallel()
	w, path, logs := newWatched(t)
	const reloaded, kept = "tokens reloaded", "keeping the tokens in use"

	w.check(false)
	if n := logs.count(reloaded); n != 0 {
		t.Errorf("an unchanged file was reloaded %d times", n)
	}
	wantAccepted(t, "at start", w.tokens, tokenA)

	tokensFileOf(t, path, tokenB) // rotation: B replaces A
	w.check(false)
	wantAccepted(t, "after the file changed", w.tokens, tokenB)
	if n := logs.count(reloaded); n != 1 {
		t.Errorf("%q logged %d times, want once", reloaded, n)
	}

	writeFile(t, path, "not a tokens file\n")
	w.check(false)
	w.check(false)
	wantAccepted(t, "after a bad file", w.tokens, tokenB)
	if n := logs.count(kept); n != 1 {
		t.Errorf("a bad file reported %d times over two checks, want once", n)
	}

	tokensFileOf(t, path, tokenB, tokenC)
	w.check(false)
	wantAccepted(t, "after the file was fixed", w.tokens, tokenB, tokenC)

	w.check(true)
	if n := logs.count(reloaded); n != 3 {
		t.Errorf("%q logged %d times after SIGHUP on an unchanged file, want 3", reloaded, n)
	}
}

// TestTokensWatcherCatchesUp: a change made between the first load and the
// watcher's start is loaded when the watcher starts.
func TestTokensWatcherCatchesUp(t *testing.T) {
	t.Parallel()
	path, tokens := loadTokenA(t)
	tokensFileOf(t, path, tokenB)
	watchTokens(tokens, path, slog.New(slog.DiscardHandler))
	wantAccepted(t, "when the watcher starts", tokens, tokenB)
}

// TestTokensWatcherRuns drives the reload loop with a fast ticker: a
// rotation in the file is picked up by itself, a reload (serve's SIGHUP)
// reloads, and run ends with ctx.
func TestTokensWatcherRuns(t *testing.T) {
	t.Parallel()
	w, path, logs := newWatched(t)
	ctx, cancel := context.WithCancel(context.Background())
	hup := make(chan struct{}, 1)
	r := &reloader{files: []*watchedFile{w.watchedFile}, log: slog.New(slog.DiscardHandler)}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.run(ctx, tick.C, hup)
	}()

	tokensFileOf(t, path, tokenC)
	testutil.Eventually(t, 5*time.Second, "the rotated token to be accepted", func() bool { return accepts(t, w.tokens, tokenC) })
	wantAccepted(t, "after the rotation", w.tokens, tokenC)
	before := logs.count("tokens reloaded")
	hup <- struct{}{}
	testutil.Eventually(t, 5*time.Second, "a reload on SIGHUP", func() bool { return logs.count("tokens reloaded") > before })

	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after ctx ended")
	}
}
