package node

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// Metrics (Config.Metrics). Every label value is one of a small set the
// node fixes, never a string a caller chose: a skill is named only when it
// is registered here ("unknown" otherwise, "none" for a request that names
// no skill), a caller only by its kind, never its identity.

// The faces a call is counted under: Caller.Via, and "gateway" for what
// the edge's gateway forwards or refuses.
const (
	faceMesh = iota
	faceHTTP
	faceMCP
	faceA2A
	faceGateway
	faceOther
	numFaces
)

var faceNames = [numFaces]string{"mesh", "http", "mcp", "a2a", "gateway", "other"}

// numKinds is the caller kinds counted by name (protocol.CallerKind up to
// CallerOIDC), and one more, "other", for any kind added later.
const numKinds = int(protocol.CallerOIDC) + 2

// Outcomes of a call.
const (
	outcomeOK      = iota
	outcomeError   // the skill ran and failed, or the node did
	outcomeRefused // refused before it ran: see the reasons
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"ok", "error", "refused"}

// Refusal reasons (mcpv2_refusals_total{reason}).
const (
	reasonPolicy    = iota // -32009: not granted
	reasonAuth             // -32001: a session or credential that does not hold
	reasonRateLimit        // -32005: a rate limit or a cap on calls at once
	reasonGuard            // the prompt-injection guard blocked it
	reasonQuota            // a store quota (max-store, max-partial, tasks)
	reasonInvalid          // -32700, -32600, -32602, -32010: a malformed request
	reasonNotFound         // -32601, -32002: no such method or skill
	reasonVersion          // -32006: no common protocol version
	numReasons
)

var reasonNames = [numReasons]string{"policy", "auth", "rate_limit", "guard", "quota", "invalid", "not_found", "version"}

// Skill label values that are not skill names.
const (
	skillNone    = "none"    // a request that names no skill (tools/list, an edge request)
	skillUnknown = "unknown" // a tools/call of a skill not registered here
	skillRemote  = "remote"  // a skill of a peer, called through the gateway
)

// maxSkillLabels bounds the skills with series of their own; past it
// (custom skills reloaded many times over) further ones count as
// "unknown".
const maxSkillLabels = 1024

// latencyBuckets are the call latency histogram's buckets in seconds:
// 100 µs to 60 s.
var latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// metrics are the node's collectors; a nil *metrics counts nothing, so
// that a node without Config.Metrics pays one nil check per call.
type metrics struct {
	calls    *prometheus.CounterVec   // face, skill, outcome, caller
	latency  *prometheus.HistogramVec // face, skill
	refusals [numFaces][numReasons]prometheus.Counter
	bytesIn  [numFaces]prometheus.Counter
	bytesOut [numFaces]prometheus.Counter

	blobs       [2]prometheus.Counter // stored, failed
	blobResumes prometheus.Counter
	blobBytes   prometheus.Counter

	punchWaits [2]prometheus.Counter

	unreg func() // takes the collectors off the registry (Close)

	mu     sync.RWMutex
	skills map[string]*skillSeries // by label value
}

// skillSeries are one skill's series, made on their first use and kept:
// the hot path resolves no label values.
type skillSeries struct {
	name    string
	calls   [numFaces][numKinds][numOutcomes]atomic.Pointer[prometheus.Counter]
	latency [numFaces]atomic.Pointer[prometheus.Observer]
}

func newMetrics(reg prometheus.Registerer, n *Node) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpv2_calls_total",
			Help: "Requests the node answered, by face (mesh, http, mcp, a2a, gateway), skill (a registered skill, unknown, or none), outcome (ok, error, refused) and caller kind."},
			[]string{"face", "skill", "outcome", "caller"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mcpv2_call_duration_seconds",
			Help: "Time from a request's arrival to its answer, by face and skill.", Buckets: latencyBuckets},
			[]string{"face", "skill"}),
		blobResumes: prometheus.NewCounter(prometheus.CounterOpts{Name: "mcpv2_blob_resumes_total",
			Help: "Blob uploads to this node that resumed a kept unfinished upload instead of starting over."}),
		blobBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "mcpv2_blob_received_bytes_total",
			Help: "Bytes of blob uploads this node received."}),
		skills: make(map[string]*skillSeries),
	}
	refusals := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpv2_refusals_total",
		Help: "Requests refused before they ran, by face and reason (policy, auth, rate_limit, guard, quota, invalid, not_found, version)."},
		[]string{"face", "reason"})
	bytes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpv2_message_bytes_total",
		Help: "Bytes of the JSON-RPC messages the node handled, by face and direction (in: requests, out: answers)."},
		[]string{"face", "direction"})
	blobs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpv2_blob_transfers_total",
		Help: "Blob uploads (/mcpv2/blob) this node served, by outcome (ok: stored; error: refused or broken, kept to resume)."},
		[]string{"outcome"})
	punchWaits := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpv2_direct_waits_total",
		Help: "Calls to a peer reached only through a relay that waited for its hole punch, by result (direct: a direct connection came; relayed: the call went through the relay)."},
		[]string{"result"})
	for f := range numFaces {
		for r := range numReasons {
			m.refusals[f][r] = refusals.WithLabelValues(faceNames[f], reasonNames[r])
		}
		m.bytesIn[f] = bytes.WithLabelValues(faceNames[f], "in")
		m.bytesOut[f] = bytes.WithLabelValues(faceNames[f], "out")
	}
	m.blobs[0], m.blobs[1] = blobs.WithLabelValues("ok"), blobs.WithLabelValues("error")
	m.punchWaits[0], m.punchWaits[1] = punchWaits.WithLabelValues("direct"), punchWaits.WithLabelValues("relayed")
	cs := []prometheus.Collector{m.calls, m.latency, refusals, bytes, blobs, m.blobResumes, m.blobBytes, newConnsCollector(n), punchWaits}
	cs = append(cs, storeCollectors(n)...)
	var err error
	if m.unreg, err = transport.RegisterCollectors(reg, cs...); err != nil {
		return nil, err
	}
	return m, nil
}

// unregister takes the node's collectors off the registry, so that a
// registry may outlive the node (and serve another).
func (m *metrics) unregister() {
	if m == nil {
		return
	}
	m.unreg()
}

// storeCollectors report the store's sizes against their quotas when
// scraped, so that a write costs nothing more.
func storeCollectors(n *Node) []prometheus.Collector {
	used := func() float64 { u, _ := n.store.Files().Usage(); return float64(u) }
	quota := func() float64 { _, q := n.store.Files().Usage(); return float64(q) }
	tasks := func() float64 {
		_, total, err := n.store.TaskBytes("")
		if err != nil {
			return 0
		}
		return float64(total)
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcpv2_store_files_bytes",
			Help: "Bytes the files directory holds (committed files, unfinished uploads, writes in progress)."}, used),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcpv2_store_files_quota_bytes",
			Help: "The files directory's quota (--max-store; 0: none)."}, quota),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcpv2_store_tasks_bytes",
			Help: "Bytes the faces' tasks (A2A) hold in state.db."}, tasks),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcpv2_store_tasks_quota_bytes",
			Help: "The tasks' quota (--max-tasks-bytes; 0: none)."}, func() float64 { return float64(n.store.TaskQuota()) }),
	}
}

// callFace is the one rule of mcpv2_calls_total: each request is counted
// once, at the face it entered, with the outcome its caller got. It
// returns the face an audit line is counted under, and false for a line
// that is not counted:
//   - a line written under protocol.Uncounted: an inner line of a request
//     its face counts by a line of its own (an A2A task's skill calls, the
//     forward of MCP's mesh_call, an orchestration's subtasks and finds,
//     the gateway's answered HTTP request);
//   - the gateway (face "gateway"): each slot of a request to
//     /mcpv2/peers/{id} counts once, skill "remote" (remote is true), a
//     slot the node refuses by its line ("gateway METHOD"), a forwarded
//     one by its peer's answer (Forward); the HTTP request itself counts
//     only when the edge refused it before any slot went. The MCP face of
//     a peer counts its forwarded slots so too, under face "mcp";
//   - everything else (a slot at the mesh or /mcpv2, an MCP request, an
//     A2A JSON-RPC request, any other request of the edge) under c.Via.
func callFace(ctx context.Context, c *Caller, method string) (face int, remote, ok bool) {
	switch {
	case protocol.IsUncounted(ctx):
		return 0, false, false
	case strings.HasPrefix(method, "gateway "): // Forward's
		if c.Via == "http" {
			return faceGateway, true, true
		}
		return viaFace(c.Via), true, true
	case strings.HasPrefix(method, "http POST /mcpv2/peers/"):
		return faceGateway, false, true
	}
	return viaFace(c.Via), false, true
}

// viaFace is the face of a Caller.Via.
func viaFace(via string) int {
	switch via {
	case "mesh":
		return faceMesh
	case "http":
		return faceHTTP
	case "mcp":
		return faceMCP
	case "a2a":
		return faceA2A
	}
	return faceOther
}

// kindOf is the caller kind's index.
func kindOf(k protocol.CallerKind) int {
	if k < 0 || int(k) >= numKinds-1 {
		return numKinds - 1
	}
	return int(k)
}

func kindName(i int) string {
	if i == numKinds-1 {
		return "other"
	}
	return protocol.CallerKind(i).String()
}

// classify is the outcome of a request answered perr, and the reason when
// it was refused. blocked: the guard refused it.
func classify(perr *protocol.Error, blocked bool) (outcome, reason int) {
	if perr == nil {
		return outcomeOK, 0
	}
	if blocked {
		return outcomeRefused, reasonGuard
	}
	switch perr.Code {
	case protocol.CodeNotPermitted:
		return outcomeRefused, reasonPolicy
	case protocol.CodeInvalidSession:
		return outcomeRefused, reasonAuth
	case protocol.CodeRateLimited:
		return outcomeRefused, reasonRateLimit
	case protocol.CodeParseError, protocol.CodeInvalidRequest, protocol.CodeInvalidParams, protocol.CodeUnsupportedProvider:
		return outcomeRefused, reasonInvalid
	case protocol.CodeMethodNotFound, protocol.CodeSkillNotFound:
		return outcomeRefused, reasonNotFound
	case protocol.CodeVersionMismatch:
		return outcomeRefused, reasonVersion
	case protocol.CodeToolExecution:
		if d, ok := perr.Data.(map[string]any); ok {
			if _, ok := d["quota"]; ok {
				return outcomeRefused, reasonQuota
			}
		}
	}
	return outcomeError, 0
}

// series returns the series of skill, made on first use: a registered
// skill's own, else "unknown" ("none" for no skill). A remote skill (one
// a peer runs, forwarded) is "remote", whatever skills of that name run
// here.
func (m *metrics) series(n *Node, skill string, remote bool) *skillSeries {
	switch {
	case skill == "":
		skill = skillNone
	case remote:
		skill = skillRemote
	default:
		skill = n.skillLabel(skill) // the spans' rule: registered here, else "unknown"
	}
	m.mu.RLock()
	s := m.skills[skill]
	m.mu.RUnlock()
	if s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s = m.skills[skill]; s != nil {
		return s
	}
	if len(m.skills) >= maxSkillLabels {
		if s = m.skills[skillUnknown]; s != nil {
			return s
		}
		skill = skillUnknown
	}
	s = &skillSeries{name: skill}
	m.skills[skill] = s
	return s
}

// countLine counts the request of an audit line when callFace says it is
// counted.
func (m *metrics) countLine(ctx context.Context, n *Node, c *Caller, method, skill string, perr *protocol.Error, blocked bool, took time.Duration) {
	if m == nil {
		return
	}
	if face, remote, ok := callFace(ctx, c, method); ok {
		m.count(n, face, c, skill, remote, perr, blocked, took)
	}
}

// count records one answered request: its call, latency and refusal.
// remote: skill is a peer's (series).
func (m *metrics) count(n *Node, face int, c *Caller, skill string, remote bool, perr *protocol.Error, blocked bool, took time.Duration) {
	if m == nil {
		return
	}
	kind := kindOf(c.Kind)
	outcome, reason := classify(perr, blocked)
	s := m.series(n, skill, remote)
	ctr := s.calls[face][kind][outcome].Load()
	if ctr == nil {
		c := m.calls.WithLabelValues(faceNames[face], s.name, outcomeNames[outcome], kindName(kind))
		s.calls[face][kind][outcome].CompareAndSwap(nil, &c)
		ctr = s.calls[face][kind][outcome].Load()
	}
	(*ctr).Inc()
	obs := s.latency[face].Load()
	if obs == nil {
		o := m.latency.WithLabelValues(faceNames[face], s.name)
		s.latency[face].CompareAndSwap(nil, &o)
		obs = s.latency[face].Load()
	}
	(*obs).Observe(took.Seconds())
	if outcome == outcomeRefused {
		m.refusals[face][reason].Inc()
	}
}

// messageBytes counts a request of in bytes and its answer of out bytes.
func (m *metrics) messageBytes(c *Caller, in, out int) {
	if m == nil {
		return
	}
	face := viaFace(c.Via)
	m.bytesIn[face].Add(float64(in))
	m.bytesOut[face].Add(float64(out))
}

// blobDone counts one blob upload this node served, stored or not.
func (m *metrics) blobDone(perr *protocol.Error) {
	if m == nil {
		return
	}
	if perr == nil {
		m.blobs[0].Inc()
	} else {
		m.blobs[1].Inc()
	}
}

// blobReceived counts the bytes of an upload that arrived, and whether it
// resumed from a kept partial upload.
func (m *metrics) blobReceived(got int64, resumed bool) {
	if m == nil {
		return
	}
	m.blobBytes.Add(float64(got))
	if resumed {
		m.blobResumes.Inc()
	}
}

// directWait counts a wait for a peer's hole punch (Client.upgrade).
func (m *metrics) directWait(direct bool) {
	if m == nil {
		return
	}
	if direct {
		m.punchWaits[0].Inc()
	} else {
		m.punchWaits[1].Inc()
	}
}

// connsCollector reports the node's open connections by path when
// scraped, from the host's list and with Conns' definition of relayed
// (isCircuit), so that the gauge is never off by the connections made
// before it was registered.
type connsCollector struct {
	n    *Node
	desc *prometheus.Desc
}

func newConnsCollector(n *Node) connsCollector {
	return connsCollector{n: n, desc: prometheus.NewDesc("mcpv2_connections",
		"Open libp2p connections, by path (direct, or relayed through a circuit relay), read on scrape.", []string{"path"}, nil)}
}

// Describe implements prometheus.Collector.
func (cc connsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- cc.desc }

// Collect implements prometheus.Collector.
func (cc connsCollector) Collect(ch chan<- prometheus.Metric) {
	var direct, relayed float64
	for _, c := range cc.n.host.Network().Conns() {
		if isCircuit(c.RemoteMultiaddr()) {
			relayed++
		} else {
			direct++
		}
	}
	ch <- prometheus.MustNewConstMetric(cc.desc, prometheus.GaugeValue, direct, "direct")
	ch <- prometheus.MustNewConstMetric(cc.desc, prometheus.GaugeValue, relayed, "relayed")
}
