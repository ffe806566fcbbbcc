package charts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idemnode/idemnode/internal/obsfiles"
	"github.com/idemnode/idemnode/internal/testaddr"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// The local cluster and Prometheus of scripts/cluster.sh and
// scripts/observe.sh run on a block of loopback addresses of this test's
// own (package testaddr), so a developer's scripts/cluster.sh cluster on
// 127.0.0.x, other tests and a second run of this one do not meet.
const (
	observeInterval = time.Second
	// The variables the dashboard's queries use, as observe.sh labels the
	// targets; $__rate_interval as Grafana would make it of a 15 s scrape.
	dashCluster, dashNamespace, dashRateInterval = "local", "idemnode-local", "1m"
)

// dashboardWithoutData are the panels whose feature this test does not
// turn on, so their queries may come back empty.
var dashboardWithoutData = map[string]string{
	"Certificate expiry": "the nodes run without TLS (the series is checked in cmd/idemnode's TLS metrics test)",
}

// dashboardIdleRatios are the panels of a ratio whose parts may both be
// zero over the window, so their series may be there but not a number
// (0/0) without anything being wrong; each part still needs series.
var dashboardIdleRatios = map[string]string{
	"Block cache hit rate": "a minute may pass without a block read: the key filter answers the fresh keys, " +
		"the write buffer the workload's second claims, and the records due soon the lease ends",
}

// needPrometheus finds the prometheus and promtool binaries, or skips; CI
// sets IDEMNODE_REQUIRE_PROMETHEUS=1 so a missing install fails instead.
func needPrometheus(t *testing.T, bins ...string) {
	t.Helper()
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			if os.Getenv("IDEMNODE_REQUIRE_PROMETHEUS") == "1" {
				t.Fatalf("%s not found and IDEMNODE_REQUIRE_PROMETHEUS=1", b)
			}
			t.Skipf("%s not found: apt-get install --no-install-recommends prometheus (.ci/run does as root)", b)
		}
	}
}

