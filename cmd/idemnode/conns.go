package main

import (
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
	fl          *pflag.FlagSet
}

// listenerCap is one listener's --*-max-conns flag.
type listenerCap struct {
	flag string
	max  int
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

// listener registers the cap flag of a listener and returns it.
func (c *connFlags) listener(flag string, max int, help string) *listenerCap {
	l := &listenerCap{flag: flag, max: max}
	c.fl.IntVar(&l.max, flag, max, help+"; lowered to fit the open-file limit unless given")
	return l
}

// cap is listener l's cap, for the server or the proxy to fit
// (netlimit.FitListeners).
func (c *connFlags) cap(l *listenerCap) netlimit.Cap {
	return netlimit.Cap{Name: "--" + l.flag, Max: l.max, Set: c.fl.Changed(l.flag)}
}
