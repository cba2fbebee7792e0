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
	unreg, err := RegisterCollectors(reg, cs...)
	if err != nil {
		return err
	}
	s.unregMetrics = unreg
	return nil
}

// unregisterMetrics takes the edge's gauges off cfg.Metrics (Close).
func (s *Server) unregisterMetrics() {
	if s.unregMetrics != nil {
		s.unregMetrics()
	}
}

// RegisterCollectors registers cs on reg, all or none: when one fails, the
// ones before it are taken off again and its error returned; unregister
// takes them all off (Close). It is transport.RegisterCollectors for the
// edge and its faces, which may import only protocol (the import rule of
// cmd/mcpv2/imports_test.go): the one other copy.
func RegisterCollectors(reg prometheus.Registerer, cs ...prometheus.Collector) (unregister func(), err error) {
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, d := range cs[:i] {
				reg.Unregister(d)
			}
			return nil, err
		}
	}
	return func() {
		for _, c := range cs {
			reg.Unregister(c)
		}
	}, nil
}
