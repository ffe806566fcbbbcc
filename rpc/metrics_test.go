package rpc

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestFailureSeriesExistBeforeTheFirstCall: the series IdemnodeClaimsFailing
// divides exist, at zero, before any call, so the first failure is an
// increase a rate sees rather than a series that appears.
func TestFailureSeriesExistBeforeTheFirstCall(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "idemnode_rpc_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			have[labels["method"]+" "+labels["code"]] = true
		}
	}
	for _, method := range []string{"Claim", "Complete", "Release", "Extend", "Get", "Wait"} {
		for _, code := range []string{"OK", "Unavailable", "Internal"} {
			if !have[method+" "+code] {
				t.Errorf("no idemnode_rpc_duration_seconds{method=%q, code=%q} before the first call", method, code)
			}
		}
	}
}
