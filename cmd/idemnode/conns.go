package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/idemnode/idemnode/internal/netlimit"
)

// connFlags bound what clients may hold of a server's connections and
// descriptors (docs/OPERATIONS.md, "Connection limits"). serve and proxy
// share the flags for the address cap, the descriptor reserve and the read
// timeout; each registers its own listeners' caps.
type connFlags struct {
	perIP       int
	fdReserve   int
	readTimeout time.Duration
	// caps are the listeners' caps, in the order they were registered.
	caps []*listenerCap
	fl   *pflag.FlagSet
}

// listenerCap is one listener's --*-max-conns flag.
type listenerCap struct {
	name string // the listener's metrics label
	flag string
	max  int
	// on says the listener is served; a listener that is off takes no share.
	on bool
}

// register adds the shared flags to fl, with readTimeout as the default
// time an HTTP client has to send a whole request; exempt says who the
// address cap leaves alone, if anyone.
func (c *connFlags) register(fl *pflag.FlagSet, readTimeout time.Duration, exempt string) {
	c.fl = fl
	fl.IntVar(&c.perIP, "max-conns-per-ip", 0, "the most connections one client address may hold on each client listener"+
		exempt+" (0: no cap; clients behind one NAT or proxy share an address)")
	fl.IntVar(&c.fdReserve, "fd-reserve", 0, "file descriptors the client listeners leave to the process: the caps plus this "+
		"must fit in the open-file limit (0: 1024, at most half the limit)")
	fl.DurationVar(&c.readTimeout, "read-timeout", readTimeout, "time an HTTP client has to send a whole request, body included; "+
		"then the connection is closed (0: unbounded; a long poll's wait for its answer is not counted)")
}

// listener registers the cap flag of a listener named name and returns it.
func (c *connFlags) listener(name, flag string, max int, help string) *listenerCap {
	l := &listenerCap{name: name, flag: flag, max: max, on: true}
	c.fl.IntVar(&l.max, flag, max, help+"; lowered to fit the open-file limit unless given")
	c.caps = append(c.caps, l)
	return l
}

// fit sizes the caps of the listeners that are on to the process's
// open-file limit (netlimit.Fit): an error when the caps given do not fit.
func (c *connFlags) fit(log *slog.Logger) error {
	if c.perIP < 0 || c.fdReserve < 0 || c.readTimeout < 0 {
		return fmt.Errorf("--max-conns-per-ip, --fd-reserve and --read-timeout must not be negative")
	}
	limit, err := netlimit.DescriptorLimit()
	if err != nil {
		return runtimeError{err}
	}
	reserve := c.fdReserve
	if reserve == 0 {
		reserve = netlimit.DefaultReserve(limit)
	}
	var caps []netlimit.Cap
	var on []*listenerCap
	for _, l := range c.caps {
		if l.on {
			caps = append(caps, netlimit.Cap{Name: "--" + l.flag, Max: l.max, Set: c.fl.Changed(l.flag)})
			on = append(on, l)
		}
	}
	fitted, lowered, err := netlimit.Fit(limit, reserve, caps)
	if err != nil {
		return err
	}
	args := []any{"open_files", limit, "reserve", reserve}
	for i, l := range on {
		l.max = fitted[i]
		args = append(args, l.name, l.max)
	}
	if lowered {
		log.Warn("connection caps lowered to fit the open-file limit", args...)
	} else {
		log.Debug("connection caps", args...)
	}
	return nil
}

// config is the netlimit configuration of listener l.
func (c *connFlags) config(l *listenerCap, m *netlimit.Metrics) netlimit.Config {
	return netlimit.Config{Name: l.name, Max: l.max, MaxPerIP: c.perIP, Metrics: m}
}

// cap is listener l's cap, for the server to fit (server.Conns).
func (c *connFlags) cap(l *listenerCap) netlimit.Cap {
	return netlimit.Cap{Name: "--" + l.flag, Max: l.max, Set: c.fl.Changed(l.flag)}
}
