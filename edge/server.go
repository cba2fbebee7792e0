package edge

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcpv2/mcpv2/protocol"
)

// Backend is what the edge needs from a node; *node.Node satisfies it. All
// methods may be called concurrently, from the edge's request goroutines.
type Backend interface {
	// PeerID returns the node's PeerID, for health answers.
	PeerID() string
	// Card returns the node's current agent card.
	Card() protocol.AgentCard
	// Handle runs a slot or batch message for caller and returns the
	// response message, nil when nothing is to be sent (notifications).
	// refused != nil means the whole message was refused; its error response
	// is in out. Handle writes the audit lines of the message.
	Handle(ctx context.Context, c protocol.Caller, msg []byte) (out []byte, refused *protocol.Error)
	// Forward sends a raw slot or batch message from caller c to the mesh
	// peer peerID and returns its raw answer (nil for notifications). It
	// forwards with c's own grants (SPEC §6): a slot c may not run is
	// answered -32009 without leaving the node, and the node's mesh session
	// goes only with a secret holder's slots. An error that wraps a
	// *protocol.Error is passed on to the HTTP caller as that error.
	Forward(ctx context.Context, c protocol.Caller, peerID string, msg []byte) ([]byte, error)
	// Find returns ranked cards for a skill name or tag, best first, at most
	// limit of them. An error wrapping ErrFindUnavailable means discovery is
	// off on this node (HTTP 501).
	Find(ctx context.Context, skillOrTag string, limit int) ([]protocol.FindResult, error)
	// Audit writes one audit line for a request that did not reach Handle:
	// a refusal by the edge (perr != nil), or an edge-only call (health,
	// session issue, agent card, find, gateway forward; perr == nil). method
	// is "http METHOD PATH"; start is when the request arrived; ctx carries
	// the edge's span of the request, whose trace and span ids the line
	// names.
	Audit(ctx context.Context, c protocol.Caller, method string, perr *protocol.Error, start time.Time)
}

// ErrFindUnavailable is wrapped by a Backend.Find error when the node runs
// without discovery; the edge answers GET /mcpv2/find with HTTP 501. It is
// protocol.ErrNoDiscovery, so that a node can return it without importing
// the edge.
var ErrFindUnavailable = protocol.ErrNoDiscovery

// Defaults of Config.
const (
	// DefaultSessionTTL is how long an issued session token is valid.
	DefaultSessionTTL = time.Hour
	// DefaultRateLimit is the request rate allowed per session, per second
	// (MCPV2_RATE_LIMIT).
	DefaultRateLimit = 200
	// DefaultSessionRateLimit is the session issue rate allowed per client
	// IP, per second (MCPV2_SESSION_RATE_LIMIT).
	DefaultSessionRateLimit = 20
	// DefaultMaxBody is the request body cap in bytes (8 MiB, the mesh's
	// message cap).
	DefaultMaxBody = protocol.DefaultMaxMessage
	// DefaultMaxInFlight is how many session requests are served at once.
	DefaultMaxInFlight = 32
	// DefaultFindRateLimit is the finds per second allowed per client IP.
	DefaultFindRateLimit = 2
	// DefaultGatewayRateLimit is the gateway forwards per second allowed
	// per client IP.
	DefaultGatewayRateLimit = 50
	// MaxPortFallback is how many ports after Config.Port are tried when
	// Config.PortFallback is set and the port is busy.
	MaxPortFallback = 100
	// shutdownGrace bounds how long Close waits for requests in flight.
	shutdownGrace = 5 * time.Second
)

