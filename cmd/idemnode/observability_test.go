package main

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// metricName matches the metric names the alert rules and the dashboard
// use: ours, and the Go and process collectors'.
var metricName = regexp.MustCompile(`\b(?:idemnode|go|process)_[a-z0-9_]+\b`)

// selector matches a metric with its label matchers; labelName, each
// matcher's (or an exported series') label name.
var (
	selector  = regexp.MustCompile(`\b((?:idemnode|go|process)_[a-z0-9_]+)\{([^}]*)\}`)
	labelName = regexp.MustCompile(`([a-z_]+)\s*(?:=~|!~|!=|=)`)
)

// targetLabels are the labels Prometheus gives every series of a target.
var targetLabels = map[string]bool{"job": true, "instance": true, "cluster": true, "namespace": true, "service": true}

// TestDashboardAndAlertMetricsExist: every metric name that
// charts/idemnode/files/alerts.yaml and dashboard.json use is on the
// /metrics of a node of a 3-node cluster after a small workload, or of a
// node with TLS (the certificates' series), so renaming a metric breaks
// this test rather than an operator's dashboard.
func TestDashboardAndAlertMetricsExist(t *testing.T) {
	t.Parallel()
	nodes := mustCluster(t, "--tenant-max-keys", "1000", "--tenant-max-bytes", "1000000")
	p := newServePKI(t)
	secured := mustServerWith(t, p.serveFlags(), p.clientFlags)

	// Through every node (followers forward), for two tenants; one is
	// completed, so replays and completes are counted too.
	var won claimJSON
	for i, n := range nodes {
		for _, tenant := range []string{"a", "b"} {
			key := "obs-" + strconv.Itoa(i)
			n.cliJSON(0, &won, "claim", "--key", key, "--tenant", tenant, "--fingerprint", "aa", "--owner", "o")
			n.cliJSON(0, &won, "complete", "--key", key, "--tenant", tenant, "--token", strconv.FormatUint(won.Token, 10))
		}
	}
	exported := map[string]bool{}
	labels := map[string]bool{} // "metric label"
	for _, n := range append(nodes, secured) {
		for series := range scrape(t, n) {
			name, rest, _ := strings.Cut(series, "{")
			exported[name] = true
			for _, m := range labelName.FindAllStringSubmatch(rest, -1) {
				labels[name+" "+m[1]] = true
			}
		}
	}
	for _, file := range []string{"alerts.yaml", "dashboard.json"} {
		b, err := os.ReadFile("../../charts/idemnode/files/" + file)
		if err != nil {
			t.Fatal(err)
		}
		names := slices.Compact(slices.Sorted(slices.Values(metricName.FindAllString(string(b), -1))))
		if len(names) < 10 {
			t.Fatalf("%s uses only %d metric names: %v", file, len(names), names)
		}
		for _, name := range names {
			// A histogram's own name, as descriptions cite it, is
			// exported as its _bucket, _sum and _count.
			if !exported[name] && !exported[name+"_count"] {
				t.Errorf("%s uses %s, which no node exports", file, name)
			}
		}
		// The labels a selector names: target labels are Prometheus's.
		for _, sel := range selector.FindAllStringSubmatch(string(b), -1) {
			for _, m := range labelName.FindAllStringSubmatch(sel[2], -1) {
				if !targetLabels[m[1]] && !labels[sel[1]+" "+m[1]] {
					t.Errorf("%s selects %s by label %q, which no node exports on it", file, sel[1], m[1])
				}
			}
		}
	}
}
