package server

import (
	"log/slog"

	"github.com/idemnode/idemnode/internal/netlimit"
)

// listenerCaps are the netlimit configurations of the client listeners.
type listenerCaps struct{ grpc, api, http netlimit.Config }

// fitConns sizes the caps of the listeners that are on to the process's
// open-file limit (netlimit.Fit). A descriptor limit it cannot read is a
// failure at run time; caps given that do not fit are a configuration
// error.
func (c *Config) fitConns(m *netlimit.Metrics, log *slog.Logger) (listenerCaps, error) {
	limit, err := netlimit.DescriptorLimit()
	if err != nil {
		return listenerCaps{}, err
	}
	reserve := c.Conns.FDReserve
	if reserve == 0 {
		reserve = netlimit.DefaultReserve(limit)
	}
	type listener struct {
		name string
		cap  netlimit.Cap
		out  *netlimit.Config
	}
	var out listenerCaps
	var on []listener
	for _, l := range []listener{{"grpc", c.Conns.GRPC, &out.grpc}, {"api", c.Conns.API, &out.api}, {"http", c.Conns.HTTP, &out.http}} {
		*l.out = netlimit.Config{Name: l.name, Max: l.cap.Max, MaxPerIP: c.Conns.MaxPerIP, Metrics: m}
		if l.name == "grpc" || l.name == "api" && c.APIAddr != "" || l.name == "http" && c.HTTPAddr != "" {
			on = append(on, l)
		}
	}
	caps := make([]netlimit.Cap, len(on))
	for i, l := range on {
		caps[i] = l.cap
	}
	fitted, lowered, err := netlimit.Fit(limit, reserve, caps)
	if err != nil {
		return listenerCaps{}, configError(err)
	}
	args := []any{"open_files", limit, "reserve", reserve}
	for i, l := range on {
		l.out.Max = fitted[i]
		args = append(args, l.name, fitted[i])
	}
	if lowered {
		log.Warn("connection caps lowered to fit the open-file limit", args...)
	} else {
		log.Debug("connection caps", args...)
	}
	return out, nil
}