// Config configures a Server. The zero value of each field selects its
// default; Config is read once by New and not kept by reference.
type Config struct {
	// Port is the TCP port to listen on; 0 picks a free port (BoundPort
	// says which). The port is strict: a busy port fails New unless
	// PortFallback is set.
	Port int
	// PublicIP is the address advertised in PeerAddress and the agent card.
	// When BindHost is empty the edge also binds to it, so it must then be
	// an address of this machine.
	PublicIP string
	// BindHost overrides the address to listen on. "0.0.0.0" (or "::")
	// listens on every interface; only an explicit BindHost does that.
	// Empty: PublicIP, else the detected public address of a local
	// interface (a global unicast IPv4 preferred; loopback only when the
	// machine has nothing else, which is logged). With neither BindHost
	// nor PublicIP set and a detected address, the edge also serves
	// 127.0.0.1 on the same port, so that the tools of this machine reach
	// it there; when that port is busy on loopback a warning is logged and
	// the edge serves the detected address only.
	BindHost string
	// PortFallback tries the next ports (at most MaxPortFallback of them)
	// when Port is busy.
	PortFallback bool
	// PortFile, when set, receives the bound port (decimal and a newline),
	// written atomically once the listener is bound.
	PortFile string
	// Secret is the HMAC key of session tokens. Empty: a random secret is
	// generated and a log line says so (sessions then end with the process).
	// New copies it.
	Secret []byte
	// SessionTTL is the lifetime of issued sessions (default 1h).
	SessionTTL time.Duration
	// ClockSkew is how far in the future a token's issued_at may be
	// (default 300s; the CLI reads MCPV2_CLOCK_SKEW).
	ClockSkew time.Duration
	// RateLimit is the requests per second allowed per session (default
	// 200); a negative value turns the limit off.
	RateLimit float64
	// SessionRateLimit is the session issues per second allowed per client
	// IP (default 20); a negative value turns the limit off.
	SessionRateLimit float64
	// MaxBody caps request bodies in bytes (default 8 MiB).
	MaxBody int64
	// MaxInFlight caps the session requests (POST /mcpv2, the AI endpoint,
	// the gateway, find, faces on Mux) served at once; more are refused at
	// once with 503 and -32005 (default 32). With MaxBody it bounds the
	// memory that request bodies can hold.
	MaxInFlight int
	// FindRateLimit is the GET /mcpv2/find requests per second allowed per
	// client IP, whatever its sessions (default 2; each find is a DHT lookup
	// and card fetches); a negative value turns the limit off.
	FindRateLimit float64
	// GatewayRateLimit is the POST /mcpv2/peers/… requests per second
	// allowed per client IP, whatever its sessions (default 50); a negative
	// value turns the limit off.
	GatewayRateLimit float64
	// AllowedHosts are DNS names (not IPs: every IP literal, and localhost,
	// are allowed) that a request's Host and Origin headers may name, for
	// an edge reached by a name. A request naming any other host is refused
	// with 403 on every endpoint: a web page that rebinds its DNS name to
	// the edge's address must not reach it (DNS rebinding).
	AllowedHosts []string
	// LLMMode is reported by the health endpoint.
	LLMMode bool
	// TLSCert and TLSKey are the paths of a PEM certificate (the server's
	// first, then its chain) and of its private key. When set, the edge
	// serves HTTPS only and PeerAddress is https://…; one without the other
	// fails New, as does a file that is missing, unreadable, not PEM, or a
	// key that does not match the certificate. Read once, by New.
	TLSCert, TLSKey string
	// TLSClientCA is the path of a PEM bundle of CA certificates. When set,
	// the edge requires mutual TLS: every client must present a certificate
	// signed by one of them, else the handshake fails (health answers
	// "mtls": true). It needs TLSCert and TLSKey; a file without a
	// certificate fails New. Sessions are unchanged: a session's subject is
	// still the client's IP.
	TLSClientCA string
	// Logger receives the edge's logs (default: discard). A remote caller's
	// mistake logs at Debug.
	Logger *slog.Logger
	// Now is the clock of tokens and rate limits (default time.Now).
	Now func() time.Time
	// Keys verifies API keys, an Authorization: Bearer credential on every
	// endpoint (docs/spec.md §0); nil accepts none.
	Keys KeyVerifier
	// OIDCIssuers are the OpenID Connect issuers whose access tokens (JWTs)
	// the edge accepts as Authorization: Bearer; empty accepts none.
	OIDCIssuers []string
	// OIDCAudience is the audience (RFC 8707 resource) an access token
	// must name; empty: the URL of the resource the request is for (the
	// face's URL as the client reached it).
	OIDCAudience string
	// RequireAuth refuses a request without a credential on the faces (MCP,
	// A2A, peer faces) with 401 and a WWW-Authenticate challenge, instead of
	// serving it as an anonymous caller.
	RequireAuth bool
	// AnonymousGrants says that the node's policy grants anonymous HTTP
	// callers ("http") a skill beyond the open ones; with an OpenID Connect
	// issuer and without it, a face answers a request with no credential
	// 401, sending an OAuth client to log in.
	AnonymousGrants bool
	// TracerProvider starts a span for every HTTP request, the child of its
	// traceparent header: the SDK's with --otlp-endpoint, else the node's
	// ids-only one (node.NewIDsTracerProvider; cmd passes the same to the
	// node). Nil is OpenTelemetry's noop provider: the edge then makes no
	// span of its own, its ctx carries only the caller's traceparent, and
	// the node gives each audit line a span id of its own in that trace
	// (or a new one). The edge never shuts it down: its owner does.
	TracerProvider trace.TracerProvider
	// Metrics, when set, receives the edge's gauges (requests in flight,
	// event streams; edge/metrics.go), taken off again by Close. The
	// requests themselves are counted by the node. Nil: no metrics.
	Metrics prometheus.Registerer
}

