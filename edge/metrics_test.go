package edge

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// TestMetrics: the edge's gauges are on Config.Metrics while it runs and
// gone after Close; a registry that already holds one of them fails New,
// naming the metrics, with nothing left bound.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := New(&fakeBackend{}, Config{BindHost: "127.0.0.1", Secret: testSecret, MaxInFlight: 7, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	values := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			out[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
		}
		return out
	}
	got := values()
	if got["mcpv2_edge_requests_max_in_flight"] != 7 || got["mcpv2_edge_requests_in_flight"] != 0 || got["mcpv2_edge_event_streams"] != 0 {
		t.Fatalf("gauges of an idle edge with --max-inflight 7: %v", got)
	}
	testenv.CloseTwice(t, s)
	if got := values(); len(got) != 0 {
		t.Fatalf("after Close the registry holds %v", got)
	}

	taken := prometheus.NewRegistry()
	taken.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "mcpv2_edge_event_streams", Help: "taken"}))
	if _, err := New(&fakeBackend{}, Config{BindHost: "127.0.0.1", Secret: testSecret, Port: s.BoundPort(), Metrics: taken}); err == nil || !strings.Contains(err.Error(), "metrics") {
		t.Fatalf("New with a registry holding mcpv2_edge_event_streams: %v, want a metrics error", err)
	}
	// The failed New let go of its port: another edge binds it.
	again, err := New(&fakeBackend{}, Config{BindHost: "127.0.0.1", Secret: testSecret, Port: s.BoundPort()})
	if err != nil {
		t.Fatalf("the port after a failed New: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}
