// Package rest is the REST face of a node: the MCP & A2A seed's HTTP API
// under /api/v1/… (tools, resources, prompts, the MCP-vs-REST comparison,
// the security scanner and audit log, A2A tasks with an SSE stream, agent
// discovery, orchestration), its OpenAPI 3.1 document at
// /api/v1/openapi.json and a /docs page, mounted on the edge's server
// beside the MCP and A2A faces.
//
// Every route is served behind the edge's credential check, rate limit and
// in-flight cap (edge.Server.AuthenticatedFace), and enters the node's one
// dispatch for the caller the credential proves: a tools/list or tools/call
// message through Backend.Handle, a node method that checks the policy and
// writes an audit line (Security), the MCP face's server through an
// in-memory session (MCP), or the A2A face's task engine (Tasks). The
// caller is never taken from a body: a body's "actor" is accepted and
// ignored, and an answer's actor is the caller's identity.
package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/edge/a2a"
	"github.com/mcpv2/mcpv2/protocol"
)

// Backend is what the REST face needs from a node; *node.Node satisfies
// it. All methods may be called concurrently.
type Backend interface {
	// Handle runs a slot message for c (see edge.Backend): tools/list and
	// tools/call.
	Handle(ctx context.Context, c protocol.Caller, msg []byte) (out []byte, refused *protocol.Error)
	// Audit writes one audit line of a request that did not reach Handle.
	Audit(ctx context.Context, c protocol.Caller, method string, perr *protocol.Error, start time.Time)
	// SecurityScan, ScannerInfo and AuditTail serve the security routes:
	// the guard over a text (JSON of the guard's result: is_safe,
	// threat_level, findings of {vector, level, match}, sanitized_input),
	// the scanner's description (capabilities and attack_vectors), and the
	// last limit audit lines (a JSON array). Each applies the rate limits;
	// SecurityScan and AuditTail check the policy and write their audit
	// line, ScannerInfo (open to every caller) writes none: the face
	// writes it. An error is a *protocol.Error.
	SecurityScan(ctx context.Context, c protocol.Caller, text string) (json.RawMessage, error)
	ScannerInfo(ctx context.Context, c protocol.Caller) (json.RawMessage, error)
	AuditTail(ctx context.Context, c protocol.Caller, limit int) (json.RawMessage, error)
}

// MCP is what the face needs from the MCP face (*mcp.Face): its server
// reached for a caller through an in-memory session, and the resources and
// prompts it serves. Errors are *protocol.Error where the MCP server
// answered one.
type MCP interface {
	Session(ctx context.Context, c protocol.Caller) (*sdk.ClientSession, func(), error)
	ListResources(ctx context.Context, c protocol.Caller) ([]*sdk.Resource, error)
	ReadResource(ctx context.Context, c protocol.Caller, uri string) (*sdk.ReadResourceResult, error)
	ListPrompts(ctx context.Context, c protocol.Caller) ([]*sdk.Prompt, error)
	GetPrompt(ctx context.Context, c protocol.Caller, name string, args map[string]string) (*sdk.GetPromptResult, error)
}

// Tasks is what the face needs from the A2A face's task engine
// (*a2a.Face; see edge/a2a's task API).
type Tasks interface {
	SubmitText(ctx context.Context, c protocol.Caller, text, contextID string) (a2a.Task, error)
	GetTask(ctx context.Context, c protocol.Caller, id string) (a2a.Task, error)
	CancelTask(ctx context.Context, c protocol.Caller, id string) (a2a.Task, error)
	StreamTask(ctx context.Context, c protocol.Caller, id string, after uint64, replay bool, emit func(a2a.StreamEvent) error) error
}

