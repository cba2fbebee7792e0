package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/protocol"
)

// Backend is what the A2A face needs from a node; *node.Node satisfies it.
// Every skill a task runs enters Handle as the caller that sent the
// message, so the node's policy, rate limits and audit lines apply; the
// tasks live in the node's store. All methods may be called concurrently.
type Backend interface {
	// PeerID is the node's PeerID: the kid of its card signatures.
	PeerID() string
	// Card is the node's agent card, which the A2A card is made from.
	Card() protocol.AgentCard
	// Sign signs data with the node's Ed25519 key (the card's JWS).
	Sign(data []byte) ([]byte, error)
	// Handle runs a slot message for c (see edge.Backend).
	Handle(ctx context.Context, c protocol.Caller, msg []byte) (out []byte, refused *protocol.Error)
	// Forward sends a message from c to the mesh peer peerID with c's own
	// grants (the gateway; see edge.Backend): the faces of mesh peers.
	Forward(ctx context.Context, c protocol.Caller, peerID string, msg []byte) ([]byte, error)
	// Permits reports whether c may run skill (the node's grant rule, with
	// no mesh session): the extended card lists what its caller may run.
	Permits(c protocol.Caller, skill string) bool
	// Audit writes one audit line of a request that did not reach Handle.
	Audit(ctx context.Context, c protocol.Caller, method string, perr *protocol.Error, start time.Time)
	// PeerA2ACard asks the mesh peer peerID, as this node, for its signed
	// A2A card in version "1.0" or "0.3" for this edge's face of it at
	// base (…/peers/<peerID>): agent/a2a-card, which a peer answers only
	// to mesh peers. A refusal by the peer is a *protocol.Error.
	PeerA2ACard(ctx context.Context, peerID, base, version string, cred *protocol.EdgeCredentials) (json.RawMessage, error)
	// SaveTask, Task, TaskEvents and ListTasks keep the tasks (the node's
	// store; see protocol.StoredTask).
	SaveTask(t protocol.StoredTask, event json.RawMessage) (uint64, error)
	Task(id string) (protocol.StoredTask, error)
	TaskEvents(id string, after uint64, max int) ([]protocol.TaskEvent, error)
	ListTasks(owner string, q protocol.TaskQuery) ([]protocol.StoredTask, error)
}

// Paths of the face on the edge.
const (
	// Path is the JSON-RPC endpoint of both versions.
	Path = "/a2a"
	// CardPath is the well-known agent card; CardAlias is its older name.
	CardPath  = "/.well-known/agent-card.json"
	CardAlias = "/.well-known/agent.json"
	// VersionHeader chooses the protocol version of a request (missing:
	// 0.3).
	VersionHeader = "A2A-Version"
)

// Limits of the face.
const (
	// DefaultMaxRunning caps the tasks that run at once; a message that
	// would start one more is refused.
	DefaultMaxRunning = 64
	// maxRunningPerCaller caps the tasks of one caller that run at once,
	// so that one caller cannot take every slot.
	maxRunningPerCaller = 8
	// keepAlive is the pause after which an idle event stream gets a
	// comment line, so that proxies keep it open.
	keepAlive = 15 * time.Second
	// subBuffer is the events a subscriber may fall behind by; past it
	// the stream ends, and the client resubscribes (Last-Event-ID) to get
	// the rest from the store.
	subBuffer = 64
)

