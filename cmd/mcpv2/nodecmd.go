package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mcpv2/mcpv2/discovery"
	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/edge/a2a"
	"github.com/mcpv2/mcpv2/edge/mcp"
	"github.com/mcpv2/mcpv2/edge/rest"
	"github.com/mcpv2/mcpv2/internal/netscope"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/agents"
	"github.com/mcpv2/mcpv2/node/guard"
	"github.com/mcpv2/mcpv2/node/keys"
	"github.com/mcpv2/mcpv2/node/llm"
	"github.com/mcpv2/mcpv2/node/localapi"
	"github.com/mcpv2/mcpv2/node/skills/custom"
	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/transport"
)

func nodeCommand() *cli.Command {
	return &cli.Command{
		Name:   "node",
		Usage:  "run a peer (mesh always; HTTP edge with --port)",
		Flags:  append(nodeFlags(), profileFlags...),
		Action: runNode,
	}
}

// nodeFlags are the flags of `mcpv2 node`, made anew for each command that
// runs a node (mcpv2 mcp takes them too).
func nodeFlags() []cli.Flag {
	return append([]cli.Flag{
		configFlag, dataDirFlag, secretFlag, logLevelFlag, maxMessageFlag, bootstrapFlag, routableFlag, noNATFlag,
		&cli.StringFlag{Name: "dht-mode", EnvVars: []string{"MCPV2_DHT_MODE"}, Value: "auto", Usage: "DHT mode: auto (server when publicly reachable, or when no --bootstrap is given), server or client"},
		&cli.BoolFlag{Name: "no-mdns", EnvVars: []string{"MCPV2_NO_MDNS"}, Usage: "do not look for peers on the local network"},
		&cli.DurationFlag{Name: "republish", EnvVars: []string{"MCPV2_REPUBLISH"}, Value: discovery.DefaultRepublish,
			Usage: "put the card and provider records in the DHT again this often (and sooner when the routing table grows)"},
		&cli.DurationFlag{Name: "record-ttl", EnvVars: []string{"MCPV2_RECORD_TTL"}, Value: discovery.DefaultRecordTTL,
			Usage: "keep others' card and provider records this long after their last put: a stopped agent leaves finds within it; at least 3 × --republish, the same on every node"},
		&cli.BoolFlag{Name: "no-mesh", EnvVars: []string{"MCPV2_NO_MESH"}, Usage: "no DHT, mDNS or NAT traversal: serve only direct dials"},
		&cli.BoolFlag{Name: "relay-service", EnvVars: []string{"MCPV2_RELAY_SERVICE"},
			Usage: "be a public helper: circuit relay v2, AutoNAT server and DHT server"},
		&cli.DurationFlag{Name: "relay-max-duration", EnvVars: []string{"MCPV2_RELAY_MAX_DURATION"}, Value: transport.DefaultRelayDuration,
			Usage: "end a relayed connection after this long"},
		&cli.StringFlag{Name: "reachability", EnvVars: []string{"MCPV2_REACHABILITY"}, Value: "auto",
			Usage: "auto: AutoNAT finds out, starting from private when every address of this node is private and a --bootstrap peer is public (behind NAT: a relay slot at once); private: always keep a relay slot; public: never"},
		&cli.Int64Flag{Name: "relay-max-data", EnvVars: []string{"MCPV2_RELAY_MAX_DATA"}, Value: transport.DefaultRelayData,
			Usage: "end a relayed connection after this many bytes either way"},
		&cli.IntFlag{Name: "relay-max-circuits", EnvVars: []string{"MCPV2_RELAY_MAX_CIRCUITS"}, Value: transport.DefaultRelayCircuits,
			Usage: "relayed connections per peer"},
		&cli.StringSliceFlag{Name: "listen", EnvVars: []string{"MCPV2_LISTEN"},
			Usage: "multiaddrs to listen on (default TCP and QUIC-v1 on port 4001, every interface)"},
		&cli.IntFlag{Name: "p2p-port", EnvVars: []string{"MCPV2_P2P_PORT"}, Value: transport.DefaultPort,
			Usage: "TCP/UDP port of the default listen addresses (0: any free port)"},
		&cli.StringFlag{Name: "name", EnvVars: []string{"MCPV2_NAME"}, Usage: "agent name in the card"},
		&cli.StringFlag{Name: "description", EnvVars: []string{"MCPV2_DESCRIPTION"}, Usage: "agent description in the card"},
		&cli.BoolFlag{Name: "llm-mode", EnvVars: []string{"MCPV2_LLM_MODE"}, Usage: "ask keeps per-conversation history (persisted)"},
		&cli.StringFlag{Name: "policy", EnvVars: []string{"MCPV2_POLICY"}, Usage: "policy file granting skills per PeerID (default <data-dir>/policy.json)"},
		&cli.StringFlag{Name: "skills", EnvVars: []string{"MCPV2_SKILLS"}, Usage: "custom skills file (default <data-dir>/custom_skills.json)"},
		&cli.StringFlag{Name: "a2a-text", EnvVars: []string{"MCPV2_A2A_TEXT"}, Value: "ask",
			Usage: "what a plain-text A2A task runs: ask (answers the text whole) or orchestrate (split into subtasks by the orchestrator, each run by the best agent)"},
		&cli.StringFlag{Name: "a2a-grpc", EnvVars: []string{"MCPV2_A2A_GRPC"},
			Usage: "also serve the A2A gRPC binding (which the edge's port serves too) on this host:port, h2c, through the edge's credential checks and limits; needs --port"},
		&cli.StringFlag{Name: "resources", EnvVars: []string{"MCPV2_RESOURCES"}, Usage: "resources file: static resources served on MCP and REST (default: each file of <data-dir>/resources/)"},
		&cli.IntFlag{Name: "max-command-runs", EnvVars: []string{"MCPV2_MAX_COMMAND_RUNS"}, Value: custom.DefaultMaxCommandRuns,
			Usage: fmt.Sprintf("command-skill calls that run at once; more are refused with -32005 (0: %d)", custom.DefaultMaxCommandRuns)},
		&cli.StringFlag{Name: "run-as", EnvVars: []string{"MCPV2_RUN_AS"},
			Usage: "user (name or uid) that command skills run as; needs the node to run as root"},
		&cli.StringSliceFlag{Name: "outbound-allow", EnvVars: []string{"MCPV2_OUTBOUND_ALLOW"},
			Usage: "CIDR prefixes (or addresses) the node's requests to A2A agents at URLs may reach although loopback, link-local or private (a2a skills, agent discovery, health checks, A2A push notifications); repeatable, or comma-separated"},
		&cli.StringFlag{Name: "file-store", EnvVars: []string{"MCPV2_FILE_STORE"}, Usage: "directory of the file skills (default <data-dir>/files)"},
		&cli.Int64Flag{Name: "max-file", EnvVars: []string{"MCPV2_MAX_FILE"}, Value: 64 << 20, Usage: "largest stored file in bytes"},
		// Disk bounds (docs/spec.md §2, §3); 0 turns a cap off.
		&cli.Int64Flag{Name: "max-partial", EnvVars: []string{"MCPV2_MAX_PARTIAL"}, Value: store.DefaultMaxPartial,
			Usage: "bytes of one sender's unfinished uploads; a new one drops the sender's oldest (0: no cap)"},
		&cli.DurationFlag{Name: "partial-ttl", EnvVars: []string{"MCPV2_PARTIAL_TTL"}, Value: store.DefaultPartialTTL,
			Usage: "unfinished uploads untouched this long are removed while the node runs"},
		&cli.Int64Flag{Name: "max-store", EnvVars: []string{"MCPV2_MAX_STORE"}, Value: store.DefaultMaxStore,
			Usage: "quota in bytes on the files directory, unfinished uploads included; writes over it get -32004 (0: none)"},
		&cli.Int64Flag{Name: "max-tasks-bytes", EnvVars: []string{"MCPV2_MAX_TASKS_BYTES"}, Value: store.DefaultMaxTasksBytes,
			Usage: "bytes the A2A tasks may hold in state.db, one caller's a sixteenth; a caller's oldest finished tasks make room, else -32004 (0: no cap)"},
		&cli.DurationFlag{Name: "task-ttl", EnvVars: []string{"MCPV2_TASK_TTL"}, Value: store.DefaultTaskTTL,
			Usage: "keep a finished A2A task this long after its last update (0: until --max-tasks-bytes makes room)"},
		&cli.Int64Flag{Name: "audit-max-bytes", EnvVars: []string{"MCPV2_AUDIT_MAX_BYTES"}, Value: store.DefaultAuditMaxBytes,
			Usage: "rotate audit.jsonl at this size (0: never)"},
		&cli.IntFlag{Name: "audit-keep", EnvVars: []string{"MCPV2_AUDIT_KEEP"}, Value: store.DefaultAuditKeep,
			Usage: "rotated audit logs kept (audit.jsonl.1 is the newest)"},
		&cli.IntFlag{Name: "max-conversations", EnvVars: []string{"MCPV2_MAX_CONVERSATIONS"}, Value: store.DefaultMaxConversations,
			Usage: "LLM-mode conversations kept; the least recently used go first (0: no cap)"},
		&cli.DurationFlag{Name: "conversation-ttl", EnvVars: []string{"MCPV2_CONVERSATION_TTL"}, Value: store.DefaultConversationTTL,
			Usage: "drop a conversation this long after its last turn (0: never)"},
		&cli.Float64Flag{Name: "rate-limit", EnvVars: []string{"MCPV2_RATE_LIMIT"}, Value: 200, Usage: "calls per second per caller (0: unlimited)"},
		// External A2A agents (mcpv2 agents, issue 23).
		&cli.StringSliceFlag{Name: "agents", EnvVars: []string{"MCPV2_AGENTS"},
			Usage: "external A2A agents to register at start, as mcpv2 agents add does (repeatable, or comma-separated); one that cannot be read is logged and left out"},
		&cli.DurationFlag{Name: "agents-interval", EnvVars: []string{"MCPV2_AGENTS_INTERVAL"}, Value: agents.DefaultInterval,
			Usage: "health-check each registered A2A agent this often (±10% jitter)"},
		&cli.DurationFlag{Name: "agents-ttl", EnvVars: []string{"MCPV2_AGENTS_TTL"}, Value: agents.DefaultTTL,
			Usage: "use a registered agent's card this long before reading it again (the seed's discovery cache TTL)"},
		&cli.DurationFlag{Name: "agents-timeout", EnvVars: []string{"MCPV2_AGENTS_TIMEOUT"}, Value: agents.DefaultTimeout,
			Usage: "give up on one read of an agent's card after this long (it is then unhealthy)"},
		&cli.IntFlag{Name: "max-agents", EnvVars: []string{"MCPV2_MAX_AGENTS"}, Value: agents.DefaultMaxAgents,
			Usage: "register at most this many external A2A agents"},
		&cli.StringFlag{Name: "guard", EnvVars: []string{"MCPV2_GUARD"}, Value: "block", Usage: "prompt-injection guard over the string arguments of every skill call (custom skills may opt out): block (refuse at --guard-threshold, flag the rest), flag (audit only) or off"},
		&cli.StringFlag{Name: "guard-threshold", EnvVars: []string{"MCPV2_GUARD_THRESHOLD"}, Value: "critical", Usage: "the lowest threat level --guard block refuses: low, medium, high or critical"},
		// The HTTP edge (SPEC §5), on with --port.
		&cli.IntFlag{Name: "port", EnvVars: []string{"MCPV2_PORT"}, DefaultText: "no HTTP edge",
			Usage: "serve the HTTP edge on this TCP port (0: any free port, printed as MCPV2_BOUND_PORT)"},
		&cli.StringFlag{Name: "public-ip", EnvVars: []string{"MCPV2_PUBLIC_IP"}, Usage: "the edge's public address: bound to, and advertised"},
		&cli.StringFlag{Name: "bind-host", EnvVars: []string{"MCPV2_BIND_HOST"}, Usage: "bind the edge here instead (0.0.0.0: every interface)"},
		&cli.BoolFlag{Name: "port-fallback", EnvVars: []string{"MCPV2_PORT_FALLBACK"}, Usage: "if --port is busy, take the next free one"},
		&cli.StringFlag{Name: "port-file", EnvVars: []string{"MCPV2_PORT_FILE"}, Usage: "write the edge's bound port to this file"},
		&cli.GenericFlag{Name: "session-ttl", EnvVars: []string{"MCPV2_SESSION_TTL", "MCPV2_SESSION_TIMEOUT"}, Value: sessionTTLValue(),
			Usage: "lifetime of edge sessions: whole seconds (3600) or a Go duration (1h); MCPV2_SESSION_TIMEOUT is the seed's name"},
		&cli.GenericFlag{Name: "clock-skew", EnvVars: []string{"MCPV2_CLOCK_SKEW"}, Value: clockSkewValue(),
			Usage: "how far in the future a session may be issued: whole seconds (300) or a Go duration (5m)"},
		&cli.Float64Flag{Name: "session-rate-limit", EnvVars: []string{"MCPV2_SESSION_RATE_LIMIT"}, Value: edge.DefaultSessionRateLimit, Usage: "edge sessions issued per second per IP"},
		&cli.Float64Flag{Name: "find-rate-limit", EnvVars: []string{"MCPV2_FIND_RATE_LIMIT"}, Value: edge.DefaultFindRateLimit, Usage: "GET /mcpv2/find requests per second per client IP, whatever its sessions (negative: none)"},
		&cli.Float64Flag{Name: "gateway-rate-limit", EnvVars: []string{"MCPV2_GATEWAY_RATE_LIMIT"}, Value: edge.DefaultGatewayRateLimit, Usage: "gateway (POST /mcpv2/peers/…) requests per second per client IP, whatever its sessions (negative: none)"},
		&cli.IntFlag{Name: "max-inflight", EnvVars: []string{"MCPV2_MAX_INFLIGHT"}, Value: edge.DefaultMaxInFlight, Usage: "edge session requests served at once; more are refused with 503"},
		// The MCP face (docs/mcp.md): on the edge at /mcp, and mcpv2 mcp.
		&cli.StringFlag{Name: "prompts", EnvVars: []string{"MCPV2_PROMPTS"}, Usage: "MCP prompt templates file (default <data-dir>/prompts.json)"},
		&cli.StringSliceFlag{Name: "allowed-hosts", Aliases: []string{"mcp-allowed-hosts"}, EnvVars: []string{"MCPV2_ALLOWED_HOSTS", "MCPV2_MCP_ALLOWED_HOSTS"},
			Usage: "DNS names that the Host and Origin of edge requests may name (IP addresses and localhost always may); others get 403 on every endpoint (DNS rebinding protection). --mcp-allowed-hosts is its older name"},
		// Credentials (docs/spec.md §0): API keys (mcpv2 key) are always
		// accepted; these add OpenID Connect and refuse anonymous callers.
		&cli.BoolFlag{Name: "require-auth", EnvVars: []string{"MCPV2_REQUIRE_AUTH"},
			Usage: "the faces (/mcp, /a2a, /peers/…) answer a request without a credential 401 instead of serving it as an anonymous caller"},
		&cli.StringSliceFlag{Name: "oidc-issuer", EnvVars: []string{"MCPV2_OIDC_ISSUER"},
			Usage: "accept OpenID Connect access tokens (JWTs) of this issuer URL as Authorization: Bearer (repeatable); the edge serves /.well-known/oauth-protected-resource naming it"},
		&cli.StringFlag{Name: "oidc-audience", EnvVars: []string{"MCPV2_OIDC_AUDIENCE"},
			Usage: "the audience an access token must name (default: the URL of the face it is sent to, e.g. https://host:port/mcp)"},
		&cli.StringFlag{Name: "memory-profile", EnvVars: []string{"MCPV2_MEMORY_PROFILE"}, Value: defaultMemoryProfile,
			Usage: "garbage collector setting: small (GOGC 100, least memory: laptops, many nodes on one host), medium (200) or large (400, least CPU per request: edges and relays); the default is large with --port or --relay-service, small otherwise; GOGC and GOMEMLIMIT override it"},
		&cli.StringFlag{Name: "otlp-endpoint", EnvVars: []string{"MCPV2_OTLP_ENDPOINT"}, Usage: otlpEndpointUsage},
	}, slices.Concat(llmFlags, tlsFlags, metricsFlags, uiFlags())...)
}

