package main

import (
	"fmt"
	"strings"
)

// Result is the JSON line, field for field bench-peers' (its README.md,
// "Output"), so one table can hold idemnode and its peers. Latencies are per
// logical request in ms: one Claim in claim and race mode, Claim plus
// Complete in claim+complete mode.
type Result struct {
	Time       string  `json:"time"`
	Target     string  `json:"target"`
	Label      string  `json:"label,omitempty"`
	Mode       string  `json:"mode"`
	Clients    int     `json:"clients"`
	DurationS  float64 `json:"duration_s"`
	WarmupS    float64 `json:"warmup_s"`
	Requests   int64   `json:"requests"`
	OpsPerSec  float64 `json:"ops_per_s"`       // logical requests per second
	StoreOpsPS float64 `json:"store_ops_per_s"` // Claim+Complete calls per second
	P50        float64 `json:"p50_ms"`
	P90        float64 `json:"p90_ms"`
	P99        float64 `json:"p99_ms"`
	P999       float64 `json:"p999_ms"`
	Max        float64 `json:"max_ms"`
	Mean       float64 `json:"mean_ms"`

	// claim+complete only: the two halves of a request.
	ClaimP50    float64 `json:"claim_p50_ms,omitempty"`
	ClaimP99    float64 `json:"claim_p99_ms,omitempty"`
	CompleteP50 float64 `json:"complete_p50_ms,omitempty"`
	CompleteP99 float64 `json:"complete_p99_ms,omitempty"`

	Errors      int64  `json:"errors"`
	ErrorSample string `json:"error_sample,omitempty"`
	// A Claim of a fresh unique key that did not win, or our own Complete
	// after our own winning Claim that was not OK. Both should be 0.
	UnexpectedLost int64 `json:"unexpected_lost"`
	CASFailed      int64 `json:"cas_failed"`

	// race only
	RaceGroup         int     `json:"race_group,omitempty"`
	RaceKeys          int64   `json:"race_keys,omitempty"`
	RaceKeysPerSec    float64 `json:"race_keys_per_s,omitempty"`
	RaceViolations    int64   `json:"race_violations"`
	RaceIndeterminate int64   `json:"race_indeterminate"` // 0 winners but some claim errored
	RaceVerified      int     `json:"race_verified"`      // won keys read back after the run
	RaceVerifyBad     int     `json:"race_verify_bad"`    // stored record not the winner's

	CPU       CPUReport `json:"cpu"`
	Notes     string    `json:"notes"`
	Preflight string    `json:"preflight"`
	Go        string    `json:"go"`
}

// failed reports whether the run saw a safety violation (exit code 3).
func (r *Result) failed() bool { return r.RaceViolations > 0 || r.RaceVerifyBad > 0 }

// human is the one line on stderr.
func (r *Result) human() string {
	var b strings.Builder
	b.WriteString(r.Target)
	if r.Label != "" {
		fmt.Fprintf(&b, " [%s]", r.Label)
	}
	fmt.Fprintf(&b, " mode=%s clients=%d: %.0f req/s (%.0f store ops/s), p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.1f ms, errors %d",
		r.Mode, r.Clients, r.OpsPerSec, r.StoreOpsPS, r.P50, r.P90, r.P99, r.P999, r.Max, r.Errors)
	if r.UnexpectedLost+r.CASFailed > 0 {
		fmt.Fprintf(&b, ", unexpected lost %d, cas failed %d", r.UnexpectedLost, r.CASFailed)
	}
	if r.Mode == modeRace {
		fmt.Fprintf(&b, ", race keys %d (%.0f/s), violations %d, indeterminate %d, verified %d (bad %d)",
			r.RaceKeys, r.RaceKeysPerSec, r.RaceViolations, r.RaceIndeterminate, r.RaceVerified, r.RaceVerifyBad)
	}
	fmt.Fprintf(&b, "; cpu: machine %.0f%% of %d cores, loadgen %.2f cores, servers %.2f cores, iowait %.0f%%, steal %.0f%%",
		r.CPU.MachineBusy, r.CPU.Cores, r.CPU.LoadgenCores, r.CPU.ServerCores, r.CPU.MachineIOWait, r.CPU.MachineSteal)
	return b.String()
}
