package main

import (
	"slices"
	"time"
)

// latencies summarises a sample the way bench-peers does: nearest-rank
// percentiles in ms. Sorting every sample is fine at the few hundred
// thousand requests one run produces.
type latencies struct {
	p50, p90, p99, p999, max, mean float64
}

func summarise(d []time.Duration) latencies {
	if len(d) == 0 {
		return latencies{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	return latencies{
		p50: percentile(s, .5), p90: percentile(s, .9), p99: percentile(s, .99), p999: percentile(s, .999),
		max: ms(s[len(s)-1]), mean: round3(ms(sum / time.Duration(len(s)))),
	}
}

// percentile returns the q-quantile (0..1) of sorted latencies in ms, by
// nearest rank: the smallest value with at least q of the sample at or below it.
func percentile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	i = max(0, min(i, len(sorted)-1))
	return ms(sorted[i])
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }
func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }
func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }
