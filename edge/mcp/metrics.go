package mcp

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpv2/mcpv2/edge"
)

// WithMetrics registers the face's collectors on reg (nil: none, the
// default): the stateful MCP sessions open now on the node's own face,
// and the sessions initialized since the start (mesh peers' faces
// counted too). Close takes them off reg. The calls a session makes are
// the node's to count (face "mcp").
func WithMetrics(reg prometheus.Registerer) Option {
	return func(c *config) error {
		c.metrics = reg
		return nil
	}
}

// metrics are a face's collectors; a nil *metrics counts nothing.
type metrics struct {
	unreg  func() // takes the collectors off the registry
	owner  *Face  // the face whose Close unregisters them (not a peer's)
	opened prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, f *Face) (*metrics, error) {
	m := &metrics{owner: f, opened: prometheus.NewCounter(prometheus.CounterOpts{Name: "mcpv2_mcp_sessions_opened_total",
		Help: "MCP sessions initialized (the client's notifications/initialized), on the node's face and its mesh peers' faces."})}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcpv2_mcp_sessions",
		Help: "MCP sessions the node's own face holds now."}, func() float64 { return float64(f.sessions()) })
	cs := []prometheus.Collector{m.opened, open}
	var err error
	if m.unreg, err = edge.RegisterCollectors(reg, cs...); err != nil {
		return nil, err
	}
	return m, nil
}

// initialized is the go-sdk's InitializedHandler: it counts a session.
func (m *metrics) initialized(context.Context, *sdk.InitializedRequest) {
	if m != nil {
		m.opened.Inc()
	}
}

// unregister takes the collectors off the registry when f owns them.
func (m *metrics) unregister(f *Face) {
	if m == nil || m.owner != f {
		return
	}
	m.unreg()
}
