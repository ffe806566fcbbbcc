package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// tableRow is the part of a result line (ours or a bench-peers target's)
// that the comparison table needs.
type tableRow struct {
	Target         string  `json:"target"`
	Mode           string  `json:"mode"`
	Clients        int     `json:"clients"`
	OpsPerSec      float64 `json:"ops_per_s"`
	P50            float64 `json:"p50_ms"`
	P99            float64 `json:"p99_ms"`
	Errors         int64   `json:"errors"`
	UnexpectedLost int64   `json:"unexpected_lost"`
	CASFailed      int64   `json:"cas_failed"`
	RaceViolations int64   `json:"race_violations"`
	RaceVerifyBad  int     `json:"race_verify_bad"`
	CPU            struct {
		ServerCores float64 `json:"server_cores"`
	} `json:"cpu"`
}

// cpuPerRequest is the servers' CPU time per request answered, in µs: the
// cores they used over the measured window over the requests per second.
// Zero when the run measured no server process.
func (r *tableRow) cpuPerRequest() float64 {
	if r.OpsPerSec <= 0 {
		return 0
	}
	return 1e6 * r.CPU.ServerCores / r.OpsPerSec
}

type cell struct {
	mode    string
	clients int
}

// writeTable prints, per (mode, clients) and peer target, idemnode's and the
// peer's throughput, latency and server CPU per request, and their ratio. Several runs of one target
// in one cell are reduced to the median run by ops/s.
func writeTable(w io.Writer, files []string) error {
	rows, err := readRows(files)
	if err != nil {
		return err
	}
	var cells []cell
	runs := map[cell]map[string][]tableRow{}
	var peers []string
	for _, r := range rows {
		c := cell{r.Mode, r.Clients}
		if runs[c] == nil {
			cells = append(cells, c)
			runs[c] = map[string][]tableRow{}
		}
		runs[c][r.Target] = append(runs[c][r.Target], r)
		if r.Target != "idemnode" && !slices.Contains(peers, r.Target) {
			peers = append(peers, r.Target)
		}
	}
	if len(peers) == 0 {
		peers = []string{"(no peer)"}
	}
	fmt.Fprintln(w, "| mode | clients | idemnode ops/s | p50 ms | p99 ms | server CPU µs/req | peer | peer ops/s | p50 ms | p99 ms | server CPU µs/req | ops/s idemnode/peer | p99 no worse | anomalies |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---|")
	several := false
	for _, c := range cells {
		idem, nIdem := median(runs[c]["idemnode"])
		for _, peer := range peers {
			other, nPeer := median(runs[c][peer])
			several = several || nIdem > 1 || nPeer > 1
			fmt.Fprintln(w, tableLine(c, idem, peer, other))
		}
	}
	if several {
		fmt.Fprintln(w, "\nWhere a cell had several runs of a target, the median run by ops/s is shown.")
	}
	return nil
}

func tableLine(c cell, idem *tableRow, peer string, other *tableRow) string {
	col := func(r *tableRow) string {
		if r == nil {
			return "– | – | – | –"
		}
		cpu := "–"
		if c := r.cpuPerRequest(); c > 0 {
			cpu = fmt.Sprintf("%.1f", c)
		}
		return fmt.Sprintf("%.0f | %.2f | %.2f | %s", r.OpsPerSec, r.P50, r.P99, cpu)
	}
	ratio, noWorse := "–", "–"
	if idem != nil && other != nil && other.OpsPerSec > 0 {
		ratio = fmt.Sprintf("%.2f", idem.OpsPerSec/other.OpsPerSec)
		noWorse = "no"
		if idem.P99 <= other.P99 {
			noWorse = "yes"
		}
	}
	return fmt.Sprintf("| %s | %d | %s | %s | %s | %s | %s | %s |", c.mode, c.clients, col(idem), peer, col(other),
		ratio, noWorse, anomalies(idem, other, peer))
}

// anomalies names what should have been zero in either run.
func anomalies(idem, other *tableRow, peer string) string {
	var out []string
	for _, x := range []struct {
		name string
		r    *tableRow
	}{{"idemnode", idem}, {peer, other}} {
		if x.r == nil {
			continue
		}
		for _, a := range []struct {
			what string
			n    int64
		}{{"errors", x.r.Errors}, {"unexpected lost", x.r.UnexpectedLost}, {"cas failed", x.r.CASFailed},
			{"race violations", x.r.RaceViolations}, {"race verify bad", int64(x.r.RaceVerifyBad)}} {
			if a.n > 0 {
				out = append(out, fmt.Sprintf("%s %s %d", x.name, a.what, a.n))
			}
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// median returns the run with the median ops/s (the lower one of an even
// count) and how many runs there were.
func median(rs []tableRow) (*tableRow, int) {
	if len(rs) == 0 {
		return nil, 0
	}
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b tableRow) int {
		switch {
		case a.OpsPerSec < b.OpsPerSec:
			return -1
		case a.OpsPerSec > b.OpsPerSec:
			return 1
		}
		return 0
	})
	return &s[(len(s)-1)/2], len(s)
}

// readRows reads the result lines of all files; lines that are not JSON
// objects (a log line, a blank) are skipped, a broken JSON object is an error.
func readRows(files []string) ([]tableRow, error) {
	var rows []tableRow
	for _, name := range files {
		got, err := readResults[tableRow](name)
		if err != nil {
			return nil, err
		}
		rows = append(rows, got...)
	}
	return rows, nil
}

// readResults decodes the JSON objects of a results file into T, one per
// line, skipping the lines that are not objects.
func readResults[T any](name string) ([]T, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return out, nil
}
