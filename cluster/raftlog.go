package cluster

import (
	"context"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// raftLogger is an hclog.Logger that writes through slog, so raft's lines
// land in the node's configured logger (its handler, format and output)
// instead of a second logger on stderr.
type raftLogger struct {
	log  *slog.Logger
	name string
	args []any
	// level is shared with the loggers derived by With and Named, as
	// hclog's own are: SetLevel on one changes them all.
	level *atomic.Int32
}

// newRaftLogger returns raft's logger over log, passing lines at level and
// above.
func newRaftLogger(log *slog.Logger, level hclog.Level) hclog.Logger {
	l := &raftLogger{log: log, level: new(atomic.Int32)}
	l.level.Store(int32(level))
	return l
}

// slogLevel maps hclog's levels onto slog's; Trace is below Debug.
func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (l *raftLogger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off || level < hclog.Level(l.level.Load()) {
		return
	}
	if l.name != "" {
		args = append([]any{"logger", l.name}, args...)
	}
	l.log.Log(context.Background(), slogLevel(level), msg, append(append([]any(nil), l.args...), args...)...)
}

func (l *raftLogger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l *raftLogger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *raftLogger) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *raftLogger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *raftLogger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l *raftLogger) enabled(level hclog.Level) bool { return hclog.Level(l.level.Load()) <= level }
func (l *raftLogger) IsTrace() bool                  { return l.enabled(hclog.Trace) }
func (l *raftLogger) IsDebug() bool                  { return l.enabled(hclog.Debug) }
func (l *raftLogger) IsInfo() bool                   { return l.enabled(hclog.Info) }
func (l *raftLogger) IsWarn() bool                   { return l.enabled(hclog.Warn) }
func (l *raftLogger) IsError() bool                  { return l.enabled(hclog.Error) }

func (l *raftLogger) ImpliedArgs() []any { return l.args }

func (l *raftLogger) With(args ...any) hclog.Logger {
	c := *l
	c.args = append(append([]any(nil), l.args...), args...)
	return &c
}

func (l *raftLogger) Name() string { return l.name }

func (l *raftLogger) Named(name string) hclog.Logger {
	if l.name != "" {
		name = l.name + "." + name
	}
	return l.ResetNamed(name)
}

func (l *raftLogger) ResetNamed(name string) hclog.Logger {
	c := *l
	c.name = name
	return &c
}

func (l *raftLogger) SetLevel(level hclog.Level) { l.level.Store(int32(level)) }
func (l *raftLogger) GetLevel() hclog.Level      { return hclog.Level(l.level.Load()) }

func (l *raftLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(opts), "", 0)
}

// StandardWriter takes the lines of a standard logger; the level comes from
// a "[LEVEL]" prefix when there is one (as hclog's own writer infers it).
func (l *raftLogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer { return stdWriter{l} }

type stdWriter struct{ l *raftLogger }

func (w stdWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := hclog.Info
	for prefix, lv := range map[string]hclog.Level{"[TRACE]": hclog.Trace, "[DEBUG]": hclog.Debug,
		"[INFO]": hclog.Info, "[WARN]": hclog.Warn, "[ERR]": hclog.Error, "[ERROR]": hclog.Error} {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			line, level = strings.TrimSpace(rest), lv
			break
		}
	}
	w.l.Log(level, line)
	return len(p), nil
}