func runNode(c *cli.Context) error {
	if c.NArg() > 0 {
		// A stray word is most often a flag's value that lost its flag.
		return fmt.Errorf("node: unexpected argument %q: the node takes only flags (mcpv2 node --help)", c.Args().First())
	}
	prof, err := startProfiles(c)
	if err != nil {
		return err
	}
	r, err := launchNode(c, c.App.Writer, false)
	if err != nil {
		return errors.Join(err, prof.stop())
	}
	<-c.Context.Done()
	r.log.Info("shutting down")
	heapErr := prof.writeHeap()
	return errors.Join(r.Close(), heapErr, prof.stop())
}

// runningNode is a node that launchNode started: the node, its HTTP edge
// (nil without --port) and its MCP face (nil when neither the edge nor
// mcpv2 mcp serves it).
type runningNode struct {
	n    *node.Node
	srv  *edge.Server
	face *mcp.Face
	a2a  *a2a.Face
	// grpc serves --a2a-grpc (nil without it).
	grpc *a2a.GRPCListener
	// a2aP2P serves A2A over libp2p on the node's host (every node, with
	// an edge or not: docs/a2a.md "A2A over libp2p").
	a2aP2P *a2a.LibP2P
	rest   *rest.Face    // the seed's /api/v1 (nil without --port)
	api    *localapi.API // the control socket (mcpv2 status, id, key)
	log    *slog.Logger
	// metrics serves --metrics (nil without it).
	metrics *metricsServer
	// tp exports the spans of --otlp-endpoint (nil without it): made by
	// launchNode, shut down (flushing) by Close after the node and the
	// edge, which only use it.
	tp *sdktrace.TracerProvider
	// stopAgents stops registering --agents (registerKnownAgents; nil
	// before launchNode's end).
	stopAgents func()
}

