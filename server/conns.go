package server

import (
	"errors"
	"log/slog"

	"github.com/idemnode/idemnode/internal/netlimit"
)

// listenerCaps are the netlimit configurations of the client listeners.
type listenerCaps struct{ grpc, api, http netlimit.Config }

// fitConns sizes the caps of the server's client listeners that are on
// to the open-file limit (netlimit.FitListeners); caps that cannot fit
// are a *ConfigError.
func (c *Config) fitConns(m *netlimit.Metrics, log *slog.Logger) (listenerCaps, error) {
	out, err := netlimit.FitListeners([]netlimit.ListenCap{
		{Name: "grpc", Cap: c.Conns.GRPC, On: true},
		{Name: "api", Cap: c.Conns.API, On: c.APIAddr != ""},
		{Name: "http", Cap: c.Conns.HTTP, On: c.HTTPAddr != ""},
	}, c.Conns.MaxPerIP, c.Conns.FDReserve, m, log)
	if caps := (*netlimit.CapsError)(nil); errors.As(err, &caps) {
		return listenerCaps{}, configError(err)
	}
	if err != nil {
		return listenerCaps{}, err
	}
	return listenerCaps{grpc: out[0], api: out[1], http: out[2]}, nil
}
