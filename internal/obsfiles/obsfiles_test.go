package obsfiles

import (
	"slices"
	"testing"
)

func TestMetricNames(t *testing.T) {
	expr := `sum(rate(idemnode_claims_total{job="idemnode"}[5m])) / sum(rate(idemnode_claims_total[5m]))` +
		` or process_resident_memory_bytes and on () up and go_goroutines > 0`
	want := []string{"go_goroutines", "idemnode_claims_total", "process_resident_memory_bytes"}
	if got := MetricNames(expr); !slices.Equal(got, want) {
		t.Fatalf("MetricNames = %v, want %v", got, want)
	}
}