// Close stops registering --agents first (an add still reading a card is
// cancelled), then the metrics server (no scrape reads a closed part),
// then the control socket, then the REST and A2A faces (A2A over libp2p
// before the face it calls: its Close waits for its handlers) — which end their
// open task streams, so that the edge's shutdown does not wait its grace
// for them (a face's route answers 503 once it is closed) — then the edge
// (no new requests; the requests in flight finish), then the MCP face,
// then the node.
func (r *runningNode) Close() error {
	if r.stopAgents != nil {
		r.stopAgents()
	}
	var errs []error
	if r.metrics != nil {
		errs = append(errs, r.metrics.Close())
	}
	if r.api != nil {
		errs = append(errs, r.api.Close())
	}
	if r.rest != nil {
		errs = append(errs, r.rest.Close())
	}
	if r.grpc != nil {
		errs = append(errs, r.grpc.Close())
	}
	if r.a2aP2P != nil {
		errs = append(errs, r.a2aP2P.Close())
	}
	if r.a2a != nil {
		errs = append(errs, r.a2a.Close())
	}
	if r.srv != nil {
		errs = append(errs, r.srv.Close())
	}
	if r.face != nil {
		errs = append(errs, r.face.Close())
	}
	errs = append(errs, r.n.Close())
	shutdownTracer(r.tp, r.log)
	return errors.Join(errs...)
}

