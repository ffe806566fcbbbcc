package charts_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const defaultRunbooks = "https://github.com/idemnode/idemnode/blob/main/docs/OPERATIONS.md"

// readRuleFile decodes files/alerts.yaml strictly, as a rules file.
func readRuleFile(t *testing.T) (ruleFile, string) {
	t.Helper()
	b, err := os.ReadFile("idemnode/files/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	return f, string(b)
}

// TestPrometheusRule: the PrometheusRule holds the rules file's groups
// exactly, Prometheus's templates intact, with only the runbook base URL
// replaced; every alert has the annotations and severity an on-call
// engineer needs; nothing renders while it is off.
func TestPrometheusRule(t *testing.T) {
	if m := render(t); m.rule != nil || m.dashboard != nil {
		t.Fatalf("PrometheusRule or dashboard rendered while off by default: %v", m.kinds)
	}
	file, text := readRuleFile(t)
	if !strings.Contains(text, "{{ $labels.") {
		t.Fatal("alerts.yaml uses no {{ $labels }}: this test could not tell whether the chart mangles them")
	}
	m := render(t, "prometheusRule.enabled=true", "prometheusRule.labels.release=prom")
	if m.rule == nil || m.rule.Labels["release"] != "prom" || m.rule.Name != fullname {
		t.Fatalf("PrometheusRule: %+v", m.rule)
	}
	if !reflect.DeepEqual(m.rule.Spec, file) {
		t.Error("the PrometheusRule's groups differ from alerts.yaml")
	}
	alerts := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			a := r.Annotations
			if a["summary"] == "" || a["description"] == "" || (r.Labels["severity"] != "critical" && r.Labels["severity"] != "warning") {
				t.Errorf("%s: want a summary, a description and severity critical or warning: %v %v", r.Alert, a, r.Labels)
			}
			if want := defaultRunbooks + "#" + strings.ToLower(r.Alert); a["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, a["runbook_url"], want)
			}
		}
	}
	if alerts < 10 {
		t.Errorf("%d alerts, want the ten kinds the chart documents", alerts)
	}

	m = render(t, "prometheusRule.enabled=true", "prometheusRule.runbookBaseURL=https://wiki.example/idemnode/")
	for _, g := range m.rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && r.Annotations["runbook_url"] != "https://wiki.example/idemnode#"+strings.ToLower(r.Alert) {
				t.Errorf("%s: runbook_url %q with runbookBaseURL set", r.Alert, r.Annotations["runbook_url"])
			}
		}
	}
}

// TestRunbooksExist: every alert's runbook anchor is a heading in
// docs/OPERATIONS.md.
func TestRunbooksExist(t *testing.T) {
	file, _ := readRuleFile(t)
	b, err := os.ReadFile("../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && !strings.Contains(string(b), "\n### "+r.Alert+"\n") {
				t.Errorf("docs/OPERATIONS.md has no heading \"### %s\"", r.Alert)
			}
		}
	}
}

// TestGrafanaDashboardConfigMap: the ConfigMap carries the dashboard
// byte for byte, with the sidecar's label, in the namespace asked for.
func TestGrafanaDashboardConfigMap(t *testing.T) {
	want, err := os.ReadFile("idemnode/files/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	m := render(t, "grafanaDashboard.enabled=true", "grafanaDashboard.annotations.grafana_folder=Payments")
	cm := m.dashboard
	if cm == nil {
		t.Fatalf("no dashboard ConfigMap: %v", m.kinds)
	}
	if cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "Payments" || cm.Namespace != ns {
		t.Errorf("dashboard ConfigMap labels %v, annotations %v, namespace %q", cm.Labels, cm.Annotations, cm.Namespace)
	}
	got := cm.Data["idemnode.json"]
	if strings.TrimSpace(got) != strings.TrimSpace(string(want)) {
		t.Error("the ConfigMap's idemnode.json differs from files/dashboard.json")
	}
	var d struct {
		UID           string `json:"uid"`
		SchemaVersion int    `json:"schemaVersion"`
		Templating    struct {
			List []struct {
				Name string `json:"name"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal([]byte(got), &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	// The schema the dashboard is written in, pinned: Grafana migrates an
	// older one on load, and a change of it is a change to review.
	const schemaVersion = 41
	if d.UID == "" || d.SchemaVersion != schemaVersion || !reflect.DeepEqual(vars, []string{"datasource", "cluster", "namespace"}) {
		t.Errorf("dashboard uid %q, schemaVersion %d, variables %v", d.UID, d.SchemaVersion, vars)
	}

	if m := render(t, "grafanaDashboard.enabled=true", "grafanaDashboard.namespace=monitoring"); m.dashboard.Namespace != "monitoring" {
		t.Errorf("grafanaDashboard.namespace: ConfigMap in %q", m.dashboard.Namespace)
	}
}
