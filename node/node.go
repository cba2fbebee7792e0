// Package node is an mcpv2 peer: it owns the libp2p host, the skill registry,
// the store and the policy; it serves /mcpv2/rpc/1.0.0 and calls other peers.
// Every face (mesh, HTTP edge, MCP, A2A) enters through Node.Handle, so a
// skill is written once and seen the same everywhere.
package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpv2/mcpv2/discovery"
	"github.com/mcpv2/mcpv2/node/agents"
	"github.com/mcpv2/mcpv2/node/guard"
	"github.com/mcpv2/mcpv2/node/llm"
	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/node/skills/custom"
	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// Version is the software version reported in cards and health.
const Version = "0.1.0"

// Config configures a Node. The zero value of every field but DataDir is a
// usable default, stated on the field.
type Config struct {
	// DataDir holds identity.key, state.db, audit.jsonl and files/. Required.
	DataDir string
	// ListenAddrs are multiaddrs to listen on (default: TCP and QUIC-v1 on
	// port 4001, every interface).
	ListenAddrs []string
	// Name and Description go in the agent card (default name "mcpv2-" and
	// the PeerID's last 8 characters).
	Name, Description string
	// MaxMessage caps one message (frame) in bytes (default 8 MiB).
	MaxMessage int
	// MaxFile caps one stored file in bytes (default 64 MiB).
	MaxFile int64
	// FilesDir overrides <DataDir>/files (MCPV2_FILE_STORE).
	FilesDir string
	// MaxPartial caps the total bytes of one sender's unfinished blob
	// uploads, each counted at its declared size; a new upload that does
	// not fit drops that sender's oldest ones, and the sender is told
	// (default store.DefaultMaxPartial, 256 MiB; negative: no cap).
	MaxPartial int64
	// PartialTTL is how long an unfinished upload is kept without a write;
	// a goroutine of the node sweeps older ones while it runs (default
	// store.DefaultPartialTTL, 24 h).
	PartialTTL time.Duration
	// MaxStore is the quota on the files directory in bytes (committed
	// files and unfinished uploads); a write over it is refused with
	// -32004 (default store.DefaultMaxStore, 10 GiB; negative: none).
	MaxStore int64
	// AuditMaxBytes is the size at which audit.jsonl is rotated (default
	// store.DefaultAuditMaxBytes, 64 MiB; negative: never).
	AuditMaxBytes int64
	// AuditKeep is how many rotated audit logs are kept, audit.jsonl.1 the
	// newest (default store.DefaultAuditKeep, 5; negative: none).
	AuditKeep int
	// MaxConversations caps the LLM-mode conversations kept; the least
	// recently used are dropped (default store.DefaultMaxConversations,
	// 10000; negative: no cap).
	MaxConversations int
	// ConversationTTL is how long a conversation is kept after its last
	// turn; the node's sweeper drops older ones (default
	// store.DefaultConversationTTL, 30 days; negative: forever).
	ConversationTTL time.Duration
	// TaskTTL is how long a finished task of a face (A2A) is kept after its
	// last update (0: store.DefaultTaskTTL, 7 days; negative: until the
	// store's cap of tasks).
	TaskTTL time.Duration
	// MaxTasksBytes caps the bytes the faces' tasks (A2A) hold in state.db,
	// each with its events, and one owner's tasks at a sixteenth of it; a
	// task that does not fit drops its owner's finished tasks, oldest
	// first (for the total, then anyone's), else it is refused with -32004
	// (default store.DefaultMaxTasksBytes, 256 MiB; negative: no cap).
	MaxTasksBytes int64
	// LLM is the backend of ask and process_instructions (default local).
	LLM llm.Backend
	// LLMMode keeps per-conversation history across turns and restarts.
	LLMMode bool
	// Secret is the shared mesh secret: callers presenting a mesh session
	// minted with it are granted every skill (SPEC §6). Empty: none accepted.
	Secret []byte
	// ClockSkew is the allowed future skew of session tokens (default 300 s).
	ClockSkew time.Duration
	// PolicyFile grants skills per PeerID (default <DataDir>/policy.json,
	// which may be missing; an explicitly named file must exist).
	PolicyFile string
	// SkillsFile holds custom skills (default <DataDir>/custom_skills.json,
	// which may be missing; an explicitly named file must exist).
	SkillsFile string
	// ResourcesFile lists the node's static resources (node/resources.go);
	// it must exist when named. Empty: each regular file of the folder
	// <DataDir>/resources, if there is one, is a resource resource://NAME.
	ResourcesFile string
	// MaxCommandRuns caps the command-skill calls that run at once; one
	// more is refused with -32005 (default custom.DefaultMaxCommandRuns).
	MaxCommandRuns int
	// RunAs is the user (name or uid) command skills run as; it needs the
	// node to run as root. Empty: the node's own user. Checked when the
	// skills file loads: an unknown user fails New.
	RunAs string
	// RateLimit is calls per second per caller (default 200; negative: none).
	RateLimit float64
	// FindRate is the mesh finds per second one caller's orchestrations
	// may make here, each subtask's finds counted (default DefaultFindRate,
	// the edge's --find-rate-limit; negative: none). A find waits at most
	// maxFindWait for its turn; past that its subtask fails with -32005.
	FindRate float64
	// Guard is what the prompt-injection guard does with what it finds in
	// the arguments it scans (ask, process_instructions, file names, and
	// custom skills that opt in): GuardBlock (the zero value) refuses a
	// call at or above GuardThreshold and flags the rest in the audit log;
	// GuardFlag only flags; GuardOff does not scan.
	Guard GuardMode
	// GuardThreshold is the lowest threat level GuardBlock refuses (zero:
	// guard.Critical).
	GuardThreshold guard.Level
	// HTTPEndpoint is the edge's address for the card, if the edge runs.
	HTTPEndpoint string
	// MTLS is the card's capabilities.mtls: the edge requires client
	// certificates (mutual TLS).
	MTLS bool
	// Logger receives the node's logs (default: discard).
	Logger *slog.Logger
	// Mesh turns on the DHT, mDNS and NAT traversal; nil runs without them
	// (calls then need full multiaddrs).
	Mesh *MeshConfig
	// HostOptions are passed to transport.NewHost after the node's own.
	HostOptions []transport.Option
	// Now is the clock (default time.Now).
	Now func() time.Time
	// TracerProvider receives a span for every call the node runs
	// (--otlp-endpoint: the SDK's); nil is NewIDsTracerProvider, trace and
	// span ids only, for the audit log and the calls out. The node never
	// shuts it down: whoever made it does, after Close.
	TracerProvider trace.TracerProvider
	// OutboundAllow are the prefixes the outbound scope lets through
	// (--outbound-allow): the node's requests to A2A agents at URLs (a2a
	// skills, agent discovery, health checks) refuse loopback,
	// link-local, private, CGNAT, unspecified and multicast addresses
	// unless one of these covers them (internal/netscope). Nil: none.
	OutboundAllow []netip.Prefix
	// Agents configures the registry of external A2A agents (mcpv2 agents,
	// issue 23). Every node has the registry, its health-check goroutine
	// and the discover route's cache; without a Resolver it reads cards
	// through the node's own A2A client over OutboundClient.
	Agents AgentsConfig
	// Metrics, when set, receives the node's collectors (calls, refusals,
	// latency, bytes, blobs, connections, store sizes; node/metrics.go)
	// and go-libp2p's own (transport.WithMetrics); the node takes its
	// collectors off it again in Close. Nil: no metrics, at no cost.
	Metrics prometheus.Registerer
}