// KeyVerifier checks API keys (node/keys implements it; the edge imports
// no node package).
type KeyVerifier interface {
	// VerifyKey returns the name and grants of the key whose secret is
	// presented, or an error that says why it is refused (unknown,
	// revoked, expired), with the key's name when it is known (revoked,
	// expired). A revocation is seen by the next call.
	VerifyKey(secret string) (name string, grants []string, err error)
	// ActiveKeys counts the keys that are neither revoked nor expired.
	ActiveKeys() int
}

// Accepts says which credentials an edge accepts, for the faces' cards
// (also those a peer signs for this edge, agent/a2a-card). Anonymous is
// false when RequireAuth is set, or when an issuer is named and "http" is
// granted nothing beyond the open skills.
type Accepts = protocol.EdgeCredentials

// Accepts reports the credentials this edge accepts.
func (s *Server) Accepts() Accepts {
	return Accepts{Keys: s.cfg.Keys != nil, OIDCIssuers: slices.Clone(s.cfg.OIDCIssuers), Anonymous: !s.anonymousRefused()}
}

// loopbackAttempts is how many free ports New tries for one that is free
// on the detected address and on 127.0.0.1 alike.
const loopbackAttempts = 5

// Server is a bound HTTP edge. New binds it; Start or Serve serves it; Close
// stops it. Its methods are safe for concurrent use.
type Server struct {
	b         Backend
	cfg       Config
	log       *slog.Logger
	secret    []byte
	ln        net.Listener
	loopback  net.Listener // 127.0.0.1 beside a detected bind address; nil if none
	bindIP    netip.Addr   // the listener's IP; unspecified for "every interface"
	advertise string       // the host of PeerAddress
	port      int
	mux       *http.ServeMux
	grpc      http.Handler // HandleGRPC's; nil: gRPC goes to mux like the rest
	tracer    trace.Tracer // of Config.TracerProvider (startSpan)
	handler   http.Handler
	srv       *http.Server
	tls       *tls.Config // nil: plain HTTP
	started   time.Time
	// unregMetrics takes the gauges registerMetrics put on cfg.Metrics
	// off it again (nil without them).
	unregMetrics func()

	sessLimits *limiterSet     // per session nonce
	ipLimits   *limiterSet     // session issues per client IP
	findLimits *limiterSet     // GET /mcpv2/find per client IP
	gwLimits   *limiterSet     // gateway forwards per client IP
	inflight   chan struct{}   // a slot per session request being served
	streams    *Slots          // the standing event streams of the faces (identity rule)
	anonKey    []byte          // HMAC key of anonymous sessions, derived from secret
	hosts      map[string]bool // names Host and Origin may name (hostSet)
	verified   tokenCache      // tokens that verified lately
	sessions   sessionBook     // sessions issued and revoked
	oidc       *oidcAuth       // verifies OpenID Connect access tokens; nil without Config.OIDCIssuers

	ctx    context.Context // the base context of requests; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the Start goroutines, and Serve's loopback one

	mu      sync.Mutex // guards serving and closed
	serving bool
	closed  bool
}

