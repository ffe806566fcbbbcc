package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/idemnode/idemnode/jepsen/history"
)

// Availability is reported beside the anomalies and never fails a run.
type Availability struct {
	// Phases: before the first fault, then during and after each fault
	// (after lasts until the next fault starts).
	Phases []Phase
	// Recoveries: per fault, the time to the first successful write.
	Recoveries []Recovery
}

// Phase counts the client operations that completed within [Start, End)
// (times in ns since the run began).
type Phase struct {
	Name       string
	Start, End int64
	// Ops counts completions (ok, fail, info); OK those the server answered.
	Ops, OK int
}

// OpsPerSecond is the completion rate of the phase.
func (p Phase) OpsPerSecond() float64 {
	if p.End <= p.Start {
		return 0
	}
	return float64(p.Ops) / (float64(p.End-p.Start) / 1e9)
}

// SuccessRate is OK / Ops (0 when nothing completed).
func (p Phase) SuccessRate() float64 {
	if p.Ops == 0 {
		return 0
	}
	return float64(p.OK) / float64(p.Ops)
}

// Recovery measures one fault: for leader faults (kill-leader,
// partition-leader …) the time until a new leader accepted a write.
type Recovery struct {
	Fault string
	Start int64
	// FirstWrite is the time from the fault start to the completion of the
	// first successful write (claim WON or complete OK) invoked after it;
	// valid when Found.
	FirstWrite time.Duration
	Found      bool
}

// interval is one fault occurrence.
type interval struct {
	name       string
	start, end int64
}

// faultIntervals pairs starts and ends by name, in order; a fault that
// never ended lasts until end.
func faultIntervals(faults []history.Fault, end int64) []interval {
	sorted := append([]history.Fault(nil), faults...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Time < sorted[j].Time })
	var out []interval
	open := map[string][]int{}
	for _, f := range sorted {
		switch f.Phase {
		case history.FaultStart:
			open[f.Name] = append(open[f.Name], len(out))
			out = append(out, interval{name: f.Name, start: f.Time, end: end})
		case history.FaultEnd:
			if q := open[f.Name]; len(q) > 0 {
				out[q[0]].end = f.Time
				open[f.Name] = q[1:]
			}
		}
	}
	return out
}

func availability(h *parsed, faults []history.Fault) Availability {
	var done []*op
	start, end := int64(-1), int64(0)
	for _, o := range h.ops {
		if start < 0 || o.call < start {
			start = o.call
		}
		if !o.open {
			done = append(done, o)
			end = max(end, o.done.Time)
		}
	}
	if start < 0 {
		return Availability{}
	}
	ivs := faultIntervals(faults, end)
	var a Availability
	if len(ivs) == 0 {
		a.Phases = append(a.Phases, phase("whole run", start, end+1, done))
		return a
	}
	a.Phases = append(a.Phases, phase("before faults", start, ivs[0].start, done))
	for i, iv := range ivs {
		name := fmt.Sprintf("%s #%d", iv.name, i+1)
		a.Phases = append(a.Phases, phase("during "+name, iv.start, iv.end, done))
		next := end + 1
		for _, later := range ivs[i+1:] {
			if later.start >= iv.end {
				next = later.start
				break
			}
		}
		if next > iv.end {
			a.Phases = append(a.Phases, phase("after "+name, iv.end, next, done))
		}
		a.Recoveries = append(a.Recoveries, recovery(name, iv.start, done))
	}
	return a
}

func phase(name string, start, end int64, done []*op) Phase {
	p := Phase{Name: name, Start: start, End: end}
	for _, o := range done {
		if t := o.done.Time; t >= start && t < end {
			p.Ops++
			if o.answered() {
				p.OK++
			}
		}
	}
	return p
}

func recovery(name string, start int64, done []*op) Recovery {
	r := Recovery{Fault: name, Start: start}
	for _, o := range done {
		write := o.ev.F == history.FClaim && o.is(outWon) || o.ev.F == history.FComplete && o.is(outOK)
		if !write || o.call < start {
			continue
		}
		if d := time.Duration(o.done.Time - start); !r.Found || d < r.FirstWrite {
			r.FirstWrite, r.Found = d, true
		}
	}
	return r
}

func (a Availability) write(b *strings.Builder) {
	if len(a.Phases) == 0 {
		return
	}
	b.WriteString("availability (never failing):\n")
	for _, p := range a.Phases {
		fmt.Fprintf(b, "  %-32s %8.3fs–%8.3fs  %6d ops  %8.1f ops/s  %5.1f%% ok\n", p.Name,
			float64(p.Start)/1e9, float64(p.End)/1e9, p.Ops, p.OpsPerSecond(), 100*p.SuccessRate())
	}
	if len(a.Recoveries) > 0 {
		b.WriteString("first successful write after each fault start (time to a new leader for leader faults):\n")
	}
	for _, r := range a.Recoveries {
		if r.Found {
			fmt.Fprintf(b, "  %-32s %s\n", r.Fault, r.FirstWrite.Round(time.Millisecond))
		} else {
			fmt.Fprintf(b, "  %-32s none\n", r.Fault)
		}
	}
}