// Node is a running mcpv2 peer. Its methods are safe for concurrent use.
type Node struct {
	cfg       Config
	log       *slog.Logger
	host      host.Host // also the client's
	store     *store.Store
	reg       *skills.Registry
	policy    *Policy
	resources []resource // the static resources, fixed at New
	limits    *limiters
	finds     *limiters // per caller: Config.FindRate (orchestrate's finds)
	guardMode GuardMode
	guardMin  guard.Level
	scanSlots scanSlots // guard scans running (screen)
	secret    []byte
	clockSkew time.Duration
	now       func() time.Time
	maxMsg    int

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // stream handlers in flight; Add only under closeMu
	bg     sync.WaitGroup // the mesh goroutine and the sweeper

	disc      *discovery.Discovery // nil without Config.Mesh
	republish chan struct{}        // CardChanged → the mesh goroutine
	// closeMu guards closed, so that no handler starts once Close waits.
	closeMu sync.Mutex
	closed  bool

	cardMu    sync.Mutex                                                                                // guards cardSeq, cfg.HTTPEndpoint, cfg.MTLS and a2aCardFn
	a2aCardFn func(base, version, edge string, cred *protocol.EdgeCredentials) (json.RawMessage, error) // agent/a2a-card; nil: none
	cardSeq   uint64

	client *Client      // calls to other peers, over this node's host
	tracer trace.Tracer // the spans of the calls it runs

	status *statusWatch // the events Status reports (status.go)

	metrics *metrics // nil without Config.Metrics

	history *peerHistory // PeerHistory: the host's Notifiee and hole-punch tracer
	// inTransfers are the blob transfers the node receives (Transfers).
	inTransfers *transfers

	agents *agents.Registry // always set by New (startAgents)
	bridge bridge           // the bridged agents' skills and card entries

	// blobIdleTest, when positive, replaces blobIdle (nanoseconds) for the
	// blob streams this node serves; only tests set it, atomically, while
	// the node runs.
	blobIdleTest atomic.Int64

	outboundOnce sync.Once
	outbound     *http.Client // OutboundClient's
}

