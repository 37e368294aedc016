package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Gauge returns the value of the unlabelled gauge name that reg gathers,
// failing t when reg has no such metric, or more than one series of it.
func Gauge(t testing.TB, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		if n := len(f.GetMetric()); n != 1 {
			t.Fatalf("metric %s has %d series, want 1", name, n)
		}
		return f.GetMetric()[0].GetGauge().GetValue()
	}
	t.Fatalf("no metric %s", name)
	return 0
}