// launchNode builds and starts the node of the node flags, its edge with
// --port and the MCP face (mounted at /mcp on the edge; made also without an
// edge when face is set, for mcpv2 mcp), writes the banner to banner and
// logs "ready". A failure leaves nothing running.
func launchNode(c *cli.Context, banner io.Writer, face bool) (_ *runningNode, err error) {
	log, err := logger(c)
	if err != nil {
		return nil, err
	}
	profile, err := tuneGC(c.String("memory-profile"), c.IsSet("port") || c.Bool("relay-service"))
	if err != nil {
		return nil, err
	}
	log.Debug("garbage collector", "memory profile", profile)
	if err := applyRoutable(c); err != nil {
		return nil, err
	}
	if err := checkTLSFlags(c); err != nil {
		return nil, err
	}
	dir, err := dataDir(c)
	if err != nil {
		return nil, err
	}
	backend, err := llmBackend(c)
	if err != nil {
		return nil, err
	}
	listen, err := nodeListen(c)
	if err != nil {
		return nil, err
	}
	rl := c.Float64("rate-limit")
	if rl == 0 {
		rl = -1
	}
	guardMode, err := node.ParseGuardMode(c.String("guard"))
	if err != nil {
		return nil, fmt.Errorf("--guard: %w", err)
	}
	guardMin, err := guard.ParseLevel(c.String("guard-threshold"))
	if err != nil || guardMin == guard.None {
		return nil, fmt.Errorf("--guard-threshold %q: want low, medium, high or critical", c.String("guard-threshold"))
	}
	var mesh *node.MeshConfig
	if !c.Bool("no-mesh") {
		mesh = &node.MeshConfig{
			Bootstrap: splitList(c.StringSlice("bootstrap")), Mode: c.String("dht-mode"),
			Republish: c.Duration("republish"), RecordTTL: c.Duration("record-ttl"),
			NoMDNS: c.Bool("no-mdns"), NoNAT: c.Bool("no-nat"), RelayService: c.Bool("relay-service"), Reachability: c.String("reachability"),
			RelayLimits: transport.RelayLimits{Duration: c.Duration("relay-max-duration"), Data: c.Int64("relay-max-data"), Circuits: c.Int("relay-max-circuits")},
		}
	}
	var ecfg *edge.Config
	if c.IsSet("port") {
		ecfg = &edge.Config{
			Port: c.Int("port"), PublicIP: c.String("public-ip"), BindHost: c.String("bind-host"),
			PortFallback: c.Bool("port-fallback"), PortFile: c.String("port-file"),
			Secret: []byte(c.String("secret")), SessionTTL: secondsOf(c, "session-ttl"),
			ClockSkew: secondsOf(c, "clock-skew"), RateLimit: rl,
			SessionRateLimit: c.Float64("session-rate-limit"), MaxBody: int64(c.Int("max-message")),
			FindRateLimit: c.Float64("find-rate-limit"), GatewayRateLimit: c.Float64("gateway-rate-limit"), MaxInFlight: c.Int("max-inflight"),
			LLMMode: c.Bool("llm-mode"), Logger: log, AllowedHosts: splitList(c.StringSlice("allowed-hosts")),
			TLSCert: c.String("tls-cert"), TLSKey: c.String("tls-key"), TLSClientCA: c.String("tls-client-ca"),
			RequireAuth: c.Bool("require-auth"), OIDCIssuers: splitList(c.StringSlice("oidc-issuer")), OIDCAudience: c.String("oidc-audience"),
		}
	}
	if err := checkNode(c, listen, mesh, ecfg); err != nil {
		return nil, err
	}
	if p, must := promptsFile(c, dir); ecfg != nil || face {
		if _, err := mcp.LoadPrompts(p, must); err != nil {
			return nil, err
		}
	}
	tp, err := tracerProvider(c.String("otlp-endpoint"))
	if err != nil {
		return nil, err
	}
	// One provider for the node and the edge: the SDK's, or ids only.
	// (A nil *TracerProvider is not a nil interface.)
	tpi := node.NewIDsTracerProvider()
	if tp != nil {
		tpi = tp
	}
	if ecfg != nil {
		ecfg.TracerProvider = tpi
	}
	ms, err := metricsFromFlags(c, log)
	if err != nil {
		shutdownTracer(tp, log)
		return nil, err
	}
	var reg prometheus.Registerer // nil without --metrics
	var hostOpts []transport.Option
	if ms != nil {
		reg = ms.reg
		if c.Bool("metrics-rcmgr") {
			hostOpts = append(hostOpts, transport.WithResourceManagerMetrics())
		}
		if ecfg != nil {
			ecfg.Metrics = reg
		}
	}
	outAllow, err := netscope.ParseAllow(c.StringSlice("outbound-allow"))
	if err != nil {
		shutdownTracer(tp, log)
		if ms != nil {
			err = errors.Join(err, ms.Close())
		}
		return nil, err
	}
	n, err := node.New(node.Config{
		Mesh: mesh, Metrics: reg, HostOptions: hostOpts, OutboundAllow: outAllow,
		DataDir: dir, ListenAddrs: listen,
		Name: c.String("name"), Description: c.String("description"),
		MaxMessage: c.Int("max-message"), MaxFile: c.Int64("max-file"), FilesDir: c.String("file-store"),
		LLM: backend, LLMMode: c.Bool("llm-mode"), Secret: []byte(c.String("secret")),
		PolicyFile: c.String("policy"), SkillsFile: c.String("skills"), ResourcesFile: c.String("resources"), RateLimit: rl, FindRate: c.Float64("find-rate-limit"),
		Guard: guardMode, GuardThreshold: guardMin,
		MaxCommandRuns: c.Int("max-command-runs"), RunAs: c.String("run-as"),
		MaxPartial: noneIfZero(c.Int64("max-partial")), PartialTTL: c.Duration("partial-ttl"), MaxStore: noneIfZero(c.Int64("max-store")),
		MaxTasksBytes: noneIfZero(c.Int64("max-tasks-bytes")),
		AuditMaxBytes: noneIfZero(c.Int64("audit-max-bytes")), AuditKeep: noneIfZero(c.Int("audit-keep")),
		MaxConversations: noneIfZero(c.Int("max-conversations")), ConversationTTL: noneIfZero(c.Duration("conversation-ttl")),
		ClockSkew: secondsOf(c, "clock-skew"), TaskTTL: noneIfZero(c.Duration("task-ttl")),
		Logger: log, TracerProvider: tpi,
		Agents: node.AgentsConfig{Interval: c.Duration("agents-interval"), TTL: c.Duration("agents-ttl"),
			Timeout: c.Duration("agents-timeout"), Max: c.Int("max-agents")},
	})
	if err != nil {
		shutdownTracer(tp, log)
		if ms != nil {
			err = errors.Join(err, ms.Close())
		}
		return nil, portHint(c, err)
	}
	r := &runningNode{n: n, log: log, metrics: ms, tp: tp} // from here r.Close shuts tp down
	defer func() {
		if err != nil {
			err = errors.Join(err, r.Close())
		}
	}()
	// The A2A face: on the edge, and for any edge that serves this node's
	// card for it (agent/a2a-card over the mesh) even without one.
	textSkill := c.String("a2a-text")
	if textSkill == a2a.TextOrchestrate && c.Bool("no-mesh") {
		return nil, errors.New("--a2a-text orchestrate needs the mesh (the orchestrator finds agents in the DHT): drop --no-mesh, or use --a2a-text ask")
	}
	if r.a2a, err = a2a.New(n, a2a.WithLogger(log), a2a.WithMetrics(reg), a2a.WithTextSkill(textSkill), a2a.WithOutboundAllow(outAllow)); err != nil {
		return nil, fmt.Errorf("--a2a-text: %w", err)
	}
	n.SetA2ACard(r.a2a.CardFor)
	if ecfg != nil || face {
		prompts, must := promptsFile(c, dir)
		// MCP tasks run on the A2A face's task engine (one store, one
		// event log for both faces).
		if r.face, err = mcp.New(n, mcp.WithLogger(log), mcp.WithVersion(node.Version), mcp.WithPromptsFile(prompts, must), mcp.WithMetrics(reg),
			mcp.WithTasks(r.a2a, noneIfZero(c.Duration("task-ttl")))); err != nil {
			return nil, err
		}
	}
	var ring *keys.Ring // the edge's key ring, which the local API changes too
	if ecfg != nil {
		// API keys (mcpv2 key): the ring re-reads keys.json when the
		// command changes it, so a revocation is seen by the next request.
		if ring, err = keys.Open(filepath.Join(n.DataDir(), keys.FileName), keys.WithLogger(log)); err != nil {
			return nil, err
		}
		ecfg.Keys = ring
		ecfg.AnonymousGrants = n.AnonymousGrants()
		if r.srv, err = edge.New(n, *ecfg); err != nil {
			return nil, err
		}
		r.face.Mount(r.srv, mcp.HTTPOptions{})
		r.a2a.Mount(r.srv)
		if addr := c.String("a2a-grpc"); addr != "" {
			if r.grpc, err = r.a2a.ListenGRPC(addr); err != nil {
				return nil, err
			}
			log.Info("A2A gRPC listener", "addr", r.grpc.Addr().String())
		}
		// The seed's REST API (/api/v1, /docs) beside the two faces, through
		// them and the node's dispatch.
		if r.rest, err = rest.New(n, rest.WithLogger(log), rest.WithMCP(r.face), rest.WithTasks(r.a2a), rest.WithAgents(n)); err != nil {
			return nil, err
		}
		r.rest.Mount(r.srv)
		if err = r.srv.Start(); err != nil {
			return nil, err
		}
		n.SetHTTPEndpoint(r.srv.PeerAddress())
		n.SetMTLS(r.srv.MTLS())
	}
	// A2A over libp2p, once the face has its edge (whose URL its cards
	// name), or has none.
	if r.a2aP2P, err = r.a2a.ServeLibP2P(n.Host()); err != nil {
		return nil, err
	}
	// The local node API on <data-dir>/control.sock (mcpv2 status, id and
	// key ask it), once the node and its edge are up.
	apiOpts := []localapi.Option{localapi.WithLogger(log), localapi.WithVersion(c.App.Version)}
	uiOpts, err := uiOptions(c)
	if err != nil {
		return nil, err
	}
	apiOpts = append(apiOpts, uiOpts...)
	if r.srv != nil {
		apiOpts = append(apiOpts, localapi.WithEdgeURLs(r.srv.URLs()...), localapi.WithKeys(ring), localapi.WithSessions(mcpSessions{r.face}))
	}
	if r.api, err = localapi.New(n, apiOpts...); err != nil {
		return nil, err
	}
	srv := r.srv
	fmt.Fprintf(banner, "MCPV2_PEER_ID=%s\n", n.ID())
	for _, a := range n.P2PAddrs() {
		fmt.Fprintf(banner, "MCPV2_P2P_ADDRESS=%s\n", a)
	}
	if srv != nil {
		for _, l := range srv.Banner() {
			fmt.Fprintln(banner, l)
		}
	}
	fmt.Fprintf(banner, "MCPV2_CONTROL=%s\n", r.api.Socket())
	if l := r.api.DashboardLink(); l != "" {
		fmt.Fprintf(banner, "MCPV2_UI=%s\n", l)
	}
	if ms != nil {
		fmt.Fprintf(banner, "MCPV2_METRICS=%s\n", ms.URL())
	}
	fmt.Fprintf(banner, "MCPV2_DATA_DIR=%s\n", n.DataDir())
	if f, ok := banner.(*os.File); ok {
		_ = f.Sync()
	}
	ready := []any{"peer_id", n.ID().String(), "listen", n.Status().Listen}
	if srv != nil {
		ready = append(ready, "edge", srv.URLs())
	}
	log.Info("ready", append(ready, "access", n.AccessSummary())...)
	r.stopAgents = registerKnownAgents(c.Context, n, splitList(c.StringSlice("agents")), c.Int("max-agents"), log)
	return r, nil
}

