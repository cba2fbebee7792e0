// Package promtest reads gathered Prometheus metrics for the tests: the
// one sum of a metric's series that the packages' metrics tests share.
// It is imported by _test.go files only.
package promtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Value is the sum over the series of name whose labels include want (nil:
// every series) of a counter's or gauge's value, or a histogram's sample
// count; found is false when no series matches.
func Value(t testing.TB, g prometheus.Gatherer, name string, want map[string]string) (v float64, found bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, want) {
				continue
			}
			found = true
			switch {
			case m.Counter != nil:
				v += m.Counter.GetValue()
			case m.Gauge != nil:
				v += m.Gauge.GetValue()
			case m.Histogram != nil:
				v += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return v, found
}

// hasLabels says whether m has every label of want with its value.
func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if w, ok := want[l.GetName()]; ok {
			if w != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}