// Agents is what the discover and agents routes need: the node's registry
// of external A2A agents (issue 23). Without it (WithAgents) the two
// routes answer 501.
type Agents interface {
	// DiscoverAgents fetches the card of each URL for c; one
	// ExternalAgent per URL, in order, a failed one with Healthy false and
	// LastError. An error refuses the whole call. It writes the request's
	// audit line, refused or not.
	DiscoverAgents(ctx context.Context, c protocol.Caller, urls []string) ([]protocol.ExternalAgent, error)
	// Agents lists the external agents the node knows, for c. It writes
	// the audit line of a refusal only; the face writes a success's.
	Agents(ctx context.Context, c protocol.Caller) ([]protocol.ExternalAgent, error)
}

// The audit rule of the face: one audit line per request. A request the
// node's method serves is audited by that method where it audits
// (Backend.Handle, SecurityScan, AuditTail, DiscoverAgents, a refusal of
// Agents), and the face answers its error with writeError; anything else —
// a refusal before the node is reached, a route whose method writes no
// line — the face audits, with fail or Backend.Audit.

// Defaults of the face.
const (
	// DefaultCompareRuns is how many times compare runs the operation
	// through each face; the latencies reported are the medians.
	DefaultCompareRuns = 5
	// MaxCompareRuns caps WithCompareRuns.
	MaxCompareRuns = 50
	// MaxDiscoverURLs caps the URLs of one discover request.
	MaxDiscoverURLs = 32
	// DefaultAuditLimit is the audit lines of GET …/security/audit without
	// ?limit.
	DefaultAuditLimit = 20
)

// Face is the REST face. New builds it; Mount serves it on an edge; Close
// ends its task streams.
type Face struct {
	b      Backend
	log    *slog.Logger
	mcp    MCP
	tasks  Tasks
	agents Agents
	runs   int
	e      *edge.Server
	// nroutes is len(routes), for compare's report (set by Mount).
	nroutes int

	mu     sync.Mutex // guards closed and comparing
	closed bool
	// comparing holds the identity (Caller.Kind and ID) of each caller whose
	// compare or compare report runs: one at a time per caller.
	comparing map[string]struct{}
	ctx       context.Context
	cancel    context.CancelFunc
}

// config is what the options set.
type config struct {
	log    *slog.Logger
	mcp    MCP
	tasks  Tasks
	agents Agents
	runs   int
}

// Option configures New. An option returns an error for a value it cannot
// take; New fails with it.
type Option func(*config) error

// WithLogger sets the face's logger (default: discard). It must not be nil.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("rest: WithLogger: nil logger")
		}
		c.log = l
		return nil
	}
}

// WithMCP gives the face the MCP face, for the resources, prompts and
// compare routes (without it they answer 501). It must not be nil.
func WithMCP(m MCP) Option {
	return func(c *config) error {
		if m == nil {
			return errors.New("rest: WithMCP: nil MCP")
		}
		c.mcp = m
		return nil
	}
}

// WithTasks gives the face the A2A face's task engine, for the
// /api/v1/a2a/tasks routes (without it they answer 501). It must not be
// nil.
func WithTasks(t Tasks) Option {
	return func(c *config) error {
		if t == nil {
			return errors.New("rest: WithTasks: nil Tasks")
		}
		c.tasks = t
		return nil
	}
}

// WithAgents gives the face the node's registry of external agents, for
// the discover and agents routes (without it they answer 501). It must
// not be nil.
func WithAgents(a Agents) Option {
	return func(c *config) error {
		if a == nil {
			return errors.New("rest: WithAgents: nil Agents")
		}
		c.agents = a
		return nil
	}
}

// WithCompareRuns sets how many times compare runs the operation through
// each face (default DefaultCompareRuns, 1 to MaxCompareRuns).
func WithCompareRuns(n int) Option {
	return func(c *config) error {
		if n < 1 || n > MaxCompareRuns {
			return fmt.Errorf("rest: WithCompareRuns: %d: want 1 to %d", n, MaxCompareRuns)
		}
		c.runs = n
		return nil
	}
}

