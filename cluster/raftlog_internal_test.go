package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestRaftLoggerWritesThroughSlog: raft's lines reach the node's slog
// handler (its format, here JSON) with their level, names and arguments,
// and lines below the level are dropped.
func TestRaftLoggerWritesThroughSlog(t *testing.T) {
	var buf bytes.Buffer
	l := newRaftLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), hclog.Warn)
	l.Info("dropped below warn")
	l.Named("transport").With("peer", "n2").Warn("failed to contact", "err", "refused")
	l.StandardLogger(nil).Print("[ERR] from a standard logger")
	out := buf.String()
	if strings.Contains(out, "dropped") {
		t.Errorf("a line below the level was written: %s", out)
	}
	for _, want := range []string{`"level":"WARN"`, `"msg":"failed to contact"`, `"logger":"transport"`, `"peer":"n2"`,
		`"err":"refused"`, `"level":"ERROR"`, `"msg":"from a standard logger"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if !l.IsWarn() || l.IsInfo() {
		t.Errorf("IsWarn %v, IsInfo %v at level warn", l.IsWarn(), l.IsInfo())
	}
}
