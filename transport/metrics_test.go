package transport

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// gatheredNames are the metric families reg holds, by name prefix.
func gatheredNames(t *testing.T, g prometheus.Gatherer, prefix string) []string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var out []string
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), prefix) {
			out = append(out, mf.GetName())
		}
	}
	return out
}

// TestWithMetrics: go-libp2p's metrics go on the registerer of
// WithMetrics, the swarm's counting the connection a dial makes, and on
// no process-wide registry; without it, on none that anyone reads. The
// resource manager's join them only with WithResourceManagerMetrics.
func TestWithMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	server := newTestHost(t, "/ip4/127.0.0.1/tcp/0", WithMetrics(reg))
	client := newTestHost(t, "", WithMetrics(reg))
	connect(t, client, server)
	names := strings.Join(gatheredNames(t, reg, "libp2p_"), " ")
	for _, want := range []string{"libp2p_swarm_connections_opened_total", "libp2p_eventbus_subscribers_total"} {
		if !strings.Contains(names, want) {
			t.Errorf("registry of WithMetrics lacks %s: %s", want, names)
		}
	}
	if strings.Contains(names, "libp2p_rcmgr_") {
		t.Errorf("the resource manager's metrics are on without WithResourceManagerMetrics: %s", names)
	}
	if got := gatheredNames(t, prometheus.DefaultGatherer, "libp2p_"); len(got) > 0 {
		t.Errorf("go-libp2p registered on the default registry: %v", got)
	}
	// Without WithMetrics: nothing on the default registry, nor on reg.
	plain := newTestHost(t, "/ip4/127.0.0.1/tcp/0")
	connect(t, plain, server)
	if got := gatheredNames(t, prometheus.DefaultGatherer, "libp2p_"); len(got) > 0 {
		t.Errorf("a host without WithMetrics registered on the default registry: %v", got)
	}

	rreg := prometheus.NewRegistry()
	rh := newTestHost(t, "/ip4/127.0.0.1/tcp/0", WithMetrics(rreg), WithResourceManagerMetrics())
	connect(t, rh, server)
	if got := strings.Join(gatheredNames(t, rreg, "libp2p_rcmgr_"), " "); !strings.Contains(got, "libp2p_rcmgr_") {
		t.Errorf("WithResourceManagerMetrics: no libp2p_rcmgr_ metric on its registry")
	}
}