// Face is the A2A face of a node: its signed card, one JSON-RPC URL and
// the HTTP+JSON routes, for A2A v1.0 and v0.3, whose messages run the
// node's skills as tasks.
// New builds it; Mount serves it on an edge; Close stops its tasks.
type Face struct {
	b          Backend
	log        *slog.Logger
	e          *edge.Server
	maxRunning int
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup // the task goroutines

	mu     sync.Mutex      // guards runs and closed
	runs   map[string]*run // the running tasks, by ID
	closed bool

	// ownerPrefix sets a peer face's tasks apart from the node's own and
	// other peers' (the store's owner key); "" for the node's face.
	ownerPrefix string
	peers       *edge.Cache[*Face] // the faces of mesh peers; set by Mount
	metrics     *metrics           // nil without WithMetrics; shared with the peers' faces
	textSkill   string             // what a plain-text message runs; "" is ask (text.go)
	// push sends the push notifications (nil: the Backend is no
	// PushStore); the node's face owns it, its peers' faces share it.
	push      *pusher
	pushOwned bool
	// restPeer and grpcPeer serve an HTTP+JSON request or a gRPC call for
	// the peer its "peer" path value names (a tenant): peerRoute; set by
	// Mount.
	restPeer, grpcPeer func(http.ResponseWriter, *http.Request, protocol.Caller)
	// grpc serves the gRPC binding (grpc.go), shared with the peers'
	// faces; grpcHandler is its handler for a listener of its own. Set by
	// Mount.
	grpc        *grpc.Server
	grpcHandler http.Handler
}

// config is what the options set; New copies it into the Face.
type config struct {
	log        *slog.Logger
	maxRunning int
	metrics    prometheus.Registerer
	textSkill  string // WithTextSkill (text.go)
	// outboundAllow, pushAttempts and pushBackoff: WithOutboundAllow and
	// WithPushRetry (push).
	outboundAllow []netip.Prefix
	pushAttempts  int
	pushBackoff   time.Duration
}

// Option configures New. An option returns an error for a value it cannot
// take; New fails with it.
type Option func(*config) error

// WithLogger sets the face's logger (default: discard). It must not be nil.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("a2a: WithLogger: nil logger")
		}
		c.log = l
		return nil
	}
}

// WithMaxRunning caps the tasks that run at once (default
// DefaultMaxRunning). It must be positive.
func WithMaxRunning(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("a2a: WithMaxRunning: %d is not positive", n)
		}
		c.maxRunning = n
		return nil
	}
}

// WithOutboundAllow lets the face's push notifications reach the
// addresses of allow, which the outbound scope refuses otherwise
// (internal/netscope: loopback, link-local, private …): the node's
// --outbound-allow.
func WithOutboundAllow(allow []netip.Prefix) Option {
	return func(c *config) error {
		c.outboundAllow = append([]netip.Prefix(nil), allow...)
		return nil
	}
}

// WithPushRetry sets how often a push notification is tried before it is
// dropped (default DefaultPushAttempts) and the pause before the second
// try, which doubles for each next one (default DefaultPushBackoff).
// attempts must be positive, backoff not negative.
func WithPushRetry(attempts int, backoff time.Duration) Option {
	return func(c *config) error {
		if attempts < 1 || backoff < 0 {
			return fmt.Errorf("a2a: WithPushRetry: %d attempts, backoff %s: want at least 1 attempt and a backoff not negative", attempts, backoff)
		}
		c.pushAttempts, c.pushBackoff = attempts, backoff
		return nil
	}
}

// New builds the face over b: defaults, then the options. The tasks that
// were running when the node last stopped are marked failed
// (input-required ones keep waiting). A failed New leaves nothing running.
func New(b Backend, opts ...Option) (*Face, error) {
	if b == nil {
		return nil, errors.New("a2a: new: nil Backend")
	}
	cfg := config{log: slog.New(slog.DiscardHandler), maxRunning: DefaultMaxRunning, pushAttempts: DefaultPushAttempts, pushBackoff: DefaultPushBackoff}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	f := &Face{b: b, log: cfg.log, maxRunning: cfg.maxRunning, runs: map[string]*run{}, textSkill: cfg.textSkill}
	if cfg.metrics != nil {
		var err error
		if f.metrics, err = newMetrics(cfg.metrics, f); err != nil {
			return nil, fmt.Errorf("a2a: WithMetrics: %w", err)
		}
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	if ps, ok := b.(PushStore); ok {
		f.push, f.pushOwned = newPusher(b, ps, cfg, f.log), true
	}
	if err := f.failInterrupted(); err != nil {
		f.cancel()
		f.metrics.unregister(f)
		if f.pushOwned {
			f.push.close()
		}
		return nil, err
	}
	return f, nil
}

// Close cancels the running tasks (they end canceled) and waits for them,
// the mesh peers' faces' too. A second Close returns net.ErrClosed.
func (f *Face) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return net.ErrClosed
	}
	f.closed = true
	f.mu.Unlock()
	var err error
	if f.peers != nil && f.grpc != nil { // the mounted face made it (mountGRPC); its peers' faces share it
		f.grpc.Stop() // cancels the gRPC calls (the peers' faces' too) and waits for them
	}
	if f.peers != nil {
		err = f.peers.Close()
	}
	f.cancel()
	f.wg.Wait()
	if f.pushOwned {
		f.push.close() // after the tasks: their last events are queued
	}
	f.metrics.unregister(f)
	return err
}

