package mcp

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/protocol"
)

// Path is where Mount serves the face on the edge: MCP's streamable HTTP.
const Path = "/mcp"

// Era boundaries of MCP's streamable HTTP (the MCP-Protocol-Version
// header): from statelessEra on, requests carry their own version and need
// no session, and the go-sdk serves them only from a stateless handler.
const statelessEra = "2026-07-28"

// Defaults of the HTTP face.
const (
	// DefaultMaxSessions bounds the stateful (2025-11-25 era) sessions
	// open at once; an initialize past it is refused with 503.
	DefaultMaxSessions = 1024
	// DefaultSessionIdle ends a stateful session idle this long.
	DefaultSessionIdle = 30 * time.Minute
)

// HTTPOptions configure Mount.
type HTTPOptions struct {
	// MaxSessions bounds the stateful sessions (default DefaultMaxSessions).
	MaxSessions int
	// SessionIdle ends a stateful session idle this long (default
	// DefaultSessionIdle).
	SessionIdle time.Duration
	// ClientGone closes a stateful session this long after its client
	// cut its standing stream (GET) and sent nothing since: a client that
	// left without DELETE (default DefaultClientGone).
	ClientGone time.Duration
}

// Mount serves the face at Path on e's Mux, both eras of streamable HTTP:
// a request whose MCP-Protocol-Version is 2026-07-28 or later goes to a
// stateless handler, every other one to a stateful handler with sessions
// (GET streams for notifications, DELETE to end). Every request first passes
// the Host and Origin check, then the edge's session check, rate limit and
// in-flight cap (edge.Server.AuthenticatedFace); a standing event stream
// holds a stream slot, not a request slot. The caller the edge
// authenticated rides in the go-sdk's TokenInfo, so that each request runs
// as its own caller and a session cannot be used by another one (the
// go-sdk refuses a session ID presented by another user with 403). The
// mesh tools draw from the edge's per-IP find and gateway limits.
//
// Mount also serves PeerPath: the face of a peer of the mesh (made on
// first use: newPeerFaces), so that an MCP client on plain HTTP uses an agent that has no
// edge of its own, behind NAT say, with its own grants on this node. Call
// Mount once, before the edge serves.
func (f *Face) Mount(e *edge.Server, o HTTPOptions) {
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.SessionIdle <= 0 {
		o.SessionIdle = DefaultSessionIdle
	}
	if o.ClientGone <= 0 {
		o.ClientGone = DefaultClientGone
	}
	f.limiter = e
	f.mountHTTP(e, o, o.MaxSessions)
	f.peers = f.newPeerFaces(e, o)
	methods := []string{http.MethodGet, http.MethodPost, http.MethodDelete}
	// A standing stream: GET, or in the 2026-07-28 era a
	// subscriptions/listen (where the go-sdk checks Mcp-Method against the
	// body; in older eras nothing does, and a call could claim a stream
	// slot by the header alone).
	standing := func(r *http.Request) bool {
		return r.Method == http.MethodGet ||
			(r.Header.Get("Mcp-Protocol-Version") >= statelessEra && r.Header.Get("Mcp-Method") == "subscriptions/listen")
	}
	// The edge checks Host and Origin (DNS rebinding) on every endpoint.
	e.Mux().Handle(Path, e.AuthenticatedFace(methods, standing, f.serveHTTP))
	e.Mux().Handle(PeerPath, e.AuthenticatedFace(methods, standing, e.PeerFace(f.serveHTTP,
		func(peer string) func(http.ResponseWriter, *http.Request, protocol.Caller) {
			return f.peers.Serve(e, peer, (*Face).serveHTTP)
		})))
}

// PeerPath is where Mount serves the face of a mesh peer.
const PeerPath = "/peers/{peer}/mcp"

// httpFace is a face's pair of go-sdk handlers, one per era.
type httpFace struct {
	e                   *edge.Server
	stateful, stateless http.Handler
	book                *sessionBook // who holds the stateful sessions
}

