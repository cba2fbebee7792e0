package transport

import "github.com/prometheus/client_golang/prometheus"

// RegisterCollectors registers cs on reg, all or none: when one fails, the
// ones before it are taken off again and its error returned. unregister
// takes them all off (a component's Close), so that reg may outlive the
// component. It is the one register-or-roll-back of the project's metrics
// for every package that may import transport (node, discovery); the edge,
// which imports only protocol, has its own (edge.RegisterCollectors).
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
