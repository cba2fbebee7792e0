package discovery

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpv2/mcpv2/transport"
)

// WithMetrics registers the discovery's collectors on reg (nil: none, the
// default): its DHT finds and card announcements, each by result with its
// latency, and the routing table's size read when scraped. Close takes
// them off reg again.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(c *config) error {
		c.metrics = reg
		return nil
	}
}

// Results of a find (mcpv2_dht_finds_total{result}).
const (
	findFound   = iota // at least one card matched
	findEmpty          // the lookup ran and nothing matched
	findNoPeers        // the routing table is empty: no lookup possible
	findError          // failed (cancelled, timed out, closed)
	numFindResults
)

var findResults = [numFindResults]string{"found", "empty", "no_peers", "error"}

// Results of an announcement (mcpv2_dht_publishes_total{result}).
const (
	pubOK      = iota // replicated on enough peers
	pubPending        // short of peers (or none): retried
	pubError          // failed
	numPubResults
)

var pubResults = [numPubResults]string{"ok", "pending", "error"}

// dhtBuckets are the DHT latency histograms' buckets in seconds: 5 ms to
// 2 minutes.
var dhtBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// metrics are a Discovery's collectors; a nil *metrics counts nothing.
type metrics struct {
	unreg    func() // takes the collectors off the registry (Close)
	finds    [numFindResults]prometheus.Counter
	findTime [numFindResults]prometheus.Observer
	pubs     [numPubResults]prometheus.Counter
	pubTime  [numPubResults]prometheus.Observer
}

// newMetrics registers d's collectors on reg.
func newMetrics(reg prometheus.Registerer, d *Discovery) (*metrics, error) {
	finds := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpv2_dht_finds_total",
		Help: "Finds (by skill or tag) over the DHT, by result (found, empty, no_peers, error)."}, []string{"result"})
	findTime := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mcpv2_dht_find_duration_seconds",
		Help: "Time a DHT find took, provider lookups and card fetches, by result.", Buckets: dhtBuckets}, []string{"result"})
	pubs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpv2_dht_publishes_total",
		Help: "Announcements of this node's card and its skills' provider records, by result (ok, pending: short of peers, error)."}, []string{"result"})
	pubTime := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mcpv2_dht_publish_duration_seconds",
		Help: "Time an announcement took, by result.", Buckets: dhtBuckets}, []string{"result"})
	rt := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcpv2_dht_routing_table_peers",
		Help: "Peers in the DHT routing table."}, func() float64 { return float64(d.kad.RoutingTable().Size()) })
	m := &metrics{}
	for i, r := range findResults {
		m.finds[i], m.findTime[i] = finds.WithLabelValues(r), findTime.WithLabelValues(r)
	}
	for i, r := range pubResults {
		m.pubs[i], m.pubTime[i] = pubs.WithLabelValues(r), pubTime.WithLabelValues(r)
	}
	var err error
	if m.unreg, err = transport.RegisterCollectors(reg, finds, findTime, pubs, pubTime, rt); err != nil {
		return nil, err
	}
	return m, nil
}

// unregister takes the collectors off the registry.
func (m *metrics) unregister() {
	if m == nil {
		return
	}
	m.unreg()
}

// found counts a find that returned n results, or err.
func (m *metrics) found(n int, err error, took time.Duration) {
	if m == nil {
		return
	}
	r := findFound
	switch {
	case errors.Is(err, ErrNoPeers):
		r = findNoPeers
	case err != nil:
		r = findError
	case n == 0:
		r = findEmpty
	}
	m.finds[r].Inc()
	m.findTime[r].Observe(took.Seconds())
}

// announced counts an announcement that ended with err, pending when it
// was short of peers.
func (m *metrics) announced(err error, pending bool, took time.Duration) {
	if m == nil {
		return
	}
	r := pubOK
	switch {
	case err != nil:
		r = pubError
	case pending:
		r = pubPending
	}
	m.pubs[r].Inc()
	m.pubTime[r].Observe(took.Seconds())
}
