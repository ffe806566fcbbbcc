package client

import "time"

// Option tunes one Claim or Do call: WithLease, WithTTL, WithWait,
// WithOwner, and for Do WithClassifier. What an option leaves unset takes
// the Config default (Claim does not wait unless asked; Do waits
// Config.Wait).
type Option interface{ apply(*callOptions) }

// DoOption is the former name of Option, kept so that code written for it
// compiles.
//
// Deprecated: use Option.
type DoOption = Option

// callOptions are the settings of one Claim or Do.
type callOptions struct {
	lease, ttl, wait time.Duration
	owner            string
	classify         Classifier
}

type optionFunc func(*callOptions)

func (f optionFunc) apply(o *callOptions) { f(o) }

// WithLease sets the lease of the claim (server limits 1s-1h): how long the
// holder is presumed alive. Do extends it every third of it while the
// function runs.
func WithLease(d time.Duration) Option { return optionFunc(func(o *callOptions) { o.lease = d }) }

// WithTTL sets how long the record is kept (server limits 1min-30 days).
func WithTTL(d time.Duration) Option { return optionFunc(func(o *callOptions) { o.ttl = d }) }

// WithWait sets how long the server holds a claim that finds the key in
// progress, until the record leaves PENDING: the answer is then the
// completion, or WON when the holder released the key or its lease ran
// out. When the wait ends first, Claim answers IN_PROGRESS and Do returns
// an *InProgressError. It is cut short to answer before ctx's deadline;
// zero or negative does not wait.
func WithWait(d time.Duration) Option {
	return optionFunc(func(o *callOptions) { o.wait = max(d, 0) })
}

// WithOwner sets the claim attempt's nonce instead of a generated one.
// Pass the owner of an earlier claim (ClaimResult.Owner) to resume it
// across processes: the server answers WON with the same token.
func WithOwner(owner string) Option { return optionFunc(func(o *callOptions) { o.owner = owner }) }

// WithClassifier replaces DefaultClassifier in Do; Claim ignores it.
func WithClassifier(f Classifier) Option { return optionFunc(func(o *callOptions) { o.classify = f }) }

// ClaimOptions tune one Claim; zero values take the Config defaults. It is
// an Option, so code that passes one to Claim keeps compiling.
//
// Deprecated: use WithLease, WithTTL, WithWait and WithOwner.
type ClaimOptions struct {
	Lease time.Duration
	TTL   time.Duration
	Wait  time.Duration
	Owner string
}

func (c ClaimOptions) apply(o *callOptions) {
	if c.Lease > 0 {
		o.lease = c.Lease
	}
	if c.TTL > 0 {
		o.ttl = c.TTL
	}
	if c.Wait > 0 {
		o.wait = c.Wait
	}
	if c.Owner != "" {
		o.owner = c.Owner
	}
}

// options applies opts over the defaults of a call that waits wait unless
// told otherwise.
func (c *Client) options(wait time.Duration, opts []Option) callOptions {
	o := callOptions{wait: wait, classify: DefaultClassifier}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	o.lease, o.ttl = or(o.lease, c.cfg.Lease), or(o.ttl, c.cfg.TTL)
	if o.classify == nil {
		o.classify = DefaultClassifier
	}
	if o.owner == "" {
		o.owner = newOwner()
	}
	return o
}
