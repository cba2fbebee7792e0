package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/protocol"
)

// Backend is what the MCP face needs from a node; *node.Node satisfies it,
// and so does a client of a node's HTTP edge (mcpv2 mcp --connect). Every
// call the face makes for a caller enters Handle or Forward, so the node's
// policy, rate limits and audit lines apply as on every other face. All
// methods may be called concurrently.
type Backend interface {
	// Handle runs a slot or batch message for c and returns the response
	// message; refused != nil means the whole message was refused, and its
	// error response is in out. It writes the audit lines of the message.
	Handle(ctx context.Context, c protocol.Caller, msg []byte) (out []byte, refused *protocol.Error)
	// Forward sends a slot or batch message from c to the mesh peer peerID,
	// with c's own grants, and returns the peer's raw answer.
	Forward(ctx context.Context, c protocol.Caller, peerID string, msg []byte) ([]byte, error)
	// Find returns ranked cards for a skill name or tag, best first. An
	// error wrapping protocol.ErrNoDiscovery means the node runs without
	// discovery.
	Find(ctx context.Context, skillOrTag string, limit int) ([]protocol.FindResult, error)
	// Audit writes one audit line for a request that did not reach Handle
	// (initialize, prompts, the mesh tools' own checks).
	Audit(ctx context.Context, c protocol.Caller, method string, perr *protocol.Error, start time.Time)
}

// FilesWatcher is what a Backend may also offer: a channel closed at the
// next change of its stored files (*node.Node has it). With it, the face
// sends resource-list-changed notifications when files come and go.
type FilesWatcher interface {
	FilesChanged() <-chan struct{}
}

// Limiter is what a face mounted on an HTTP edge asks before the mesh
// tools, which cost more than one call: a DHT lookup, or a forward. A nil
// error lets the call go; an error is answered as the tool's result.
// *edge.Server satisfies it with its per-IP find and gateway limits.
type Limiter interface {
	AllowFind(remoteAddr string) *protocol.Error
	AllowGateway(remoteAddr string) *protocol.Error
}

// Defaults of the face.
const (
	// DefaultMaxResource is the largest stored file that resources/read
	// returns; a larger one is refused with a message that points to the
	// read_file tool, which pages.
	DefaultMaxResource = 4 << 20
	// maxAgents bounds the cards of mesh agents the face remembers from
	// mesh_find, for resources/list.
	maxAgents = 256
)

// Face is the MCP face of a node: one go-sdk Server whose tools are the
// node's skills and the mesh tools, whose resources are the node's files
// and agent cards, and whose prompts are templates. Serve it on stdio with
// ServeStdio, or over streamable HTTP with Mount or Handler. New builds it;
// Close stops it. Safe for concurrent use.
type Face struct {
	b       Backend
	log     *slog.Logger
	version string
	prompts []Prompt
	maxRes  int64
	limiter Limiter // nil: no per-IP limits (stdio)
	srv     *sdk.Server
	agents  agentCache
	subs    subscribed
	// sdkHandler is the go-sdk's own method handler (keepDefault), set
	// once by newServer.
	sdkHandler sdk.MethodHandler
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	closeMu    sync.Mutex // guards closed
	closed     bool
	promptsF   string             // the prompts file read, for logs; "" when none
	http       *httpFace          // set by Mount (or, for a peer's face, peerFaces.get)
	peers      *edge.Cache[*Face] // the faces of mesh peers; set by Mount
	metrics    *metrics           // nil without WithMetrics; shared with the peers' faces
	tasks      TaskRunner         // nil without WithTasks (and on a peer's face)
	taskKeep   time.Duration      // WithTasks' keep
	notes      *taskNotes         // who is told of which task's changes; nil without tasks
}

// config is what the options set; New copies it into the Face.
type config struct {
	log      *slog.Logger
	version  string
	prompts  []Prompt
	promptsF string // the prompts file read, for logs; "" when none
	maxRes   int64
	metrics  prometheus.Registerer
	tasks    TaskRunner
	taskKeep time.Duration
}