// TestAlertRulesWithPromtool: Prometheus's own checker accepts the rules,
// and their unit tests (alerts_test.yaml: each alert fires on one series
// and stays silent on another) pass.
func TestAlertRulesWithPromtool(t *testing.T) {
	needPrometheus(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", "idemnode/files/alerts.yaml"},
		{"test", "rules", "idemnode/files/alerts_test.yaml"},
	} {
		out, err := exec.Command("promtool", args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestObservabilityAgainstRealPrometheus starts scripts/cluster.sh's three
// nodes and scripts/observe.sh's Prometheus with the alert rules, runs a
// workload, and checks through Prometheus's HTTP API that every
// dashboard query returns data and every alert expression evaluates; then
// that killing the leader registers in the flapping expression, and that
// crashing two of the three nodes (lost quorum) fires IdemnodeNoLeader in
// time.
func TestObservabilityAgainstRealPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a cluster and Prometheus, about 2 minutes")
	}
	needPrometheus(t, "prometheus")
	o := startObserved(t)
	// Prometheus applies its targets a few seconds after it starts: wait
	// for scrapes of all three, run the workload, then let a few more
	// scrapes see it.
	testutil.Eventually(t, time.Minute, "three targets scraped five times", func() error {
		if n := o.scalar(t, `count(count_over_time(up{job="idemnode"}[1m]) >= 5)`); n != 3 {
			return fmt.Errorf("%v targets with five scrapes", n)
		}
		return nil
	})
	claims := o.workload()
	testutil.Eventually(t, 30*time.Second, "Prometheus to see the workload's claims", func() error {
		if n := o.scalar(t, `sum(idemnode_tenant_claims_total{job="idemnode"})`); n != float64(claims) {
			return fmt.Errorf("%v claims, want %d", n, claims)
		}
		// Rates need two samples of a series, and the tenants' series
		// begin with the workload.
		if n := o.scalar(t, `min(count_over_time(idemnode_tenant_claims_total{job="idemnode"}[1m]))`); n < 2 {
			return fmt.Errorf("tenant series scraped %v times", n)
		}
		if n := o.scalar(t, `sum(increase(idemnode_snapshot_persist_seconds_count{job="idemnode"}[1m]))`); !(n > 0) {
			return fmt.Errorf("snapshots recorded in the last minute: %v", n)
		}
		return nil
	})
	// A healthy cluster raises nothing: a rule that is always true fails here.
	if res, err := o.query(`ALERTS`); err != nil || len(res) != 0 {
		t.Errorf("alerts pending or firing on a healthy cluster: %v %v", res, err)
	}

	checkDashboardQueries(t, o)
	rules := loadAlertRules(t)
	for _, r := range rules {
		if _, err := o.query(r.Expr); err != nil {
			t.Errorf("alert %s: %v", r.Alert, err)
		}
	}

	flapping := ruleNamed(t, rules, "IdemnodeLeaderFlapping")
	before := o.scalar(t, withoutThreshold(t, flapping.Expr))
	leader := o.leaderNode(t)
	o.script("cluster.sh", "kill", leader)
	testutil.Eventually(t, 60*time.Second, "the flapping expression to register the new leader", func() error {
		if v := o.scalar(t, withoutThreshold(t, flapping.Expr)); v <= before {
			return fmt.Errorf("flapping expression %v, was %v before the kill", v, before)
		}
		return nil
	})
	o.script("cluster.sh", "start", leader)

	noLeader := ruleNamed(t, rules, "IdemnodeNoLeader")
	wait, err := time.ParseDuration(noLeader.For)
	if err != nil {
		t.Fatalf("IdemnodeNoLeader for %q: %v", noLeader.For, err)
	}
	testutil.Eventually(t, 60*time.Second, "all three nodes ready", func() error { return o.allReady() })
	// A crash of two, not a graceful stop: a node stopped with SIGTERM
	// leaves the configuration, and the last one would lead a cluster of
	// one (alerts_test.yaml covers that case with made-up series).
	o.script("cluster.sh", "kill", "1")
	o.script("cluster.sh", "kill", "2")
	stopped := time.Now()
	// Within its for window, plus a few scrapes for the stale series and
	// the evaluations that see it, plus the election timeout of the node
	// left behind.
	budget := wait + 10*observeInterval + 10*time.Second
	testutil.Eventually(t, budget, "IdemnodeNoLeader firing", func() error { return o.alertFiring("IdemnodeNoLeader") })
	// Two crashed of three also fire the rule's second half (at most half
	// the targets up): the first, no node is leader, must fire on its own.
	halves := regexp.MustCompile(`(?m)^\s*or\s*$`).Split(noLeader.Expr, -1)
	if len(halves) != 2 {
		t.Fatalf("IdemnodeNoLeader is not two expressions joined by a line with or: %q", noLeader.Expr)
	}
	if res, err := o.query(halves[0]); err != nil || len(res) != 1 {
		t.Errorf("IdemnodeNoLeader's no-leader half with one node of three left: %v %v", res, err)
	}
	t.Logf("IdemnodeNoLeader fired %s after two of three nodes crashed (for: %s)", time.Since(stopped).Round(time.Second), noLeader.For)
}

// observed is a running cluster.sh cluster and observe.sh Prometheus.
type observed struct {
	t    *testing.T
	root string // the repository
	env  []string
	bin  string // the cluster's idemnode binary
	net  string // the cluster's first three octets (IDEMNODE_CLUSTER_NET)
	prom string // Prometheus's address
}

func startObserved(t *testing.T) *observed {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addrs := testaddr.New(t)
	o := &observed{t: t, root: root, bin: filepath.Join(dir, "bin", "idemnode"), net: addrs.Prefix(), prom: addrs.Addr(1, 19090)}
	o.env = append(os.Environ(),
		"IDEMNODE_CLUSTER_DIR="+dir,
		"IDEMNODE_CLUSTER_NET="+o.net,
		// Quotas for the tenant panels; snapshots every 32 entries, so the
		// workload records some and the snapshot panels have data.
		"IDEMNODE_SERVE_ARGS=--tenant-max-keys 100000 --tenant-max-bytes 100000000 --snapshot-threshold 32 --snapshot-interval 1s",
		"IDEMNODE_PROMETHEUS_ADDR="+o.prom,
		"IDEMNODE_OBSERVE_INTERVAL="+observeInterval.String())
	t.Cleanup(func() {
		o.scriptQuiet("observe.sh", "down")
		o.scriptQuiet("cluster.sh", "down")
	})
	o.script("cluster.sh", "up")
	o.script("observe.sh", "up")
	return o
}

func (o *observed) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(o.root, "scripts", name), args...)
	cmd.Dir, cmd.Env = o.root, o.env
	return cmd.CombinedOutput()
}

