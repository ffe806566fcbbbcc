package cluster

import "errors"

// WithExitHook returns cfg with f called, instead of the process ending,
// with the exit code idemnode serve gives a fault reported to OnFatal: 3
// for a storage fault (cmd/idemnode), 1 for anything else.
func WithExitHook(cfg Config, f func(code int)) Config {
	cfg.OnFatal = func(err error) {
		code := 1
		if errors.Is(err, ErrStorageFault) {
			code = 3
		}
		f(code)
	}
	return cfg
}