// Option configures New. An option returns an error for a value it cannot
// take; New fails with it.
type Option func(*config) error

// WithLogger sets the face's logger (default: discard). It must not be nil.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("mcp: WithLogger: nil logger")
		}
		c.log = l
		return nil
	}
}

// WithVersion sets the server version the face reports in initialize
// (default "dev").
func WithVersion(v string) Option {
	return func(c *config) error {
		c.version = v
		return nil
	}
}

// WithPromptsFile adds the prompt templates of a JSON file (see
// LoadPrompts) to the two built in. A missing file is no error unless
// mustExist is set; any other problem fails New, naming the file.
func WithPromptsFile(path string, mustExist bool) Option {
	return func(c *config) error {
		ps, err := LoadPrompts(path, mustExist)
		if err != nil {
			return err
		}
		c.prompts = append(c.prompts, ps...)
		if len(ps) > 0 {
			c.promptsF = path
		}
		return nil
	}
}

// WithMaxResource caps the stored files resources/read returns whole
// (default DefaultMaxResource); a larger one is refused, pointing to
// read_file. It must be positive.
func WithMaxResource(n int64) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("mcp: WithMaxResource: %d is not a positive size", n)
		}
		c.maxRes = n
		return nil
	}
}

// New builds the face over b: defaults, then the options, then validation
// (no prompt name twice). It starts one goroutine when b is a FilesWatcher
// (the resource-list notifications); Close stops it. A failed New starts
// nothing.
func New(b Backend, opts ...Option) (*Face, error) {
	if b == nil {
		return nil, errors.New("mcp: new: nil Backend")
	}
	cfg := config{log: slog.New(slog.DiscardHandler), version: "dev", prompts: builtinPrompts(), maxRes: DefaultMaxResource}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, p := range cfg.prompts {
		if seen[p.Name] {
			return nil, fmt.Errorf("mcp: prompts: %q is defined twice (the built-in prompts are summarize and analyze)", p.Name)
		}
		seen[p.Name] = true
	}
	f := &Face{b: b, log: cfg.log, version: cfg.version, prompts: cfg.prompts, promptsF: cfg.promptsF, maxRes: cfg.maxRes,
		tasks: cfg.tasks, taskKeep: cfg.taskKeep}
	if cfg.metrics != nil {
		var err error
		if f.metrics, err = newMetrics(cfg.metrics, f); err != nil {
			return nil, fmt.Errorf("mcp: WithMetrics: %w", err)
		}
	}
	f.srv = f.newServer()
	f.ctx, f.cancel = context.WithCancel(context.Background())
	if f.tasks != nil {
		f.notes = newTaskNotes(f)
	}
	if w, ok := b.(FilesWatcher); ok {
		f.wg.Add(1)
		go f.watchFiles(w)
	}
	return f, nil
}