// mountHTTP builds f's handlers.
func (f *Face) mountHTTP(e *edge.Server, o HTTPOptions, maxSessions int) {
	get := func(*http.Request) *sdk.Server { return f.srv }
	stateful := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{
		Logger: f.log, MaxRequestBodyBytes: e.MaxBody(), SessionTimeout: o.SessionIdle})
	stateless := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{
		Logger: f.log, MaxRequestBodyBytes: e.MaxBody(), Stateless: true, PropagateRequestCancellation: true})
	f.http = &httpFace{e: e, stateful: withTokenInfo(stateful), stateless: withTokenInfo(stateless), book: newSessionBook(maxSessions, o.ClientGone)}
}

// withTokenInfo wraps h in the go-sdk's bearer-token middleware, with the
// caller the edge authenticated (withHTTPCaller put it in the request) as
// the token's user: its Holder (for a caller without a credential, one
// that names its address, so that its session is bound to that address). The edge has
// checked the credential already, wherever the request carried it (or
// that it may come without one); the middleware, which wants an
// Authorization: Bearer header, is given a placeholder when there is none.
func withTokenInfo(h http.Handler) http.Handler {
	inner := auth.RequireBearerToken(func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		c, ok := r.Context().Value(httpCallerKey{}).(protocol.Caller)
		if !ok {
			return nil, auth.ErrInvalidToken // not reached: serveHTTP puts it there
		}
		extra := map[string]any{callerKey: c}
		if asked, _ := r.Context().Value(taskAskedKey{}).(bool); asked {
			extra[taskExtraKey] = true
		}
		return &auth.TokenInfo{UserID: c.Holder(), Extra: extra}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f := strings.Fields(r.Header.Get("Authorization")); len(f) != 2 || !strings.EqualFold(f[0], "Bearer") {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer edge-checked")
		}
		inner.ServeHTTP(w, r)
	})
}

// serveHTTP serves one authenticated request of f's streamable HTTP.
func (f *Face) serveHTTP(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	h := f.http
	c.Via = "mcp"
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	defer func() { f.auditTransport(r, c, sw.status, start) }()
	w = sw
	if v := r.Header.Get("Mcp-Protocol-Version"); v >= statelessEra {
		if l := f.taskListen(r); l != nil {
			f.serveTaskListen(w, r, c, l)
			return
		}
		h.stateless.ServeHTTP(w, withHTTPCaller(r, c))
		return
	}
	f.serveStateful(sw, f.markTaskAsked(r), c)
}

// auditTransport writes the audit line of a request that the go-sdk's
// transport refused (a session of another caller 403, an unknown session
// 404, a body over the cap 413, bytes that are not JSON 400): the go-sdk
// answers those itself, before any method runs.
func (f *Face) auditTransport(r *http.Request, c protocol.Caller, status int, start time.Time) {
	if status < 400 {
		return
	}
	code := protocol.CodeInvalidRequest
	switch status {
	case http.StatusForbidden:
		code = protocol.CodeNotPermitted
	case http.StatusNotFound:
		code = protocol.CodeInvalidSession
	}
	f.b.Audit(r.Context(), c, "http "+r.Method+" "+protocol.Clip(r.URL.EscapedPath(), 160), protocol.Errorf(code, "mcp transport: HTTP %d", status), start)
}

// statusWriter remembers the status of the answer; it passes Flush on
// (server-sent events) through Unwrap.
type statusWriter struct {
	http.ResponseWriter
	status int
	// onHeader, when set, runs once with the status just before the
	// header goes to the client: what must hold before the client can
	// act on the answer is done there.
	onHeader func(status int)
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
		if w.onHeader != nil {
			w.onHeader(status)
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() {
	if fl, ok := w.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type httpCallerKey struct{}

// withHTTPCaller puts the caller in r's context for the TokenInfo verifier,
// and gives r the bearer form the go-sdk's auth middleware reads: a
// caller that sent its session as a query parameter or X-MCPV2-Session
// header has none. Its value is not read again; the edge checked the
// session already.
func withHTTPCaller(r *http.Request, c protocol.Caller) *http.Request {
	r = r.WithContext(context.WithValue(r.Context(), httpCallerKey{}, c))
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		r.Header.Set("Authorization", "Bearer mcpv2-edge-session")
	}
	return r
}

// sessions counts the face's open sessions.
func (f *Face) sessions() int {
	n := 0
	for range f.srv.Sessions() {
		n++
	}
	return n
}