// Client returns the node's client: it calls other peers (mesh or HTTP
// edge) from this node's host and identity. It is closed by Close.
func (n *Node) Client() *Client { return n.client }

// httpProtocolID is libp2p's HTTP/1.1 over a stream, on which the A2A
// face serves A2A over libp2p (edge/a2a LibP2PProtocol): the resource
// manager caps its streams.
const httpProtocolID = libp2pproto.ID("/http/1.1")

// New starts a node: it loads (or creates) the identity, opens the store,
// registers the standard and custom skills, loads the policy and starts the
// libp2p host serving /mcpv2/rpc/1.0.0. A failed New leaves nothing running.
func New(cfg Config) (_ *Node, err error) {
	if cfg.DataDir == "" {
		return nil, errors.New("node: a data dir is required")
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("node: data dir: %w", err)
	}
	cfg.DataDir = abs
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = protocol.DefaultMaxMessage
	}
	if cfg.MaxFile <= 0 {
		cfg.MaxFile = store.DefaultMaxFileSize
	}
	if cfg.LLM == nil {
		cfg.LLM = llm.NewLocal()
	}
	if cfg.ClockSkew <= 0 {
		cfg.ClockSkew = protocol.DefaultClockSkew
	}
	if cfg.RateLimit == 0 {
		cfg.RateLimit = 200
	}
	if cfg.GuardThreshold == guard.None {
		cfg.GuardThreshold = guard.Critical
	}
	if cfg.Guard < GuardBlock || cfg.Guard > GuardOff || cfg.GuardThreshold < guard.Low || cfg.GuardThreshold > guard.Critical {
		return nil, fmt.Errorf("node: guard mode %v with threshold %v: want block, flag or off, and a threshold from low to critical", cfg.Guard, cfg.GuardThreshold)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	policyMust, skillsMust := cfg.PolicyFile != "", cfg.SkillsFile != ""
	if cfg.PolicyFile == "" {
		cfg.PolicyFile = filepath.Join(cfg.DataDir, "policy.json")
	}
	if cfg.SkillsFile == "" {
		cfg.SkillsFile = filepath.Join(cfg.DataDir, "custom_skills.json")
	}

	n := &Node{cfg: cfg, log: cfg.Logger, guardMode: cfg.Guard, guardMin: cfg.GuardThreshold,
		scanSlots: newScanSlots(runtime.GOMAXPROCS(0)), secret: cfg.Secret, clockSkew: cfg.ClockSkew, now: cfg.Now, maxMsg: cfg.MaxMessage,
		republish: make(chan struct{}, 1), tracer: tracerOf(cfg.TracerProvider), history: newPeerHistory(cfg.Now), inTransfers: newTransfers("in", cfg.Now)}
	// DHT queries and card fetches may ride a relayed (limited) connection:
	// a peer behind NAT is reached through its relay before any hole punch.
	n.ctx, n.cancel = context.WithCancel(network.WithAllowLimitedConn(context.Background(), "mcpv2 mesh"))
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Close())
		}
	}()

	if n.policy, err = LoadPolicy(cfg.PolicyFile, policyMust); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if n.resources, err = loadResources(&cfg); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	key, err := transport.LoadOrCreateIdentity(filepath.Join(cfg.DataDir, "identity.key"))
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	pid, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("node: identity: %w", err)
	}
	sopts := append([]store.Option{store.WithMaxFileSize(cfg.MaxFile)}, storeLimits(&cfg)...)
	if cfg.FilesDir != "" {
		sopts = append(sopts, store.WithFilesDir(cfg.FilesDir))
	}
	if n.store, err = store.Open(cfg.DataDir, sopts...); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n.startSweeper(sweepEvery(cfg.PartialTTL, cfg.ConversationTTL, cfg.TaskTTL))

	n.reg = skills.NewRegistry(n.log)
	skills.RegisterStandard(n.reg, skills.Deps{
		PeerID: pid.String(), Files: n.store.Files(), Conversations: n.store,
		LLM: cfg.LLM, LLMMode: cfg.LLMMode, Now: cfg.Now,
		Limits:       skills.Limits{MaxBatch: protocol.MaxBatchSize, MaxMessage: cfg.MaxMessage, RateLimit: cfg.RateLimit},
		Capabilities: n.capabilities(),
	})
	skills.RegisterScan(n.reg, func(ctx context.Context, skill string) (func(), error) {
		release, perr := n.scanSlot(ctx, skill)
		if perr != nil {
			return nil, perr // a nil *protocol.Error must not become a non-nil error
		}
		return release, nil
	})
	if cfg.Mesh != nil {
		n.registerOrchestrate()
	}
	if _, statErr := os.Stat(cfg.SkillsFile); statErr == nil || skillsMust {
		cl, cerr := custom.New(n.reg, custom.WithLogger(n.log), custom.WithMaxCommandRuns(cfg.MaxCommandRuns),
			custom.WithRunAs(cfg.RunAs), custom.WithA2AHTTPClient(n.OutboundClient())) // scratch: under os.TempDir, outside DataDir
		if cerr != nil {
			return nil, fmt.Errorf("node: custom skills file %s: %w", cfg.SkillsFile, cerr)
		}
		n.reg.AddCloser(cl) // n.reg.Close, in Close, stops its MCP servers
		if _, err = cl.LoadFile(cfg.SkillsFile); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
	}
	if err = n.startAgents(cfg.Agents); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n.warnUnknownGrants()
	burst := max(int(cfg.RateLimit), protocol.MaxBatchSize)
	n.limits = newLimiters(cfg.RateLimit, burst)
	n.finds = newFindLimiters(cfg.FindRate)

	hopts := []transport.Option{
		transport.WithIdentity(key),
		transport.WithMetrics(cfg.Metrics),
		transport.WithLogger(n.log),
		transport.WithHolePunchTracer(n.history),
		transport.WithProtocolLimit(libp2pproto.ID(protocol.RPCProtocolID), 256, 256, int64(4*cfg.MaxMessage)),
		transport.WithProtocolPeerLimit(libp2pproto.ID(protocol.RPCProtocolID), 64, 64, int64(2*cfg.MaxMessage+streamReserve)),
		transport.WithServiceLimit(rpcService, 256, 256, int64(4*cfg.MaxMessage)),
		transport.WithServicePeerLimit(rpcService, 64, 64, int64(2*cfg.MaxMessage+streamReserve)),
		// A2A over libp2p (edge/a2a LibP2P): one HTTP request per stream;
		// a peer holds at most 8 in flight, and a few more that are still
		// sending their headers.
		transport.WithProtocolLimit(httpProtocolID, 256, 256, int64(4*cfg.MaxMessage)),
		transport.WithProtocolPeerLimit(httpProtocolID, 16, 16, int64(2*cfg.MaxMessage)),
		transport.WithServiceLimit(blobService, 64, 64, 64*blobReserve),
		transport.WithServicePeerLimit(blobService, 8, 8, 8*blobReserve),
		// A stream holds one request and its reply at a time.
		transport.WithStreamMemory(int64(2*cfg.MaxMessage + streamReserve)),
	}
	for _, v := range blobVersions { // the same versions get handlers below
		hopts = append(hopts,
			transport.WithProtocolLimit(v.id, 64, 64, 64*blobReserve),
			transport.WithProtocolPeerLimit(v.id, 8, 8, 8*blobReserve))
	}
	if len(cfg.ListenAddrs) > 0 {
		addrs := make([]ma.Multiaddr, 0, len(cfg.ListenAddrs))
		for _, s := range cfg.ListenAddrs {
			a, err := ma.NewMultiaddr(s)
			if err != nil {
				return nil, fmt.Errorf("node: listen address %q: %w", s, err)
			}
			addrs = append(addrs, a)
		}
		hopts = append(hopts, transport.WithListenAddrs(addrs...))
	}
	var boot []peer.AddrInfo
	if cfg.Mesh != nil {
		var mopts []transport.Option
		if mopts, boot, err = meshHostOptions(cfg.Mesh); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
		hopts = append(hopts, mopts...)
	}
	hopts = append(hopts, cfg.HostOptions...)
	if n.host, err = transport.NewHost(hopts...); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n.host.Network().Notify(n.history) // before any peer: the mesh starts below
	if n.client, err = NewClient(n.host, WithSecret(cfg.Secret), WithMaxMessage(cfg.MaxMessage), WithClock(cfg.Now), WithWaitDirect(cfg.Mesh.waitDirect())); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if err = n.watchStatus(); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if cfg.Metrics != nil { // after the host: the collectors read it on scrape
		if n.metrics, err = newMetrics(cfg.Metrics, n); err != nil {
			return nil, fmt.Errorf("node: metrics: %w", err)
		}
		n.client.onDirectWait = n.metrics.directWait
	}
	n.host.SetStreamHandler(libp2pproto.ID(protocol.RPCProtocolID), n.handleRPC)
	for _, v := range blobVersions {
		n.host.SetStreamHandler(v.id, n.handleBlob)
	}
	if cfg.Mesh != nil {
		if err = n.startMesh(cfg.Mesh, boot); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
	}
	n.log.Debug("node started", "peer_id", pid.String(), "addrs", n.host.Addrs())
	return n, nil
}