// New applies cfg's defaults, validates it and binds the listener, so that a
// bad address or a busy port fails here, at once. It does not serve yet: call
// Start or Serve. A failed New leaves nothing open.
func New(b Backend, cfg Config) (*Server, error) {
	if b == nil {
		return nil, errors.New("edge: new: nil Backend")
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Server{b: b, cfg: cfg, log: cfg.Logger.With("component", "edge")}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	s.tracer = tp.Tracer("github.com/mcpv2/mcpv2/edge")
	tc, err := loadTLS(cfg, cfg.Now(), s.log)
	if err != nil {
		return nil, err
	}
	s.tls = tc
	if len(cfg.Secret) == 0 {
		s.secret = make([]byte, 32)
		_, _ = rand.Read(s.secret)
		s.log.Warn("no session secret given: generated a random one; sessions end when this process stops, and other nodes cannot verify them (set --secret to share one)")
	} else {
		s.secret = append([]byte(nil), cfg.Secret...)
	}

	plan, err := planBind(cfg, s.log)
	if err != nil {
		return nil, err
	}
	// With any free port (Port 0) and loopback served beside the detected
	// address, a port free on one but taken on 127.0.0.1 is traded for
	// another, a few times; a fixed port is what it is.
	for attempt := 1; ; attempt++ {
		ln, err := listen(plan.bind, cfg.Port, cfg.PortFallback, s.log)
		if err != nil {
			return nil, err
		}
		s.ln = ln
		s.port = ln.Addr().(*net.TCPAddr).Port
		if !plan.loopback {
			break
		}
		lb, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)))
		if err == nil {
			s.loopback = lb
			break
		}
		if cfg.Port != 0 || attempt == loopbackAttempts {
			s.log.Warn("HTTP edge: 127.0.0.1 is not served: its port is taken there; the edge serves only the detected address", "port", s.port, "addr", plan.bind.String(), "err", err)
			break
		}
		_ = ln.Close()
	}
	s.bindIP = plan.bind
	s.advertise = plan.advertise
	if cfg.PortFile != "" {
		if err := writePortFile(cfg.PortFile, s.port); err != nil {
			return nil, errors.Join(err, s.closeListeners())
		}
	}
	// Last of what may fail: it starts the issuers' discovery.
	if s.oidc, err = s.initOIDC(); err != nil {
		return nil, errors.Join(err, s.closeListeners())
	}

	s.sessLimits = newLimiterSet(cfg.RateLimit)
	s.ipLimits = newLimiterSet(cfg.SessionRateLimit)
	s.findLimits = newLimiterSet(cfg.FindRateLimit)
	s.gwLimits = newLimiterSet(cfg.GatewayRateLimit)
	s.inflight = make(chan struct{}, cfg.MaxInFlight)
	s.streams = &Slots{What: "event streams", Total: cfg.MaxInFlight, Reserved: max(1, cfg.MaxInFlight/4),
		PerOwner: max(1, cfg.MaxInFlight/8), PerIP: max(1, cfg.MaxInFlight/4)}
	s.anonKey = anonymousKey(s.secret)
	if err := s.registerMetrics(); err != nil {
		return nil, errors.Join(fmt.Errorf("edge: metrics: %w", err), s.closeListeners(), s.oidc.Close())
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mux = http.NewServeMux()
	s.routes()
	s.hosts = hostSet(cfg.AllowedHosts)
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if s.checkHost(w, r) {
			return
		}
		if s.grpc != nil && r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			s.grpc.ServeHTTP(w, r) // gRPC, whatever the service it names
			return
		}
		s.mux.ServeHTTP(w, r)
	})
	s.srv = s.HTTPServer(s.ctx, s.handler)
	s.srv.TLSConfig = tc // the handshake is bounded by ReadHeaderTimeout
	s.started = cfg.Now()
	s.log.Debug("HTTP edge bound", "addr", s.ln.Addr().String(), "loopback", s.loopback != nil, "peer_address", s.PeerAddress(), "tls", s.TLS(), "mtls", s.MTLS())
	return s, nil
}

