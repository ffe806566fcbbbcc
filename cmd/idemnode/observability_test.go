package main

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idemnode/idemnode/internal/obsfiles"
)

// selector matches a metric with its label matchers; labelName, each
// matcher's (or an exported series') label name.
var (
	selector  = regexp.MustCompile(`\b((?:idemnode|go|process)_[a-z0-9_]+)\{([^}]*)\}`)
	labelName = regexp.MustCompile(`([a-z_]+)\s*(?:=~|!~|!=|=)`)
)

// targetLabels are the labels Prometheus gives every series of a target.
var targetLabels = map[string]bool{"job": true, "instance": true, "cluster": true, "namespace": true, "service": true}

// The labels an expression aggregates or matches by, and those its alert's
// annotations or its panel's legend print.
var (
	groupingLabels  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	annotationLabel = regexp.MustCompile(`\$labels\.([a-z_]+)`)
	legendLabel     = regexp.MustCompile(`\{\{\s*([a-z_]+)\s*\}\}`)
	// labelReplace matches label_replace's last four arguments: the label
	// it makes, the replacement, the label it reads, the regex.
	labelReplace = regexp.MustCompile(`"([a-z_]+)"\s*,\s*"[^"]*"\s*,\s*"([a-z_]*)"\s*,\s*"[^"]*"\s*\)`)
)

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
		names := obsfiles.MetricNames(string(b))
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
	checkUsedLabels(t, labels)
}

// usedLabels are the labels one alert rule or one dashboard target uses
// beyond its selectors, and the metrics it reads.
type usedLabels struct {
	where   string
	metrics []string
	labels  []string
}

// checkUsedLabels: every label an alert or a panel groups by, matches on,
// prints in an annotation or a legend, or makes with label_replace is a
// target label, a histogram's le, or exported by one of the metrics that
// rule or target reads, so renaming a label breaks this test too.
func checkUsedLabels(t *testing.T, labels map[string]bool) {
	t.Helper()
	uses := append(alertLabelUses(t), dashboardLabelUses(t)...)
	if len(uses) < 40 {
		t.Fatalf("only %d rules and targets found", len(uses))
	}
	for _, u := range uses {
		for _, label := range u.labels {
			if targetLabels[label] || label == "le" || label == "" {
				continue
			}
			found := false
			for _, m := range u.metrics {
				for _, name := range []string{m, m + "_bucket", m + "_count"} {
					found = found || labels[name+" "+label]
				}
			}
			if !found {
				t.Errorf("%s uses label %q, which none of its metrics %v exports", u.where, label, u.metrics)
			}
		}
	}
}

func labelUse(where, expr string, template *regexp.Regexp, texts ...string) usedLabels {
	u := usedLabels{where: where, metrics: obsfiles.MetricNames(expr)}
	for _, m := range groupingLabels.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			u.labels = append(u.labels, strings.TrimSpace(l))
		}
	}
	for _, text := range texts {
		for _, m := range template.FindAllStringSubmatch(text, -1) {
			u.labels = append(u.labels, m[1])
		}
	}
	// label_replace(v, "dst", "replacement", "src", "regex") reads src and
	// makes dst, which later groupings may use.
	made := map[string]bool{}
	for _, m := range labelReplace.FindAllStringSubmatch(expr, -1) {
		made[m[1]] = true
		u.labels = append(u.labels, m[2])
	}
	u.labels = slices.DeleteFunc(u.labels, func(l string) bool { return made[l] })
	return u
}

func alertLabelUses(t *testing.T) []usedLabels {
	t.Helper()
	rules, err := obsfiles.Rules("../../charts/idemnode/files/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []usedLabels
	for _, r := range rules {
		out = append(out, labelUse("alert "+r.Alert, r.Expr, annotationLabel, r.Annotations["summary"], r.Annotations["description"]))
	}
	return out
}

func dashboardLabelUses(t *testing.T) []usedLabels {
	t.Helper()
	panels, err := obsfiles.Panels("../../charts/idemnode/files/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var out []usedLabels
	for _, p := range panels {
		for _, tg := range p.Targets {
			out = append(out, labelUse("panel "+strconv.Quote(p.Title), tg.Expr, legendLabel, tg.LegendFormat))
		}
	}
	return out
}
