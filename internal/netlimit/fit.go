package netlimit

import "log/slog"

// ListenCap is the cap of one client listener, for FitListeners.
type ListenCap struct {
	// Name is the listener's metrics label.
	Name string
	// Cap is its cap before it is fitted.
	Cap Cap
	// On says the listener is served; a listener that is off takes no
	// share of the descriptors.
	On bool
}

// CapsError is caps given that cannot fit the open-file limit: the
// caller's input, which the server and the proxy refuse as configuration.
type CapsError struct{ Err error }

func (e *CapsError) Error() string { return e.Err.Error() }
func (e *CapsError) Unwrap() error { return e.Err }

// FitListeners sizes the caps of the listeners that are on to the
// process's open-file limit (Fit), leaving fdReserve descriptors (0: the
// default) to the process, and returns each listener's configuration, in
// order. The server and the proxy both fit their listeners with it. A
// descriptor limit it cannot read is a failure at run time; caps that do
// not fit are a *CapsError.
func FitListeners(ls []ListenCap, perIP, fdReserve int, m *Metrics, log *slog.Logger) ([]Config, error) {
	limit, err := DescriptorLimit()
	if err != nil {
		return nil, err
	}
	reserve := fdReserve
	if reserve == 0 {
		reserve = DefaultReserve(limit)
	}
	out := make([]Config, len(ls))
	var on []int
	var caps []Cap
	for i, l := range ls {
		out[i] = Config{Name: l.Name, Max: l.Cap.Max, MaxPerIP: perIP, Metrics: m}
		if l.On {
			on = append(on, i)
			caps = append(caps, l.Cap)
		}
	}
	fitted, lowered, err := Fit(limit, reserve, caps)
	if err != nil {
		return nil, &CapsError{Err: err}
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