// promptsFile is the MCP face's prompts file: --prompts, which must exist,
// or <data-dir>/prompts.json, which may not.
func promptsFile(c *cli.Context, dir string) (path string, mustExist bool) {
	if p := c.String("prompts"); p != "" {
		return p, true
	}
	return filepath.Join(dir, "prompts.json"), false
}

// nodeListen returns the multiaddrs the node listens on: --listen, or else
// the default TCP and QUIC-v1 addresses on --p2p-port.
func nodeListen(c *cli.Context) ([]string, error) {
	if l := splitList(c.StringSlice("listen")); len(l) > 0 {
		return l, nil
	}
	port := c.Int("p2p-port")
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("--p2p-port %d is not a port: give 1-65535, or 0 for any free port", port)
	}
	var out []string
	for _, a := range transport.DefaultListenAddrs(port) {
		out = append(out, a.String())
	}
	return out, nil
}

// edgeOnlyFlags configure the HTTP edge, which runs only with --port.
var edgeOnlyFlags = []string{"public-ip", "bind-host", "port-fallback", "port-file", "allowed-hosts", "require-auth", "oidc-issuer", "oidc-audience", "a2a-grpc"}

// nonNegativeFlags are the numeric flags of `mcpv2 node` where a negative
// value means nothing (0 is "off" or "the default", as each usage says).
var nonNegativeFlags = []string{
	"task-ttl", "max-tasks-bytes", "max-message", "max-file", "max-partial", "partial-ttl", "max-store", "audit-max-bytes", "audit-keep",
	"max-conversations", "conversation-ttl", "rate-limit", "max-command-runs", "max-inflight",
	"relay-max-duration", "relay-max-data", "relay-max-circuits",
}