// child is a face over b with f's settings (a mesh peer's face).
func (f *Face) child(b Backend) *Face {
	c := &Face{b: b, log: f.log, version: f.version, prompts: f.prompts, maxRes: f.maxRes, limiter: f.limiter, metrics: f.metrics}
	c.srv = c.newServer()
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// Close ends the face's sessions (an idle HTTP session would otherwise
// live until its idle timeout) and stops its goroutine; close the edge
// first, so that no new session starts. A second Close returns
// net.ErrClosed.
func (f *Face) Close() error {
	f.closeMu.Lock()
	defer f.closeMu.Unlock()
	if f.closed {
		return net.ErrClosed
	}
	f.closed = true
	f.cancel()
	if f.http != nil {
		f.http.book.close() // its timers
	}
	var err error
	if f.peers != nil {
		err = f.peers.Close()
	}
	for ss := range f.srv.Sessions() {
		_ = ss.Close()
	}
	for _, ss := range f.subs.close() { // dropWithSession waits for them
		_ = ss.Close()
	}
	f.notes.close() // its followers end with f.ctx
	f.wg.Wait()
	f.metrics.unregister(f)
	return err
}

// Server returns the face's go-sdk server, for transports of a caller's
// own (tests, an in-memory transport).
func (f *Face) Server() *sdk.Server { return f.srv }

// newServer builds the go-sdk server: the protocol engine. The node's
// tools, its file and card resources are served per request by the
// middleware (they depend on who asks); prompts and the two fixed
// resources are registered.
func (f *Face) newServer() *sdk.Server {
	caps := &sdk.ServerCapabilities{
		//lint:ignore SA1019 the 2025 protocol eras this face serves still use logging (notifications/message); dropped only with them
		Logging:   &sdk.LoggingCapabilities{},
		Tools:     &sdk.ToolCapabilities{ListChanged: true},
		Resources: &sdk.ResourceCapabilities{ListChanged: true, Subscribe: true},
		Prompts:   &sdk.PromptCapabilities{ListChanged: true},
	}
	if f.tasks != nil {
		caps.AddExtension(TasksExtension, nil)
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "mcpv2", Title: "mcpv2 node", Version: f.version}, &sdk.ServerOptions{
		Instructions: "The tools are this mcpv2 node's skills, and two mesh tools: mesh_find finds agents by skill or tag, " +
			"mesh_call runs a skill of another agent. Resources are the node's stored files (mcpv2://files/NAME), " +
			"its agent card (mcpv2://card) and the cards of agents found on the mesh (mcpv2://agents/PEERID).",
		Logger:             clipLogger(f.log),
		SubscribeHandler:   f.subscribe,
		UnsubscribeHandler: f.unsubscribe,
		InitializedHandler: f.metrics.initialized,
		Capabilities:       caps,
	})
	s.AddReceivingMiddleware(f.keepDefault)
	s.AddReceivingMiddleware(f.middleware)
	f.addResources(s)
	if f.tasks != nil {
		f.addTaskMethods(s)
	}
	for _, p := range f.prompts {
		s.AddPrompt(p.sdkPrompt(), f.getPrompt(p))
	}
	return s
}

// throughHandle are the MCP methods the face answers through
// Backend.Handle, which writes their audit lines; the middleware audits
// every other request itself.
var throughHandle = map[string]bool{"tools/list": true, "tools/call": true, "resources/list": true, "resources/read": true}

// middleware serves the methods whose answer depends on the caller (tools
// and the resource list) and writes one audit line for each request that
// does not reach Handle.
func (f *Face) middleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		start := time.Now()
		var res sdk.Result
		var err error
		switch method {
		case "tools/list":
			res, err = f.listTools(ctx, callerOf(ctx, req))
		case "tools/call":
			r, _ := req.(*sdk.CallToolRequest)
			if ask, isModern := f.asksTask(r); ask {
				res, err = f.startTask(ctx, callerOf(ctx, req), r, isModern)
			} else {
				res, err = f.callTool(ctx, callerOf(ctx, req), r)
			}
		case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel", "tasks/update":
			res, err = f.serveTask(ctx, callerOf(ctx, req), method, req)
		case "resources/list":
			res, err = next(ctx, method, req)
			if err == nil {
				res, err = f.listResources(ctx, callerOf(ctx, req), res)
			}
		case "resources/read":
			if r, ok := req.(*sdk.ReadResourceRequest); ok && r.Params != nil && f.isStatic(r.Params.URI) {
				res, err = f.readStatic(ctx, callerOf(ctx, req), r.Params.URI)
			} else {
				res, err = next(ctx, method, req)
			}
		default:
			res, err = next(ctx, method, req)
		}
		if err == nil {
			settleCacheScope(req, res)
			// The 2025-11-25 form of tasks: members the go-sdk has no
			// field for.
			switch {
			case method == "initialize" && f.legacyTasks(req):
				res, err = withTaskCapsV1(res)
			case method == "tools/list" && f.legacyTasks(req):
				res, err = withTaskSupport(res)
			}
		}
		if !throughHandle[method] && !strings.HasPrefix(method, "notifications/") {
			var perr *protocol.Error
			if err != nil {
				perr = wireToProtocol(err)
			}
			f.b.Audit(ctx, callerOf(ctx, req), "mcp "+method, perr, start)
		}
		return res, err
	}
}