// HTTPServer is the edge's HTTP server configuration serving h, its
// requests' contexts derived from ctx, for the edge's port and for a
// listener of a face's own (--a2a-grpc), so that both bound a request
// alike: ReadHeaderTimeout, ReadTimeout (a request's body, per stream
// under HTTP/2: a body that never ends holds its in-flight slot at most
// that long), WriteTimeout, IdleTimeout, MaxHeaderBytes, and HTTP/2 with
// at most half the in-flight cap (MaxInFlight/2, at least 1) of
// concurrent streams per connection, so that one connection never holds
// every slot of the edge. Go's HTTP/2 server keeps its protections
// against rapid resets (a reset stream's handler still counts against
// that cap until it returns). It speaks HTTP/1.1, HTTP/2 over TLS and h2c
// (prior knowledge); a caller may narrow Protocols, and sets TLSConfig.
func (s *Server) HTTPServer(ctx context.Context, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      10 * time.Minute, // an ask on a remote LLM can be slow
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		Protocols:         protocols(),
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: max(1, s.cfg.MaxInFlight/2)},
	}
}

// protocols are what the edge speaks: HTTP/1.1, and HTTP/2 over TLS and
// in the clear (h2c, prior knowledge), which gRPC clients use (the A2A
// face's gRPC binding, served on Mux).
func protocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}

// setDefaults fills cfg's zero fields with the defaults and refuses the
// values that New cannot use.
func (cfg *Config) setDefaults() error {
	if cfg.Port < 0 || cfg.Port > 65535 {
		return fmt.Errorf("edge: new: port %d out of range 0-65535", cfg.Port)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.SessionTTL < time.Second {
		return fmt.Errorf("edge: new: session TTL %v is shorter than a second", cfg.SessionTTL)
	}
	if cfg.ClockSkew <= 0 {
		cfg.ClockSkew = protocol.DefaultClockSkew
	}
	if cfg.RateLimit == 0 {
		cfg.RateLimit = DefaultRateLimit
	}
	if cfg.SessionRateLimit == 0 {
		cfg.SessionRateLimit = DefaultSessionRateLimit
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.FindRateLimit == 0 {
		cfg.FindRateLimit = DefaultFindRateLimit
	}
	if cfg.GatewayRateLimit == 0 {
		cfg.GatewayRateLimit = DefaultGatewayRateLimit
	}
	if len(cfg.OIDCIssuers) > 0 || cfg.OIDCAudience != "" {
		if err := checkOIDCConfig(cfg.OIDCIssuers, cfg.OIDCAudience); err != nil {
			return err
		}
	}
	return nil
}

// Check reports what New would refuse in cfg, with New's messages, and
// starts nothing: the port range, the session TTL, the TLS files,
// PublicIP and BindHost (IP addresses of this machine), and a busy Port
// (bound for a moment and closed; with PortFallback, that no port of the
// range is free). A program checks its flags with it before it starts
// anything else; New checks again. Nothing is logged. Safe for concurrent
// use.
func Check(cfg Config) error {
	cfg.Logger = nil
	if err := cfg.setDefaults(); err != nil {
		return err
	}
	if _, err := loadTLS(cfg, cfg.Now(), cfg.Logger); err != nil {
		return err
	}
	plan, err := planBind(cfg, cfg.Logger)
	if err != nil {
		return err
	}
	ln, err := listen(plan.bind, cfg.Port, cfg.PortFallback, cfg.Logger)
	if err != nil {
		return err
	}
	return ln.Close()
}

// closeListeners closes the listeners of a Server that never served.
func (s *Server) closeListeners() error {
	var errs []error
	if s.loopback != nil {
		errs = append(errs, s.loopback.Close())
	}
	return errors.Join(append(errs, s.ln.Close())...)
}

// Start serves in a goroutine owned by the Server until Close. It fails if
// the Server is closed or already serving.
func (s *Server) Start() error {
	if err := s.markServing(); err != nil {
		return err
	}
	for _, ln := range s.listeners() {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("HTTP edge stopped", "addr", ln.Addr().String(), "err", err)
			}
		}()
	}
	return nil
}