// New builds the face over b: defaults, then the options. It starts
// nothing.
func New(b Backend, opts ...Option) (*Face, error) {
	if b == nil {
		return nil, errors.New("rest: new: nil Backend")
	}
	cfg := config{log: slog.New(slog.DiscardHandler), runs: DefaultCompareRuns}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	f := &Face{b: b, log: cfg.log, mcp: cfg.mcp, tasks: cfg.tasks, agents: cfg.agents, runs: cfg.runs, comparing: map[string]struct{}{}}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f, nil
}

// Close ends the face's open task streams; a route served after Close
// answers 503. A second Close returns net.ErrClosed.
func (f *Face) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return net.ErrClosed
	}
	f.closed = true
	f.cancel()
	return nil
}

// Prefix is the path every route of the face is under.
const Prefix = "/api/v1"

// Paths of the documents.
const (
	// OpenAPIPath is the OpenAPI 3.1 document of every route.
	OpenAPIPath = Prefix + "/openapi.json"
	// DocsPath is the HTML page that renders it, with a try-it form.
	DocsPath = "/docs"
)

type route struct {
	path    string
	methods []string
	h       func(f *Face, w http.ResponseWriter, r *http.Request, c protocol.Caller)
	stream  bool
}

// routes are the face's routes, as the OpenAPI document lists them
// (a test checks that the two agree).
var routes = []route{
	{Prefix + "/mcp/tools", []string{http.MethodGet, http.MethodPost}, (*Face).listTools, false},
	{Prefix + "/mcp/tools/{name}/execute", []string{http.MethodPost}, (*Face).execute, false},
	{Prefix + "/mcp/resources", []string{http.MethodGet}, (*Face).listResources, false},
	{Prefix + "/mcp/resources/read", []string{http.MethodPost}, (*Face).readResource, false},
	{Prefix + "/mcp/prompts", []string{http.MethodGet}, (*Face).listPrompts, false},
	{Prefix + "/mcp/prompts/{name}", []string{http.MethodPost}, (*Face).getPrompt, false},
	{Prefix + "/mcp/compare", []string{http.MethodPost}, (*Face).compare, false},
	{Prefix + "/mcp/compare/report", []string{http.MethodGet}, (*Face).compareReport, false},
	{Prefix + "/mcp/security/scan", []string{http.MethodGet, http.MethodPost}, (*Face).scan, false},
	{Prefix + "/mcp/security/audit", []string{http.MethodGet}, (*Face).auditTail, false},
	{Prefix + "/a2a/tasks", []string{http.MethodPost}, (*Face).submitTask, false},
	{Prefix + "/a2a/tasks/{id}", []string{http.MethodGet}, (*Face).getTask, false},
	{Prefix + "/a2a/tasks/{id}/cancel", []string{http.MethodPost}, (*Face).cancelTask, false},
	{Prefix + "/a2a/tasks/{id}/stream", []string{http.MethodGet}, (*Face).streamTask, true},
	{Prefix + "/a2a/discover", []string{http.MethodPost}, (*Face).discover, false},
	{Prefix + "/a2a/agents", []string{http.MethodGet}, (*Face).listAgents, false},
	{Prefix + "/a2a/orchestrate", []string{http.MethodPost}, (*Face).orchestrate, false},
}

// Mount serves the face on e: every route behind the edge's credential
// check, rate limit and in-flight cap (a task stream holds a stream slot),
// the OpenAPI document and /docs open (GET). Call before the edge serves.
func (f *Face) Mount(e *edge.Server) {
	f.e, f.nroutes = e, len(routes)
	for _, rt := range routes {
		var standing func(*http.Request) bool
		if rt.stream {
			standing = func(*http.Request) bool { return true }
		}
		h := rt.h
		e.Mux().Handle(rt.path, e.AuthenticatedFace(rt.methods, standing, func(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
			c.Via = "rest"
			if f.isClosed() {
				f.fail(w, r, c, time.Now(), protocol.Errorf(protocol.CodeInternal, "unavailable: the REST face is stopping"), http.StatusServiceUnavailable)
				return
			}
			h(f, w, r, c)
		}))
	}
	e.Mux().Handle(OpenAPIPath, e.Traced(http.HandlerFunc(f.serveOpenAPI)))
	e.Mux().Handle(DocsPath, e.Traced(http.HandlerFunc(f.serveDocs)))
}

