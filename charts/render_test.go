package charts_test

// Rendering the chart with helm and decoding it strictly; the assertions are
// in chart_test.go.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

const (
	chartDir = "idemnode"
	release  = "rel"
	ns       = "idem"
	// kubeVersion satisfies the chart's kubeVersion (helm template assumes
	// v1.20 otherwise).
	kubeVersion = "1.31.0"
	fullname    = release + "-idemnode"
	headless    = fullname + "-headless"
)

// helmPath finds helm on PATH or where `go install` puts it.
func helmPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	gopath := build.Default.GOPATH
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		gopath = strings.TrimSpace(string(out))
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", "helm")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("helm not found on PATH or in $(go env GOPATH)/bin: run scripts/helm-check.sh, which installs it and runs this test")
	return ""
}

// manifests is one render, decoded.
type manifests struct {
	sts       *appsv1.StatefulSet
	services  map[string]*corev1.Service
	configMap *corev1.ConfigMap
	// sidecar is the proxy sidecar's ConfigMap (proxySidecar.render).
	sidecar *corev1.ConfigMap
	pdb     *policyv1.PodDisruptionBudget
	sa      *corev1.ServiceAccount
	monitor *serviceMonitor
	rule    *prometheusRule
	// dashboard is the Grafana dashboard's ConfigMap (grafanaDashboard).
	dashboard *corev1.ConfigMap
	// certificates and issuers are the cert-manager objects
	// (tls.certManager), by name.
	certificates map[string]*certificate
	issuers      map[string]*issuer
	kinds        []string
	renderArgs   []string
}

// serviceMonitor is the part of the Prometheus Operator's
// monitoring.coreos.com/v1 ServiceMonitor that the chart uses; decoding is
// strict against it, so a field the chart adds must be declared here.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Scheme        string `json:"scheme"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
			Relabelings   []struct {
				TargetLabel string `json:"targetLabel"`
				Replacement string `json:"replacement"`
			} `json:"relabelings"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// prometheusRule is the Prometheus Operator's monitoring.coreos.com/v1
// PrometheusRule, as far as a rules file fills it; decoding is strict.
type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ruleFile `json:"spec"`
}

// ruleFile is a Prometheus rules file: what PrometheusRule's spec holds.
type ruleFile struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []struct {
			Alert       string            `json:"alert,omitempty"`
			Record      string            `json:"record,omitempty"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

// helmTemplate runs helm template with --set pairs and returns its output.
// An argument that starts with "--" is passed as it is (--set-json=…, whose
// numbers arrive as float64 like those of a values file).
func helmTemplate(t *testing.T, set ...string) (string, error) {
	t.Helper()
	args := []string{"template", release, chartDir, "--namespace", ns, "--kube-version", kubeVersion}
	for _, s := range set {
		if strings.HasPrefix(s, "--") {
			args = append(args, s)
			continue
		}
		args = append(args, "--set", s)
	}
	cmd := exec.Command(helmPath(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// render renders the chart and decodes every document strictly.
func render(t *testing.T, set ...string) *manifests {
	t.Helper()
	out, err := helmTemplate(t, set...)
	if err != nil {
		t.Fatal(err)
	}
	m := &manifests{services: map[string]*corev1.Service{}, certificates: map[string]*certificate{},
		issuers: map[string]*issuer{}, renderArgs: set}
	for _, doc := range docSep.Split(out, -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		js, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			t.Fatalf("%v: not valid YAML: %v\n%s", set, err, doc)
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(js, &tm); err != nil {
			t.Fatalf("%v: %v", set, err)
		}
		m.kinds = append(m.kinds, tm.Kind)
		want := map[string]string{
			"StatefulSet": "apps/v1", "Service": "v1", "ConfigMap": "v1", "ServiceAccount": "v1",
			"PodDisruptionBudget": "policy/v1", "ServiceMonitor": "monitoring.coreos.com/v1",
			"PrometheusRule": "monitoring.coreos.com/v1", "Certificate": "cert-manager.io/v1", "Issuer": "cert-manager.io/v1",
		}[tm.Kind]
		if want == "" || tm.APIVersion != want {
			t.Fatalf("%v: unexpected %s %s", set, tm.APIVersion, tm.Kind)
		}
		var obj interface{ GetNamespace() string }
		switch tm.Kind {
		case "StatefulSet":
			m.sts = &appsv1.StatefulSet{}
			obj = m.sts
		case "Service":
			obj = &corev1.Service{}
		case "ConfigMap":
			obj = &corev1.ConfigMap{}
		case "ServiceAccount":
			m.sa = &corev1.ServiceAccount{}
			obj = m.sa
		case "PodDisruptionBudget":
			m.pdb = &policyv1.PodDisruptionBudget{}
			obj = m.pdb
		case "ServiceMonitor":
			m.monitor = &serviceMonitor{}
			obj = m.monitor
		case "PrometheusRule":
			m.rule = &prometheusRule{}
			obj = m.rule
		case "Certificate":
			obj = &certificate{}
		case "Issuer":
			obj = &issuer{}
		}
		strictDecode(t, js, obj)
		switch o := obj.(type) {
		case *corev1.Service:
			m.services[o.Name] = o
		case *certificate:
			m.certificates[o.Name] = o
		case *issuer:
			m.issuers[o.Name] = o
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			switch cm.Name {
			case fullname + "-proxy-sidecar":
				m.sidecar = cm
			case fullname + "-dashboard":
				m.dashboard = cm
				continue // grafanaDashboard.namespace may place it elsewhere
			default:
				m.configMap = cm
			}
		}
		if got := obj.GetNamespace(); got != ns {
			t.Errorf("%v: %s in namespace %q, want %q", set, tm.Kind, got, ns)
		}
	}
	if m.sts == nil || m.configMap == nil {
		t.Fatalf("%v: no StatefulSet or ConfigMap rendered: %v", set, m.kinds)
	}
	return m
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// strictDecode decodes JSON into v, refusing unknown fields and trailing data.
func strictDecode(t *testing.T, js []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("strict decode into %T: %v\n%s", v, err, js)
	}
	if dec.More() {
		t.Fatalf("trailing data after %T", v)
	}
}

func (m *manifests) container(t *testing.T) corev1.Container {
	t.Helper()
	cs := m.sts.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "idemnode" {
		t.Fatalf("want one container named idemnode, got %d", len(cs))
	}
	return cs[0]
}

func (m *manifests) podLabels() labels.Set { return m.sts.Spec.Template.Labels }

// selects reports whether sel selects the StatefulSet's pods.
func selects(t *testing.T, sel *metav1.LabelSelector, pods labels.Set) bool {
	t.Helper()
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return false // an empty selector would select everything in the namespace
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("label selector: %v", err)
	}
	return s.Matches(pods)
}

func hasArg(c corev1.Container, prefix string) (string, bool) {
	for _, a := range c.Args {
		if strings.HasPrefix(a, prefix) {
			return strings.TrimPrefix(a, prefix), true
		}
	}
	return "", false
}

func joinAddrs(n int) string {
	var addrs []string
	for i := range n {
		addrs = append(addrs, fmt.Sprintf("%s-%d.%s.%s.svc.cluster.local:7402", fullname, i, headless, ns))
	}
	return strings.Join(addrs, ",")
}

func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Errorf("container has no port named %s", name)
	return 0
}

func mountedAt(c corev1.Container, volume, path string) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volume && m.MountPath == path })
}

func mountReadOnly(c corev1.Container, volume string) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volume && m.ReadOnly })
}

func isTrue(b *bool) bool { return b != nil && *b }