// checkNode validates what the flags of `mcpv2 node` ask for before
// anything starts (the checks that node.New and edge.New would make only
// once the mesh is up): numbers in range, the edge's flags without --port,
// the listen multiaddrs and their ports, the mesh's bootstrap addresses and
// DHT mode, and the edge's addresses, TLS files and port. It calls the same
// parse functions as the constructors, so a refusal reads the same.
func checkNode(c *cli.Context, listen []string, mesh *node.MeshConfig, ecfg *edge.Config) error {
	if _, err := uiOptions(c); err != nil {
		return err
	}
	if ecfg == nil {
		for _, f := range edgeOnlyFlags {
			if c.IsSet(f) {
				return fmt.Errorf("--%s configures the HTTP edge, which runs only with --port: add --port 8000 (or --port 0 for any free port)", f)
			}
		}
	} else if p := c.Int("port"); p < 0 || p > 65535 {
		return fmt.Errorf("--port %d is not a TCP port: give 1-65535, or 0 for any free port", p)
	}
	for _, f := range nonNegativeFlags {
		neg := false
		switch v := c.Value(f).(type) {
		case int:
			neg = v < 0
		case int64:
			neg = v < 0
		case float64:
			neg = v < 0
		case time.Duration:
			neg = v < 0
		}
		if neg {
			return fmt.Errorf("--%s %v is negative: give 0 or more (mcpv2 node --help says what 0 means)", f, c.Value(f))
		}
	}
	addrs := make([]ma.Multiaddr, 0, len(listen))
	for _, l := range listen {
		a, err := ma.NewMultiaddr(l)
		if err != nil {
			return fmt.Errorf("--listen %q is not a multiaddr (%v): give e.g. /ip4/0.0.0.0/tcp/4001 or /ip4/0.0.0.0/udp/4001/quic-v1", l, err)
		}
		addrs = append(addrs, a)
	}
	if err := transport.CheckListenAddrs(addrs...); err != nil {
		return portHint(c, err)
	}
	if mesh != nil {
		if err := mesh.Check(); err != nil {
			return err
		}
	}
	if ecfg != nil {
		if err := edge.Check(*ecfg); err != nil {
			return err
		}
	}
	return nil
}