func (n *Node) capabilities() []string {
	caps := []string{"tools/list", "tools/call", "agent/card", "batch"}
	if n.cfg.LLMMode {
		caps = append(caps, "llm_mode")
	}
	return caps
}

// Close stops serving, closes the host, the store and the outbound
// client's idle connections, and waits for stream
// handlers to finish. It is idempotent: a second call returns net.ErrClosed.
func (n *Node) Close() error {
	n.closeMu.Lock()
	if n.closed {
		n.closeMu.Unlock()
		return net.ErrClosed
	}
	n.closed = true
	n.closeMu.Unlock()
	n.metrics.unregister() // first: a scrape reads the host and store
	n.cancel()
	n.bg.Wait()
	var errs []error
	if n.disc != nil {
		errs = append(errs, n.disc.Close())
	}
	if n.host != nil {
		n.host.RemoveStreamHandler(libp2pproto.ID(protocol.RPCProtocolID))
		for _, v := range blobVersions {
			n.host.RemoveStreamHandler(v.id)
		}
		if n.client != nil {
			_ = n.client.Close() // nil, or net.ErrClosed: nothing to report
		}
		errs = append(errs, n.host.Close())
	}
	n.wg.Wait()
	if n.agents != nil {
		errs = append(errs, n.agents.Close())
	}
	if n.reg != nil {
		errs = append(errs, n.reg.Close()) // the custom.Loader: the custom skills' MCP servers
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	n.outboundOnce.Do(func() {}) // after it n.outbound is set or stays nil
	if n.outbound != nil {
		n.outbound.CloseIdleConnections() // its kept-alive connections and their goroutines
	}
	return errors.Join(errs...)
}

// Host returns the node's libp2p host.
func (n *Node) Host() host.Host { return n.host }

// ID returns the node's PeerID.
func (n *Node) ID() peer.ID { return n.host.ID() }

// Registry returns the node's skill registry (to add skills before serving).
func (n *Node) Registry() *skills.Registry { return n.reg }

// Store returns the node's store.
func (n *Node) Store() *store.Store { return n.store }

// DataDir returns the node's absolute data dir.
func (n *Node) DataDir() string { return n.cfg.DataDir }

// P2PAddrs returns the node's listen addresses with /p2p/<PeerID> appended,
// loopback and private ones included, sorted.
func (n *Node) P2PAddrs() []string {
	out := []string{}
	for _, a := range n.host.Addrs() {
		out = append(out, a.String()+"/p2p/"+n.host.ID().String())
	}
	slices.Sort(out)
	return out
}

// SetHTTPEndpoint records the edge's address for the agent card.
func (n *Node) SetHTTPEndpoint(addr string) {
	n.cardMu.Lock()
	n.cfg.HTTPEndpoint = addr
	n.cardMu.Unlock()
	n.CardChanged()
}

// SetMTLS records in the agent card (capabilities.mtls) whether the edge
// requires client certificates.
func (n *Node) SetMTLS(on bool) {
	n.cardMu.Lock()
	n.cfg.MTLS = on
	n.cardMu.Unlock()
	n.CardChanged()
}

// Card returns the node's current agent card. Its seq grows whenever it is
// built at a later millisecond, so republished cards always supersede.
func (n *Node) Card() protocol.AgentCard {
	n.cardMu.Lock()
	defer n.cardMu.Unlock()
	now := n.now()
	seq := uint64(now.UnixMilli())
	if seq <= n.cardSeq {
		seq = n.cardSeq + 1
	}
	n.cardSeq = seq
	name := n.cfg.Name
	id := n.host.ID().String()
	if name == "" {
		name = "mcpv2-" + id[len(id)-8:]
	}
	desc := n.cfg.Description
	if desc == "" {
		desc = "An mcpv2 agent."
	}
	return protocol.AgentCard{
		Name: name, Description: desc, Version: Version, PeerID: id,
		Addrs:            n.P2PAddrs(),
		ProtocolVersions: []string{protocol.Version},
		Skills:           n.reg.List(),
		Capabilities: protocol.Capabilities{
			LLMMode: n.cfg.LLMMode, Providers: slices.Clone(protocol.Providers),
			MaxBatch: protocol.MaxBatchSize, MTLS: n.cfg.MTLS,
		},
		Endpoints: protocol.Endpoints{HTTP: n.cfg.HTTPEndpoint},
		Seq:       seq,
		IssuedAt:  now.Unix(),
		Bridged:   n.bridgedCard(),
	}
}

// MintMeshSession mints a mesh session token from this node to the peer
// audience for purpose (protocol.PurposeRPC or PurposeBlob; SPEC §6), valid
// for ttl. It fails when the node has no secret.
func (n *Node) MintMeshSession(audience, purpose string, ttl time.Duration) (string, error) {
	if len(n.secret) == 0 {
		return "", errors.New("node: no secret configured for mesh sessions")
	}
	return protocol.MintMeshToken(n.secret, n.host.ID().String(), audience, purpose, n.now(), ttl), nil
}

// Authorize says whether c may run skill now, without running anything or
// writing an audit line: nil, or the error a call of it would be refused
// with (-32002 no such skill, -32009 not granted). It is dispatch's one
// rule (SPEC §6) asked ahead, for a face that keeps what a call carries:
// the A2A face stores a task's message only when the node would run it.
// Handle still decides every call. Safe for concurrent use.
func (n *Node) Authorize(c Caller, skill string) *protocol.Error {
	return n.authorize(c, &protocol.Slot{}, protocol.PurposeRPC, skill)
}
