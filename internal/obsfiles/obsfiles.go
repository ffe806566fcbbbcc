// Package obsfiles reads the chart's alert rules and Grafana dashboard
// (charts/idemnode/files), for the tests that hold them against a node's
// real metrics and a real Prometheus.
package obsfiles

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"

	"sigs.k8s.io/yaml"
)

// metricName matches the metric names the rules and the dashboard use:
// ours, and the Go and process collectors'.
var metricName = regexp.MustCompile(`\b(?:idemnode|go|process)_[a-z0-9_]+\b`)

// MetricNames returns the metric names text uses, sorted, each once.
func MetricNames(text string) []string {
	return slices.Compact(slices.Sorted(slices.Values(metricName.FindAllString(text, -1))))
}

// Rule is one alerting rule of alerts.yaml.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Annotations map[string]string `json:"annotations"`
}

// Rules returns every rule of the rule file at path, in order.
func Rules(path string) ([]Rule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file struct {
		Groups []struct {
			Rules []Rule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var rules []Rule
	for _, g := range file.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("%s holds no rules", path)
	}
	return rules, nil
}

// Panel is a panel of a dashboard; a row's nested panels are panels of
// their own.
type Panel struct {
	Title   string   `json:"title"`
	Type    string   `json:"type"`
	Targets []Target `json:"targets"`
	Panels  []Panel  `json:"panels"`
}

// Target is one query of a panel.
type Target struct {
	Expr         string `json:"expr"`
	RefID        string `json:"refId"`
	LegendFormat string `json:"legendFormat"`
}

// Variable is one of a dashboard's template variables.
type Variable struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Query is what a "query" variable asks its data source, e.g.
	// label_values(metric{matchers}, label).
	Query string `json:"query"`
}

// dashboard is the part of a dashboard the tests read.
type dashboard struct {
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

func readDashboard(path string) (dashboard, error) {
	var d dashboard
	b, err := os.ReadFile(path)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// Variables returns the template variables of the dashboard at path.
func Variables(path string) ([]Variable, error) {
	d, err := readDashboard(path)
	return d.Templating.List, err
}

// Panels returns every panel of the dashboard at path, rows' nested ones
// included, in order.
func Panels(path string) ([]Panel, error) {
	d, err := readDashboard(path)
	if err != nil {
		return nil, err
	}
	var out []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out, nil
}