// portHint adds to an error about a busy P2P port how to choose another.
func portHint(c *cli.Context, err error) error {
	if !errors.Is(err, transport.ErrPortInUse) {
		return err
	}
	if c.IsSet("listen") {
		return fmt.Errorf("%w: pick other ports in --listen, or port 0 for any free port", err)
	}
	return fmt.Errorf("%w: pick another with --p2p-port N, or --p2p-port 0 for any free port", err)
}

// llmBackend builds the backend of --llm/--llm-url/--llm-model; the key comes
// only from MCPV2_LLM_API_KEY or MCPV2_LLM_API_KEY_FILE.
// llmFlags choose the LLM backend (llmBackend): of `mcpv2 node` and of
// `mcpv2 orchestrate`, which plans and summarizes with it.
var llmFlags = []cli.Flag{
	&cli.StringFlag{Name: "llm", EnvVars: []string{"MCPV2_LLM"}, Value: "local",
		Usage: "LLM backend: local, openai (any OpenAI-compatible server), anthropic or gemini"},
	&cli.StringFlag{Name: "llm-url", EnvVars: []string{"MCPV2_LLM_URL"}, Usage: "backend base URL (setting it alone selects openai)"},
	&cli.StringFlag{Name: "llm-model", EnvVars: []string{"MCPV2_LLM_MODEL"}, Usage: "backend model name"},
}