// Cache scopes of MCP 2026-07-28 (the cacheScope of a cacheable result).
const (
	scopePublic  = "public"  // the same answer for every caller
	scopePrivate = "private" // an answer that depends on who asks
)

// settleCacheScope gives every result that carries cacheScope (server/
// discover, the four lists, resources/read) a valid one: the go-sdk
// fills only the results it builds, and sends an unset one as "" (which
// MCP clients refuse), so the face decides here, for every era and both
// transports. Private is the answer that depends on the caller's grants:
// the resource list (the files list_files shows the caller) and the read
// of a file or of a mesh agent's card (forwarded with the caller's
// rights). Public is the rest: tools/list (the node lists its skills to
// every caller alike; tools/list needs no grant), the node's own card
// (agent/card needs none either), the prompts, the templates, discover.
// A scope a handler set already is kept, unless the answer is private.
func settleCacheScope(req sdk.Request, res sdk.Result) {
	var c *sdk.Cacheable
	scope := scopePublic
	switch r := res.(type) {
	case *sdk.ListToolsResult:
		if r != nil {
			c = &r.Cacheable
		}
	case *sdk.ListResourcesResult:
		if r != nil {
			c, scope = &r.Cacheable, scopePrivate
		}
	case *sdk.ReadResourceResult:
		if r != nil {
			c, scope = &r.Cacheable, scopePrivate
		}
		if rr, ok := req.(*sdk.ReadResourceRequest); ok && rr.Params != nil && rr.Params.URI == CardURI {
			scope = scopePublic
		}
	case *sdk.ListResourceTemplatesResult:
		if r != nil {
			c = &r.Cacheable
		}
	case *sdk.ListPromptsResult:
		if r != nil {
			c = &r.Cacheable
		}
	case *sdk.DiscoverResult:
		if r != nil {
			c = &r.Cacheable
		}
	}
	if c == nil {
		return
	}
	if scope == scopePrivate || (c.CacheScope != scopePublic && c.CacheScope != scopePrivate) {
		c.CacheScope = scope
	}
}

// callerKey is the key of the caller in a go-sdk TokenInfo's Extra (HTTP).
const callerKey = "mcpv2.caller"

type callerCtxKey struct{}

// withCaller stores the caller of a stdio session in the session's context.
func withCaller(ctx context.Context, c protocol.Caller) context.Context {
	return context.WithValue(ctx, callerCtxKey{}, c)
}

// callerOf returns who sent req: the caller the edge authenticated for
// this very HTTP request (in its TokenInfo), else the stdio session's. A
// request with neither is the least trusted kind, anonymous.
func callerOf(ctx context.Context, req sdk.Request) protocol.Caller {
	if req != nil {
		if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
			if c, ok := ex.TokenInfo.Extra[callerKey].(protocol.Caller); ok {
				return c
			}
		}
	}
	if c, ok := ctx.Value(callerCtxKey{}).(protocol.Caller); ok {
		return c
	}
	return protocol.Caller{ID: "mcp:unknown", Via: "mcp", Kind: protocol.CallerAnonymous}
}

// watchFiles re-registers the files index resource at each change of the
// backend's files, which makes the go-sdk send notifications/resources/
// list_changed to the sessions that listen.
func (f *Face) watchFiles(w FilesWatcher) {
	defer f.wg.Done()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-w.FilesChanged():
			f.srv.AddResource(filesIndex(), f.readFilesIndex)
			for _, uri := range f.subs.list() {
				_ = f.srv.ResourceUpdated(f.ctx, &sdk.ResourceUpdatedNotificationParams{URI: uri})
			}
		}
	}
}
