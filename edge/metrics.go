package edge

import (
	"github.com/prometheus/client_golang/prometheus"
)

// registerMetrics puts the edge's gauges on cfg.Metrics: each is read when
// scraped, so a request costs nothing more. The calls, refusals and bytes
// of the edge's requests are the node's to count (Backend.Handle and
// Backend.Audit see every one).
func (s *Server) registerMetrics() error {
	reg := s.cfg.Metrics
	if reg == nil {
		return nil
	}
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcpv2_edge_requests_in_flight",
			Help: "Session requests the HTTP edge is serving now (POST /mcpv2, the AI endpoint, the gateway, find, the faces)."},
			func() float64 { return float64(len(s.inflight)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcpv2_edge_requests_max_in_flight",
			Help: "The cap on session requests served at once (--max-inflight); more are refused with 503."},
			func() float64 { return float64(cap(s.inflight)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcpv2_edge_event_streams",
			Help: "Event streams (SSE) the HTTP edge holds open now."},
			func() float64 { return float64(s.streams.Held()) }),
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, d := range cs[:i] {
				reg.Unregister(d)
			}
			return err
		}
	}
	s.collectors = cs
	return nil
}

// unregisterMetrics takes the edge's gauges off cfg.Metrics (Close).
func (s *Server) unregisterMetrics() {
	for _, c := range s.collectors {
		s.cfg.Metrics.Unregister(c)
	}
}