func llmBackend(c *cli.Context) (llm.Backend, error) {
	kind := c.String("llm")
	if kind == "local" && c.String("llm-url") != "" && !c.IsSet("llm") {
		kind = "openai"
	}
	if kind == "local" {
		return llm.NewLocal(), nil
	}
	if k := strings.ToLower(strings.TrimSpace(kind)); k != llm.KindLocal && slices.Contains(llm.Kinds(), k) && strings.TrimSpace(c.String("llm-model")) == "" {
		return nil, fmt.Errorf("--llm %s needs a model: pass --llm-model NAME (or set MCPV2_LLM_MODEL), the name the backend knows it by", kind)
	}
	key, err := llm.KeyFromEnv()
	if err != nil {
		return nil, err
	}
	return llm.New(kind, c.String("llm-url"), c.String("llm-model"), key)
}

// identityPath is where a data dir keeps its key.
func identityPath(dir string) string { return filepath.Join(dir, "identity.key") }

// noneIfZero maps a flag's 0 ("off") to node.Config's negative ("none"),
// since a zero Config field means the default.
func noneIfZero[T int | int64 | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// registerKnownAgents registers the agents of --agents (the seed's
// MCP_A2A_KNOWN_AGENT_URLS) as the operator, at most --max-agents of them,
// in the background: start-up does not wait for them (the node is ready
// while their cards are read), and an agent that cannot be read is logged
// and left out (mcpv2 agents add retries). node.AddAgents bounds the work:
// agents.DefaultParallel cards at a time, each within the registry's
// --agents-timeout. The returned stop cancels what is left and waits for
// it (runningNode.Close calls it before closing the node).
func registerKnownAgents(ctx context.Context, n *node.Node, urls []string, max int, log *slog.Logger) (stop func()) {
	if max > 0 && len(urls) > max {
		log.Warn("--agents: more agents than --max-agents; the rest are not registered", "max", max, "left_out", len(urls)-max)
		urls = urls[:max]
	}
	if len(urls) == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for chunk := range slices.Chunk(urls, agents.MaxDiscover) {
			list, err := n.AddAgents(ctx, node.Operator(), chunk, false)
			if ctx.Err() != nil {
				return // stopping: not the agents' fault
			}
			if err != nil {
				log.Warn("--agents: not registered", "urls", chunk, "err", err)
				continue
			}
			for _, a := range list {
				if a.LastError != "" {
					log.Warn("--agents: not registered", "url", a.URL, "err", a.LastError)
				} else {
					log.Info("--agents: registered", "url", a.URL)
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