// CardFor is the node's A2A card for an edge that serves it at base
// (http(s)://host:port, or …/peers/PEERID on another node's edge), in
// version "1.0" or "0.3", signed. The node answers agent/a2a-card with it
// (node.SetA2ACard), so that any edge serves this node's own signed card;
// edgeID is then that edge's PeerID, named inside the signed card (the
// capability extension EdgeExtension), so that a card cannot be passed
// off as another edge's. edgeID is "" for the node's own edge. The card's
// securitySchemes and requirements name the credentials acc of that edge:
// the edge session always, an API key when acc.Keys, an OpenID Connect
// scheme for each of acc.OIDCIssuers, and the empty requirement (no
// credential) when acc.Anonymous; nil (an older edge that did not say)
// names the edge session only, and never says none is needed.
func (f *Face) CardFor(base, version, edgeID string, acc *edge.Accepts) (json.RawMessage, error) {
	return f.cardJSON(base, version, edgeID, acc)
}

func (f *Face) cardJSON(base, version, edgeID string, acc *edge.Accepts) (json.RawMessage, error) {
	var card map[string]any
	var err error
	if version == "1.0" {
		card, err = f.cardV1(base, edgeID, acc)
	} else {
		card, err = f.cardV03(base, edgeID, acc)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(card)
}

// Mount serves the face on e: the card at CardPath and CardAlias (open,
// GET), the JSON-RPC URL at Path and the HTTP+JSON routes under RESTPath
// behind the edge's session check, rate limit and in-flight cap (an event
// stream holds a stream slot), and the same for each mesh peer under
// PeerPath. Call before the edge serves.
func (f *Face) Mount(e *edge.Server) {
	f.e = e
	card := e.Traced(http.HandlerFunc(f.serveCard))
	e.Mux().Handle(CardPath, card)
	e.Mux().Handle(CardAlias, card)
	standing := func(r *http.Request) bool { return strings.Contains(r.Header.Get("Accept"), "text/event-stream") }
	// mcpv2's codes -32001… mean other things in A2A (-32001 is
	// TaskNotFoundError): the edge's refusals carry the JSON-RPC server
	// error -32000 here.
	e.Mux().Handle(Path, e.AuthenticatedFace([]string{http.MethodPost}, standing, f.serveRPC, edge.WithRefusalCode(codeEdgeRefusal)))
	if f.push != nil {
		jwks := e.Traced(http.HandlerFunc(f.serveJWKS))
		e.Mux().Handle(JWKSPath, jwks)
		e.Mux().Handle(PeerPath+JWKSPath, jwks) // the key of this node, which sends the peers' faces' notifications
	}
	f.mountGRPC(e)
	f.peers = f.newPeerFaces()
	peerCard := e.Traced(http.HandlerFunc(f.servePeerCard))
	e.Mux().Handle(PeerPath+CardPath, peerCard)
	e.Mux().Handle(PeerPath+CardAlias, peerCard)
	e.Mux().Handle(PeerPath+Path, e.AuthenticatedFace([]string{http.MethodPost}, standing, f.peerRoute(e, (*Face).serveRPC), edge.WithRefusalCode(codeEdgeRefusal)))
	// The HTTP+JSON binding (rest.go): its routes under RESTPath, the
	// edge's refusals of them as google.rpc.Status (v0.3: the legacy
	// error); a peer's under PeerPath, or named by a v1.0 tenant.
	restMethods := []string{http.MethodGet, http.MethodPost, http.MethodDelete}
	f.restPeer = f.peerRoute(e, (*Face).serveREST)
	f.grpcPeer = f.peerRoute(e, (*Face).serveGRPCOn) // a gRPC call's tenant (serveGRPC)
	e.Mux().Handle(RESTPath+"/", e.AuthenticatedFace(restMethods, restStanding, f.serveREST, edge.WithRefusalWriter(restRefusal)))
	e.Mux().Handle(PeerPath+RESTPath+"/", e.AuthenticatedFace(restMethods, restStanding, f.restPeer, edge.WithRefusalWriter(restRefusal)))
}

// peerRoute is the handler of serve for the mesh peer that r's "peer"
// path value names (edge.Server.PeerFace: its checks, the gateway limit,
// the face caps): serve on that peer's face, or on f when it names this
// node. Each binding's is built once, in Mount.
func (f *Face) peerRoute(e *edge.Server, serve func(*Face, http.ResponseWriter, *http.Request, protocol.Caller)) func(http.ResponseWriter, *http.Request, protocol.Caller) {
	return e.PeerFace(func(w http.ResponseWriter, r *http.Request, c protocol.Caller) { serve(f, w, r, c) },
		func(peer string) func(http.ResponseWriter, *http.Request, protocol.Caller) {
			return f.peers.Serve(e, peer, serve)
		})
}

// PeerPath prefixes the A2A face of a mesh peer on the edge: its card at
// PeerPath+CardPath, its JSON-RPC URL at PeerPath+Path.
const PeerPath = "/peers/{peer}"

// servePeerCard answers GET of a mesh peer's card: the peer's own, signed
// by the peer (agent/a2a-card over the mesh), naming this edge's URL for
// it.
func (f *Face) servePeerCard(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	c := f.e.Caller(r)
	c.Via = "a2a"
	peer := r.PathValue("peer")
	refuse := func(status int, perr *protocol.Error) {
		f.e.Refuse(w, r, status, perr)
	}
	switch {
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		w.Header().Set("Allow", "GET")
		refuse(http.StatusMethodNotAllowed, protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: use GET"))
		return
	case !protocol.LooksLikePeerID(peer):
		refuse(http.StatusBadRequest, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: %q is not a PeerID", protocol.Clip(peer, 80)))
		return
	}
	if perr := f.e.AllowGateway(r.RemoteAddr); perr != nil {
		w.Header().Set("Retry-After", "1")
		refuse(http.StatusTooManyRequests, perr)
		return
	}
	v, verr := version(r)
	if verr != nil {
		refuse(http.StatusBadRequest, &protocol.Error{Code: verr.Code, Message: verr.Message})
		return
	}
	base := f.baseURL(r) + "/peers/" + peer
	if peer == f.b.PeerID() {
		acc := f.e.Accepts()
		card, err := f.CardFor(base, v, f.b.PeerID(), &acc)
		if err != nil {
			refuse(http.StatusInternalServerError, protocol.Errorf(protocol.CodeInternal, "internal error: the card could not be made"))
			return
		}
		f.b.Audit(r.Context(), c, "a2a peer card", nil, start)
		writeRaw(w, card)
		return
	}
	card, perr := f.peerCard(r.Context(), c, peer, base, v)
	if perr != nil {
		refuse(http.StatusBadGateway, perr)
		return
	}
	f.b.Audit(r.Context(), c, "a2a peer card", nil, start)
	writeRaw(w, card)
}

// peerCard is mesh peer peer's own signed card in version v, its URLs
// under base, asked for as this node (a mesh peer), not for c: the peer
// answers agent/a2a-card to mesh peers only. HandleByForward words a
// failure as every peer face does.
func (f *Face) peerCard(ctx context.Context, c protocol.Caller, peer, base, v string) (json.RawMessage, *protocol.Error) {
	fetch := func(ctx context.Context, _ protocol.Caller, peer string, _ []byte) ([]byte, error) {
		acc := f.e.Accepts()
		card, err := f.b.PeerA2ACard(ctx, peer, base, v, &acc)
		if err != nil {
			return nil, err
		}
		return protocol.EncodeResponses(false, []protocol.Response{{JSONRPC: "2.0", ID: json.RawMessage("1"), Result: card}})
	}
	return protocol.OneResult(edge.HandleByForward(protocol.Uncounted(ctx), fetch, c, peer, nil))
}

func writeRaw(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// version is the protocol version of a request: "1.0" or "0.3".
func version(r *http.Request) (string, *rpcError) {
	v := r.Header.Get(VersionHeader)
	if v == "" {
		v = r.URL.Query().Get(VersionHeader)
	}
	v = strings.TrimSpace(v)
	if parts := strings.Split(v, "."); len(parts) == 3 { // a patch number is ignored
		v = parts[0] + "." + parts[1]
	}
	switch v {
	case "", "0.3":
		return "0.3", nil
	case "1.0", "1":
		return "1.0", nil
	}
	return "", &rpcError{Code: codeVersionNotSupported, Message: fmt.Sprintf("version not supported: %s %q; this agent speaks 1.0 and 0.3 (no header: 0.3)", VersionHeader, protocol.Clip(v, 20))}
}

// serveCard answers GET of the card: v1.0 form when the request asks for
// A2A-Version 1.0, else v0.3 form.
func (f *Face) serveCard(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	c := f.e.Caller(r)
	c.Via = "a2a"
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		f.e.Refuse(w, r, http.StatusMethodNotAllowed, protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: method %s is not allowed on %s; use GET", protocol.Clip(r.Method, 20), r.URL.Path))
		return
	}
	v, verr := version(r)
	if verr != nil {
		f.b.Audit(r.Context(), c, "a2a card", &protocol.Error{Code: verr.Code, Message: verr.Message}, start)
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": verr})
		return
	}
	base := f.baseURL(r)
	acc := f.e.Accepts()
	var card map[string]any
	var err error
	if v == "1.0" {
		card, err = f.cardV1(base, "", &acc)
	} else {
		card, err = f.cardV03(base, "", &acc)
	}
	if err != nil {
		f.log.Error("a2a card", "err", err)
		f.b.Audit(r.Context(), c, "a2a card", protocol.Errorf(protocol.CodeInternal, "internal error"), start)
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": rpcError{Code: protocol.CodeInternal, Message: "internal error: the card could not be signed"}})
		return
	}
	f.b.Audit(r.Context(), c, "a2a card", nil, start)
	writeJSON(w, http.StatusOK, card)
}

// baseURL is the http(s)://host:port that the card's URLs name: the host
// the request came to when it is one the edge serves (its address,
// loopback, or an allowed name), else the edge's advertised address. A
// signed card never names a host the request made up.
func (f *Face) baseURL(r *http.Request) string {
	u, err := url.Parse(f.e.URLs()[0]) // the advertised address first
	if err != nil {
		return "http://" + f.e.Addr().String()
	}
	host, port := u.Hostname(), u.Port()
	if h, p, err := net.SplitHostPort(r.Host); err == nil && p == port {
		h = strings.ToLower(strings.Trim(h, "[]"))
		if ip := net.ParseIP(h); (ip != nil && ip.IsLoopback()) || (ip == nil && f.e.AllowsHost(h)) {
			host = h
		}
	}
	return u.Scheme + "://" + net.JoinHostPort(host, port)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