// listeners are the Server's listeners, the main one first.
func (s *Server) listeners() []net.Listener {
	if s.loopback != nil {
		return []net.Listener{s.ln, s.loopback}
	}
	return []net.Listener{s.ln}
}

// Serve serves on the calling goroutine and returns when Close is called
// (nil) or the listener fails. It fails at once if the Server is closed or
// already serving.
func (s *Server) Serve() error {
	if err := s.markServing(); err != nil {
		return err
	}
	if s.loopback != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.serve(s.loopback); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("HTTP edge stopped on loopback", "addr", s.loopback.Addr().String(), "err", err)
			}
		}()
	}
	if err := s.serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("edge: serve: %w", err)
	}
	return nil
}

// serve serves ln with HTTPS when TLS is configured (the certificates are
// already in srv.TLSConfig), else plain HTTP.
func (s *Server) serve(ln net.Listener) error {
	if s.tls != nil {
		return s.srv.ServeTLS(ln, "", "")
	}
	return s.srv.Serve(ln)
}

func (s *Server) markServing() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return fmt.Errorf("edge: serve: %w", net.ErrClosed)
	case s.serving:
		return errors.New("edge: serve: already serving")
	}
	s.serving = true
	return nil
}

// Close stops the edge: it stops accepting, lets requests in flight finish
// for up to 5 s, then cancels them and closes their connections, and waits
// for the Start goroutine. A second Close returns net.ErrClosed.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return net.ErrClosed
	}
	s.closed = true
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	s.cancel()
	if err != nil {
		s.log.Warn("HTTP edge: requests still running after the shutdown grace; closing their connections", "grace", shutdownGrace)
		err = s.srv.Close()
	}
	for _, ln := range s.listeners() {
		if cerr := ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) && err == nil {
			err = cerr
		}
	}
	s.wg.Wait()
	s.unregisterMetrics()
	if cerr := s.oidc.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("edge: close: %w", err)
	}
	return nil
}

// Mux returns the edge's request multiplexer, so that other faces (MCP, A2A)
// can mount their handlers on the same listener. Register before Start; the
// edge's own patterns are listed in the package documentation, and "/" is its
// JSON 404 answer.
func (s *Server) Mux() *http.ServeMux { return s.mux }

// HandleGRPC serves with h every request of the edge that is gRPC (HTTP/2
// with Content-Type application/grpc…), whatever its path, so that a gRPC
// client naming a service the edge lacks gets a gRPC status rather than
// an HTTP 404 it cannot read; other requests go to Mux as before. h goes
// through the edge's checks itself (AuthenticatedFace). Call before Start.
func (s *Server) HandleGRPC(h http.Handler) { s.grpc = h }

// MaxBody returns the cap on request bodies, in bytes (Config.MaxBody), for
// faces that read bodies with a library of their own.
func (s *Server) MaxBody() int64 { return s.cfg.MaxBody }

// Handler returns the edge's HTTP handler (Mux behind a thin wrapper that
// sets common headers), for embedding the edge in another server or serving
// it with httptest.
func (s *Server) Handler() http.Handler { return s.handler }

// Addr returns the main listener's address (not the loopback one).
func (s *Server) Addr() *net.TCPAddr { return s.ln.Addr().(*net.TCPAddr) }

