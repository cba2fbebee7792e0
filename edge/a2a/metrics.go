package a2a

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpv2/mcpv2/edge"
)

// WithMetrics registers the face's collectors on reg (nil: none, the
// default): the tasks entering each state (mesh peers' faces counted with
// the node's own) and the tasks running now. Close takes them off reg.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(c *config) error {
		c.metrics = reg
		return nil
	}
}

// taskStates are the states counted, in model.go's order.
var taskStates = []State{StateSubmitted, StateWorking, StateInputRequired, StateCompleted, StateCanceled, StateFailed, StateRejected}

// metrics are a face's collectors; a nil *metrics counts nothing.
type metrics struct {
	unreg  func()                       // takes the collectors off the registry
	owner  *Face                        // the face whose Close unregisters them (not a peer's)
	states map[State]prometheus.Counter // fixed at New: read without a lock
}

func newMetrics(reg prometheus.Registerer, f *Face) (*metrics, error) {
	states := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpv2_a2a_tasks_total",
		Help: "A2A tasks entering each state (submitted, working, input-required, completed, canceled, failed, rejected)."}, []string{"state"})
	running := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcpv2_a2a_tasks_running",
		Help: "A2A tasks of the node's own face running now."}, func() float64 {
		f.mu.Lock()
		defer f.mu.Unlock()
		return float64(len(f.runs))
	})
	m := &metrics{owner: f, states: map[State]prometheus.Counter{}}
	for _, s := range taskStates {
		m.states[s] = states.WithLabelValues(string(s))
	}
	cs := []prometheus.Collector{states, running}
	var err error
	if m.unreg, err = edge.RegisterCollectors(reg, cs...); err != nil {
		return nil, err
	}
	return m, nil
}

// entered counts a task entering state s.
func (m *metrics) entered(s State) {
	if m == nil {
		return
	}
	if c := m.states[s]; c != nil {
		c.Inc()
	}
}

// unregister takes the collectors off the registry when f owns them.
func (m *metrics) unregister(f *Face) {
	if m == nil || m.owner != f {
		return
	}
	m.unreg()
}
