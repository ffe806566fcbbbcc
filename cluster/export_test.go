package cluster

// WithExitHook returns cfg with f called instead of os.Exit when the node
// would end the process because its Raft log cannot be written.
func WithExitHook(cfg Config, f func(code int)) Config {
	cfg.exit = f
	return cfg
}