// URLs returns the base URLs the edge serves, http(s)://host:port/mcpv2:
// the advertised address first, then http(s)://127.0.0.1:port/mcpv2 when
// the edge also serves loopback (see Config.BindHost).
func (s *Server) URLs() []string {
	scheme := "http"
	if s.tls != nil {
		scheme = "https"
	}
	out := []string{scheme + "://" + net.JoinHostPort(s.advertise, strconv.Itoa(s.port)) + "/mcpv2"}
	if s.loopback != nil {
		out = append(out, scheme+"://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))+"/mcpv2")
	}
	return out
}

// BoundPort returns the TCP port the edge listens on.
func (s *Server) BoundPort() int { return s.port }

// PeerAddress returns the edge's advertised address,
// "mcpv2://ip:port/mcpv2" (plain HTTP) or "https://ip:port/mcpv2" (TLS),
// with Config.PublicIP or else the bind address.
func (s *Server) PeerAddress() string {
	return s.scheme() + "://" + net.JoinHostPort(s.advertise, strconv.Itoa(s.port)) + "/mcpv2"
}

// TLS reports whether the edge serves HTTPS (Config.TLSCert and TLSKey).
func (s *Server) TLS() bool { return s.tls != nil }

// MTLS reports whether the edge requires client certificates
// (Config.TLSClientCA): the agent card's capabilities.mtls.
func (s *Server) MTLS() bool {
	return s.tls != nil && s.tls.ClientAuth == tls.RequireAndVerifyClientCert
}

// scheme is the scheme of the edge's addresses: mcpv2 (plain HTTP, the
// seed's form) or https.
func (s *Server) scheme() string {
	if s.tls != nil {
		return "https"
	}
	return "mcpv2"
}

// DemoSessionAddress returns an edge address with a freshly minted session
// for a client on this same machine: the edge's own address (127.0.0.1 when
// it listens on every interface), and a token for the source address that
// such a client's connection gets, which the kernel chooses: a connection to
// 127.0.0.2 comes from 127.0.0.1, one to 10.0.0.5 from 10.0.0.5.
func (s *Server) DemoSessionAddress() string {
	host, subject := s.demoHost()
	tok, _ := protocol.MintToken(s.secret, subject, s.cfg.Now(), s.cfg.SessionTTL)
	a := protocol.Address{Kind: protocol.AddrHTTP, Host: host, Port: s.port, SessionID: tok}
	if s.tls != nil {
		a.URL = "https://" + net.JoinHostPort(host, strconv.Itoa(s.port)) + "/mcpv2"
	}
	return a.String()
}

// demoHost returns where a client on this machine reaches the edge, and the
// address the edge then sees it from. The latter is asked of the kernel's
// routing: connecting a UDP socket sends nothing but picks the source.
func (s *Server) demoHost() (host, subject string) {
	dst := s.bindIP
	if dst.IsUnspecified() {
		dst = netip.MustParseAddr("127.0.0.1")
		if s.bindIP.Is6() && !s.bindIP.Is4In6() {
			dst = netip.IPv6Loopback()
		}
	}
	host, subject = dst.String(), dst.String()
	if ip, err := sourceIP(context.Background(), netip.AddrPortFrom(dst, uint16(s.port)).String()); err == nil {
		subject = ip
	}
	return host, subject
}

// Banner returns the startup lines of SPEC §5 that follow the node's own
// (MCPV2_PEER_ID, MCPV2_P2P_ADDRESS): MCPV2_BOUND_PORT, MCPV2_PEER_ADDRESS
// and MCPV2_DEMO_SESSION_ADDRESS, one string per line.
func (s *Server) Banner() []string {
	return []string{
		"MCPV2_BOUND_PORT=" + strconv.Itoa(s.port),
		"MCPV2_PEER_ADDRESS=" + s.PeerAddress(),
		"MCPV2_DEMO_SESSION_ADDRESS=" + s.DemoSessionAddress(),
	}
}

// MintSession mints a session token for a client seen from ip, valid for the
// configured TTL. The CLI and tests use it; HTTP clients use GET
// /mcpv2/session.
func (s *Server) MintSession(ip string) (token string, expires time.Time) {
	tok, t := protocol.MintToken(s.secret, ip, s.cfg.Now(), s.cfg.SessionTTL)
	return tok, t.ExpiresAt()
}