func (o *observed) script(name string, args ...string) {
	o.t.Helper()
	if out, err := o.run(name, args...); err != nil {
		o.t.Fatalf("scripts/%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func (o *observed) scriptQuiet(name string, args ...string) {
	if out, err := o.run(name, args...); err != nil {
		o.t.Logf("scripts/%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// nodeAddr is cluster.sh's gRPC address of node i (1-based).
func (o *observed) nodeAddr(i int) string { return fmt.Sprintf("%s.%d:7400", o.net, 10+i) }

// workload claims keys of three tenants on each node (followers forward),
// completes some, and asks again for some, so every outcome a panel
// shows has a count. It returns the number of claims it made.
func (o *observed) workload() (claims int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 1; i <= 3; i++ {
		conn, err := grpc.NewClient(o.nodeAddr(i), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			o.t.Fatal(err)
		}
		api := idempb.NewIdempotencyClient(conn)
		for k := range 30 {
			id := &idempb.RecordId{Tenant: fmt.Sprintf("tenant-%d", k%3), Key: fmt.Sprintf("n%d-k%d", i, k)}
			won, err := api.Claim(ctx, &idempb.ClaimRequest{Id: id, Owner: "observe", Fingerprint: []byte{1}})
			if err != nil {
				o.t.Fatalf("claim on node %d: %v", i, err)
			}
			claims++
			if k%2 == 0 {
				_, err = api.Complete(ctx, &idempb.CompleteRequest{Id: id, Token: won.Token,
					Response: &idempb.Response{Status: 200, Body: []byte("ok")}})
			} else {
				_, err = api.Claim(ctx, &idempb.ClaimRequest{Id: id, Owner: "again", Fingerprint: []byte{1}})
				claims++
			}
			if err != nil {
				o.t.Fatalf("node %d: %v", i, err)
			}
		}
		conn.Close()
	}
	return claims
}

// promResult is one sample of an instant query's vector.
type promResult struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// hasNumbers reports whether a sample of res is a number: a quantile or a
// ratio over no events is NaN, which a panel draws as nothing.
func hasNumbers(res []promResult) bool {
	for _, r := range res {
		if s, ok := r.Value[1].(string); ok {
			if v, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(v) {
				return true
			}
		}
	}
	return false
}

// query evaluates expr now and returns its samples (a scalar as one).
func (o *observed) query(expr string) ([]promResult, error) {
	var body struct {
		Status, Error string
		Data          struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		}
	}
	if err := o.getJSON("/api/v1/query?query="+url.QueryEscape(expr), &body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s: %s", expr, body.Error)
	}
	if body.Data.ResultType == "scalar" {
		var v [2]any
		err := json.Unmarshal(body.Data.Result, &v)
		return []promResult{{Value: v}}, err
	}
	var out []promResult
	err := json.Unmarshal(body.Data.Result, &out)
	return out, err
}

// scalar is the value of a query that returns one sample (0 for none).
func (o *observed) scalar(t *testing.T, expr string) float64 {
	t.Helper()
	res, err := o.query(expr)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) == 0 {
		return 0
	}
	var v float64
	fmt.Sscan(fmt.Sprint(res[0].Value[1]), &v)
	return v
}

func (o *observed) getJSON(path string, v any) error {
	resp, err := http.Get("http://" + o.prom + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %s: %w", path, b, err)
	}
	return nil
}

// leaderNode is the number (as cluster.sh counts) of the node Prometheus
// last saw leading.
func (o *observed) leaderNode(t *testing.T) string {
	t.Helper()
	res, err := o.query(`idemnode_raft_state{job="idemnode"} == 2`)
	if err != nil || len(res) != 1 {
		t.Fatalf("leader per Prometheus: %v %v", res, err)
	}
	host, _, _ := strings.Cut(res[0].Metric["instance"], ":")
	return strings.TrimPrefix(host, o.net+".1") // <net>.1N
}

// allReady is nil once Prometheus saw every node ready.
func (o *observed) allReady() error {
	res, err := o.query(`sum(idemnode_ready{job="idemnode"})`)
	if err != nil {
		return err
	}
	if len(res) != 1 || fmt.Sprint(res[0].Value[1]) != "3" {
		return fmt.Errorf("ready nodes: %v", res)
	}
	return nil
}

// alertFiring is nil once the alert named is firing.
func (o *observed) alertFiring(name string) error {
	var body struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := o.getJSON("/api/v1/alerts", &body); err != nil {
		return err
	}
	var states []string
	for _, a := range body.Data.Alerts {
		if a.Labels["alertname"] == name && a.State == "firing" {
			return nil
		}
		states = append(states, a.Labels["alertname"]+"="+a.State)
	}
	return fmt.Errorf("%s not firing; alerts now: %v", name, states)
}

func loadAlertRules(t *testing.T) []obsfiles.Rule {
	t.Helper()
	rules, err := obsfiles.Rules("idemnode/files/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

func ruleNamed(t *testing.T, rules []obsfiles.Rule, name string) obsfiles.Rule {
	t.Helper()
	for _, r := range rules {
		if r.Alert == name {
			return r
		}
	}
	t.Fatalf("alerts.yaml has no alert %s", name)
	return obsfiles.Rule{}
}

// withoutThreshold drops an expression's final comparison with a number.
func withoutThreshold(t *testing.T, expr string) string {
	t.Helper()
	m := regexp.MustCompile(`^(.*\S)\s*>\s*[0-9.e+]+\s*$`).FindStringSubmatch(strings.TrimSpace(expr))
	if m == nil {
		t.Fatalf("expression %q does not end in a comparison with a number", expr)
	}
	return m[1]
}

func dashboardPanels(t *testing.T) []obsfiles.Panel {
	t.Helper()
	panels, err := obsfiles.Panels("idemnode/files/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	return panels
}

// checkDashboardQueries evaluates every target of every panel with the
// variables substituted: each must succeed and return data, unless its
// panel is listed in dashboardWithoutData (and then none may).
func checkDashboardQueries(t *testing.T, o *observed) {
	t.Helper()
	vars := strings.NewReplacer("$__rate_interval", dashRateInterval, "$cluster", dashCluster, "$namespace", dashNamespace)
	queries := 0
	for _, p := range dashboardPanels(t) {
		_, exempt := dashboardWithoutData[p.Title]
		for _, target := range p.Targets {
			if target.Expr == "" {
				continue
			}
			queries++
			expr := vars.Replace(target.Expr)
			if strings.Contains(expr, "$") {
				t.Errorf("panel %q %s: a variable the test does not know: %s", p.Title, target.RefID, expr)
				continue
			}
			res, err := o.query(expr)
			numbers := err == nil && hasNumbers(res)
			if _, idle := dashboardIdleRatios[p.Title]; idle && err == nil && len(res) > 0 {
				numbers = true // series there, 0/0 over an idle window
			}
			switch {
			case err != nil:
				t.Errorf("panel %q %s: %v", p.Title, target.RefID, err)
			case !numbers && !exempt:
				t.Errorf("panel %q %s: no data (%d series, none a number): %s", p.Title, target.RefID, len(res), expr)
			case numbers && exempt:
				t.Errorf("panel %q is listed as without data, but %s has some: drop it from the list", p.Title, target.RefID)
			}
			// A query with a fallback (or vector(0)) has data whatever
			// happens: each metric it reads must have series of its own.
			for _, name := range obsfiles.MetricNames(expr) {
				if n := o.scalar(t, `count({__name__="`+name+`", job="idemnode"})`); n == 0 && !exempt {
					t.Errorf("panel %q %s reads %s, which Prometheus has no series of", p.Title, target.RefID, name)
				}
			}
		}
	}
	if queries < 30 {
		t.Errorf("only %d dashboard queries found", queries)
	}
	checkDashboardVariables(t, o, vars)
	t.Logf("%d dashboard queries evaluated", queries)
}

// checkDashboardVariables asks Prometheus what each query variable's
// label_values(selector, label) asks it in Grafana (the label values API
// with the selector as match[]), with the variables before it substituted:
// each lists exactly the value observe.sh gives its targets.
func checkDashboardVariables(t *testing.T, o *observed, vars *strings.Replacer) {
	t.Helper()
	variables, err := obsfiles.Variables("idemnode/files/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cluster": dashCluster, "namespace": dashNamespace}
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*([a-z_]+)\)$`)
	checked := 0
	for _, v := range variables {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Query)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, v.Query)
			continue
		}
		var body struct {
			Status string   `json:"status"`
			Data   []string `json:"data"`
		}
		path := "/api/v1/label/" + m[2] + "/values?match[]=" + url.QueryEscape(vars.Replace(m[1]))
		if err := o.getJSON(path, &body); err != nil || body.Status != "success" {
			t.Errorf("variable %s: %s: %v %v", v.Name, path, body, err)
			continue
		}
		if w, ok := want[v.Name]; !ok || !slices.Equal(body.Data, []string{w}) {
			t.Errorf("variable %s lists %v, want [%s]", v.Name, body.Data, w)
		}
		checked++
	}
	if checked != len(want) {
		t.Errorf("%d query variables checked, want %d (%v)", checked, len(want), variables)
	}
}