func (f *Face) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// auditMethod names a REST request in the audit log.
func auditMethod(r *http.Request) string {
	return "rest " + protocol.Clip(r.Method, 10) + " " + protocol.Clip(r.URL.EscapedPath(), 160)
}

// errorBody is the body of every error answer: the same "error" member as
// the edge's own refusals (a JSON-RPC error object).
type errorBody struct {
	Error *protocol.Error `json:"error"`
}

// asProtocol is err as a *protocol.Error (-32603 for any other error,
// whose text is logged, not sent).
func (f *Face) asProtocol(err error) *protocol.Error {
	var perr *protocol.Error
	if errors.As(err, &perr) {
		return perr
	}
	// The MCP face answers with the go-sdk's JSON-RPC errors (resource
	// not found, invalid params): their code and message are the caller's.
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		msg := werr.Message
		if werr.Code == sdkResourceNotFound && len(werr.Data) > 0 {
			msg += ": " + string(werr.Data)
		}
		return protocol.Errorf(int(werr.Code), "%s", msg)
	}
	f.log.Error("rest", "err", err)
	return protocol.Errorf(protocol.CodeInternal, "internal error")
}

// fail answers perr with status (0: edge.ErrorStatus), a Retry-After on
// 429, and writes the request's audit line: for a refusal the node never
// saw (writeError answers one it audited).
func (f *Face) fail(w http.ResponseWriter, r *http.Request, c protocol.Caller, start time.Time, perr *protocol.Error, status int) {
	f.b.Audit(r.Context(), c, auditMethod(r), perr, start)
	f.writeError(w, perr, status)
}

// writeError writes perr without an audit line (the backend wrote it).
func (f *Face) writeError(w http.ResponseWriter, perr *protocol.Error, status int) {
	if status == 0 {
		status = edge.ErrorStatus(perr)
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(edge.ErrorRetryAfter(perr)))
	}
	writeJSON(w, status, errorBody{Error: perr})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, status = []byte(`{"error":{"code":-32603,"message":"internal error: the answer could not be encoded"}}`), http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// decodeBody decodes a JSON request body into v: one JSON object (an empty
// body is {}), nothing after it. Unknown members are ignored, as the seed's
// server ignored them. The body is capped by the edge (ReadBody) before.
func decodeBody(body []byte, v any) *protocol.Error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		body = []byte("{}")
	}
	if body[0] != '{' {
		return protocol.Errorf(protocol.CodeParseError, "parse error: the body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return protocol.Errorf(protocol.CodeParseError, "parse error: the body is not the JSON object this route takes: %s", protocol.Clip(protocol.JSONErrorText(err), 200))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return protocol.Errorf(protocol.CodeParseError, "parse error: the body holds more than one JSON value")
	}
	return nil
}

// readBody reads and decodes the body into v; on a refusal it has
// answered (and audited), and returns false.
func (f *Face) readBody(w http.ResponseWriter, r *http.Request, c protocol.Caller, start time.Time, v any) bool {
	body, ok := f.e.ReadBody(w, r)
	if !ok {
		return false
	}
	if perr := decodeBody(body, v); perr != nil {
		f.fail(w, r, c, start, perr, http.StatusBadRequest)
		return false
	}
	return true
}

// notConfigured answers 501: the node runs without the part a route needs.
func (f *Face) notConfigured(w http.ResponseWriter, r *http.Request, c protocol.Caller, start time.Time, what string) {
	f.fail(w, r, c, start, protocol.Errorf(protocol.CodeMethodNotFound, "not implemented: %s", what), http.StatusNotImplemented)
}
