package server

import (
	"log/slog"

	"github.com/idemnode/idemnode/internal/netlimit"
)

// listenerCaps are the netlimit configurations of the client listeners.
type listenerCaps struct{ grpc, api, http netlimit.Config }

// fitConns sizes the caps of the server's client listeners that are on
// (FitConns).
func (c *Config) fitConns(m *netlimit.Metrics, log *slog.Logger) (listenerCaps, error) {
	out, err := FitConns([]Listener{
		{Name: "grpc", Cap: c.Conns.GRPC, On: true},
		{Name: "api", Cap: c.Conns.API, On: c.APIAddr != ""},
		{Name: "http", Cap: c.Conns.HTTP, On: c.HTTPAddr != ""},
	}, c.Conns.MaxPerIP, c.Conns.FDReserve, m, log)
	if err != nil {
		return listenerCaps{}, err
	}
	return listenerCaps{grpc: out[0], api: out[1], http: out[2]}, nil
}

// Listener is one client listener whose connections FitConns caps.
type Listener struct {
	// Name is the listener's metrics label.
	Name string
	// Cap is its cap before it is fitted.
	Cap netlimit.Cap
	// On says the listener is served; a listener that is off takes no
	// share of the descriptors.
	On bool
}

// FitConns sizes the caps of the listeners that are on to the process's
// open-file limit (netlimit.Fit), leaving fdReserve descriptors (0: the
// default) to the process, and returns each listener's netlimit
// configuration, in order. The server and the proxy both fit their
// listeners with it. A descriptor limit it cannot read is a failure at
// run time; caps given that do not fit are a *ConfigError.
func FitConns(ls []Listener, perIP, fdReserve int, m *netlimit.Metrics, log *slog.Logger) ([]netlimit.Config, error) {
	limit, err := netlimit.DescriptorLimit()
	if err != nil {
		return nil, err
	}
	reserve := fdReserve
	if reserve == 0 {
		reserve = netlimit.DefaultReserve(limit)
	}
	out := make([]netlimit.Config, len(ls))
	var on []int
	var caps []netlimit.Cap
	for i, l := range ls {
		out[i] = netlimit.Config{Name: l.Name, Max: l.Cap.Max, MaxPerIP: perIP, Metrics: m}
		if l.On {
			on = append(on, i)
			caps = append(caps, l.Cap)
		}
	}
	fitted, lowered, err := netlimit.Fit(limit, reserve, caps)
	if err != nil {
		return nil, configError(err)
	}
	args := []any{"open_files", limit, "reserve", reserve}
	for j, i := range on {
		out[i].Max = fitted[j]
		args = append(args, ls[i].Name, fitted[j])
	}
	if lowered {
		log.Warn("connection caps lowered to fit the open-file limit", args...)
	} else {
		log.Debug("connection caps", args...)
	}
	return out, nil
}
