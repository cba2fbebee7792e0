package edge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// Headers and query parameters of the edge.
const (
	// SessionHeader carries the session token (alternative to the sessionId
	// query parameter).
	SessionHeader = "X-MCPV2-Session"
	// SessionParam is the query parameter that carries the session token.
	SessionParam = "sessionId"
	// ConversationHeader names the conversation of a POST /mcpv2/ai request
	// (ask's conversation_id). The answer carries it back, with the turn in
	// TurnHeader.
	ConversationHeader = "X-MCPV2-Conversation"
	// TurnHeader carries ask's turn number on a /mcpv2/ai answer.
	TurnHeader = "X-MCPV2-Turn"
)

// maxFindLimit caps the limit parameter of GET /mcpv2/find.
const maxFindLimit = 100

// request is what the edge knows about an HTTP request once it passes the
// method check: who sent it and when it started.
type request struct {
	caller protocol.Caller
	start  time.Time
	// refusalCode, when set, replaces an mcpv2 code (-32001…-32099) in
	// the edge's refusals of this request (WithRefusalCode).
	refusalCode int
	// refusalWriter, when set, writes the edge's refusals of this request
	// in the face's wire form in place of a JSON-RPC error
	// (WithRefusalWriter).
	refusalWriter RefusalWriter
	// refused is the edge's refusal of the request, if it refused it, for
	// its span.
	refused *protocol.Error
}

// handlerFunc is an endpoint that runs after the method check (and, for
// session endpoints, after the session and rate checks).
type handlerFunc func(w http.ResponseWriter, r *http.Request, q *request)

func (s *Server) routes() {
	s.mux.Handle("/mcpv2/health", s.open(http.MethodGet, s.health))
	s.mux.Handle("/health", s.open(http.MethodGet, s.health))
	s.mux.Handle("GET /mcpv2/session", s.open(http.MethodGet, s.session))
	s.mux.Handle("DELETE /mcpv2/session", s.open(http.MethodDelete, s.revokeSession))
	s.mux.Handle("/mcpv2/session", s.open(http.MethodGet+", "+http.MethodDelete, s.notFound))
	s.mux.Handle("/mcpv2/agent-card", s.open(http.MethodGet, s.agentCard))
	s.mux.Handle("/mcpv2", s.Authenticated(http.MethodPost, s.rpc))
	s.mux.Handle("/mcpv2/ai/{provider}", s.Authenticated(http.MethodPost, s.ai))
	s.mux.Handle("/mcpv2/peers/{peer}", s.Authenticated(http.MethodPost, s.forward))
	s.mux.Handle("/mcpv2/find", s.Authenticated(http.MethodGet, s.find))
	s.mux.Handle("/mcpv2/audit", s.Authenticated(http.MethodGet, s.audit))
	s.mux.Handle(wellKnownResource, s.Traced(http.HandlerFunc(s.protectedResource)))
	s.mux.Handle(wellKnownResource+"/", s.Traced(http.HandlerFunc(s.protectedResource)))
	s.mux.Handle("/", s.open("", s.notFound))
}

// newRequest identifies the caller of r by its observed IP (RemoteAddr; never
// a forwarding header, which the caller could forge).
func (s *Server) newRequest(r *http.Request) *request {
	ip := clientIP(r.RemoteAddr)
	return &request{
		caller: protocol.Caller{ID: "ip:" + ip, Via: "http", Remote: r.RemoteAddr},
		start:  time.Now(),
	}
}

// clientIP returns the IP of a RemoteAddr ("ip:port"), IPv4-mapped IPv6
// addresses unmapped, so that a token minted for 127.0.0.1 matches a caller
// seen as ::ffff:127.0.0.1.
func clientIP(remote string) string {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap().String()
	}
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().String()
	}
	if host == "" {
		return "unknown"
	}
	return host
}

// open wraps an endpoint without authentication: only the method check.
// An empty method allows any (the 404 answer).
func (s *Server) open(method string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := s.newRequest(r)
		r, end := s.startSpan(r, q)
		defer end()
		if method != "" && r.Method != method {
			s.methodNotAllowed(w, r, q, method)
			return
		}
		h(w, r, q)
	})
}

// Authenticated wraps an endpoint of the edge's own that needs a
// credential — an edge session, an API key or an OpenID Connect access
// token (docs/spec.md §0) — for this edge's routes: it checks the method
// (405 otherwise), the credential (401 with -32001 naming the failed check
// and a WWW-Authenticate challenge), the credential's rate limit (429 with
// -32005 and Retry-After), and the cap on requests in flight (503 with
// -32005), each refusal answered with a JSON-RPC error and audited once. h
// then runs with the caller the credential proves. The edge decides only
// who the caller is; the node decides what it may run. h reads the body
// with ReadBody.
func (s *Server) Authenticated(method string, h func(w http.ResponseWriter, r *http.Request, c protocol.Caller)) http.Handler {
	return s.authenticated([]string{method}, nil, false, h, faceOptions{})
}

// AuthenticatedFace is Authenticated for a face (MCP's streamable HTTP:
// GET, POST and DELETE; A2A; the peer faces), where a request without a
// credential is served as an anonymous caller, limited per client IP,
// unless the edge refuses anonymous callers (Config.RequireAuth, or an
// OpenID Connect issuer and no grants to "http"). A request for which
// standing reports true (nil: none) is a standing event stream, open for
// as long as the client listens: it holds one of the stream slots (Slots)
// instead of an in-flight slot, so that listeners cannot starve the calls.
func (s *Server) AuthenticatedFace(methods []string, standing func(*http.Request) bool, h func(w http.ResponseWriter, r *http.Request, c protocol.Caller), opts ...FaceOption) http.Handler {
	var o faceOptions
	for _, opt := range opts {
		opt(&o)
	}
	return s.authenticated(methods, standing, true, h, o)
}

// FaceOption configures a face's AuthenticatedFace.
type FaceOption func(*faceOptions)

type faceOptions struct {
	refusalCode   int
	refusalWriter RefusalWriter
}

// RefusalWriter writes a refusal by the edge (status, perr) in a face's
// own wire form; the audit line is written already.
type RefusalWriter func(w http.ResponseWriter, r *http.Request, status int, perr *protocol.Error)

// WithRefusalWriter makes the edge's own refusals of the face's requests
// (every one Authenticated lists, ReadBody's, Refuse's and a peer face's)
// be written by write, for a face whose clients do not read a JSON-RPC
// error: A2A's HTTP+JSON (a google.rpc.Status body) and gRPC (a status in
// trailers). The edge has set the refusal's headers (Retry-After) and
// written its audit line; WithRefusalCode, if given too, applies to perr
// first.
func WithRefusalWriter(write RefusalWriter) FaceOption {
	return func(o *faceOptions) { o.refusalWriter = write }
}

// WithRefusalCode makes the edge's own refusals of the face's requests
// (a credential's 401, a rate limit's 429, a busy 503, a body too large,
// a peer face's errors) carry code instead of an mcpv2 code from -32001 to
// -32099, for a protocol where those codes mean something else (in A2A,
// -32001 is TaskNotFoundError and -32005 ContentTypeNotSupportedError). The
// HTTP status, message and data stay.
func WithRefusalCode(code int) FaceOption {
	return func(o *faceOptions) { o.refusalCode = code }
}

// RefusalCode is code as a face of WithRefusalCode(to) carries it: to in
// place of an mcpv2 code (-32001 to -32099), any other code as it is; a
// zero to keeps every code. A face that writes its own refusals
// (WithRefusalWriter) remaps with it as the edge would.
func RefusalCode(code, to int) int {
	if to != 0 && code <= -32001 && code >= -32099 {
		return to
	}
	return code
}

func (s *Server) authenticated(methods []string, standing func(*http.Request) bool, face bool, h func(w http.ResponseWriter, r *http.Request, c protocol.Caller), o faceOptions) http.Handler {
	allowed := strings.Join(methods, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := s.newRequest(r)
		q.refusalCode, q.refusalWriter = o.refusalCode, o.refusalWriter
		r, end := s.startSpan(r, q)
		defer end()
		if !slices.Contains(methods, r.Method) {
			s.methodNotAllowed(w, r, q, allowed)
			return
		}
		cred, ok, perr := s.credentialOf(r)
		if perr == nil && !ok && (!face || s.anonymousRefused()) {
			perr = s.missingCredential(face, r.URL.EscapedPath())
		}
		if perr != nil {
			if cred.id != "" { // refused, but known: the audit line names it
				q.caller.ID, q.caller.Kind = cred.id, cred.kind
			}
			s.log.Debug("credential refused", "remote", r.RemoteAddr, "path", r.URL.Path, "err", perr.Message)
			s.unauthorized(w, r, q, perr)
			return
		}
		q.caller.Kind, q.caller.Owner, q.caller.Grants, q.caller.Principals = cred.kind, cred.owner, cred.grants, cred.principals
		if cred.id != "" {
			q.caller.ID = cred.id
		}
		if ok, wait := s.sessLimits.allow(cred.limit, s.cfg.Now()); !ok {
			who := "this credential"
			if cred.limit == "ip:"+clientIP(r.RemoteAddr) {
				who = "a caller without a credential, per IP address,"
			}
			s.rateLimited(w, r, q, wait, fmt.Sprintf("rate limited: %s may send %s requests per second", who, formatRate(s.cfg.RateLimit)))
			return
		}
		busy := func(msg string) {
			w.Header().Set("Retry-After", "1")
			s.refuse(w, r, q, http.StatusServiceUnavailable, &protocol.Error{Code: protocol.CodeRateLimited,
				Message: msg, Data: map[string]int64{"retry_after_ms": 1000}})
		}
		if standing != nil && standing(r) {
			// A standing stream holds a stream slot by the identity rule
			// (Slots), not an in-flight one.
			release, _, msg := s.streams.Acquire(q.caller, clientIP(r.RemoteAddr))
			if release == nil {
				busy(msg)
				return
			}
			defer release()
		} else {
			select {
			case s.inflight <- struct{}{}:
				defer func() { <-s.inflight }()
			default:
				busy(fmt.Sprintf("busy: this edge serves at most %d requests at once; retry after 1s", cap(s.inflight)))
				return
			}
		}
		ctx := withRequest(r.Context(), q)
		h(w, r.WithContext(ctx), q.caller)
	})
}

// missingCredential is the 401 error of a request for path that presents
// no credential where one is needed; face says whether it was a face's.
func (s *Server) missingCredential(face bool, path string) *protocol.Error {
	var how []string
	if s.cfg.Keys != nil {
		how = append(how, "an API key (mcpv2 key add NAME on the node) as Authorization: Bearer KEY")
	}
	if len(s.cfg.OIDCIssuers) > 0 {
		how = append(how, "an OpenID Connect access token of "+strings.Join(s.cfg.OIDCIssuers, " or ")+
			" as Authorization: Bearer (the resource metadata at "+protocol.Clip(wellKnownResource+path, 200)+" says how to get one)")
	}
	if !face {
		msg := "invalid session: no session token; send it as the sessionId query parameter, the X-MCPV2-Session header or an Authorization: Bearer header (GET /mcpv2/session issues one)"
		if len(how) > 0 {
			msg += ", or send " + strings.Join(how, ", or ")
		}
		return invalidCredential("missing", msg)
	}
	if len(how) == 0 {
		how = append(how, "a session token minted with the node's --secret")
	}
	return invalidCredential("missing", "authentication required: this node serves no caller without a credential here; send "+strings.Join(how, ", or "))
}

// ownerOf is the Owner of a caller who presented tok (protocol.Caller):
// every secret holder is the node's owner, "secret"; an anonymous session
// is its own, named by a digest of its nonce (the nonce is no credential
// without the MAC, but it need not be written anywhere either).
func ownerOf(kind protocol.CallerKind, tok protocol.Token) string {
	if kind == protocol.CallerSecretHolder {
		return protocol.OwnerSecret
	}
	sum := sha256.Sum256([]byte(tok.Nonce))
	return "session:" + hex.EncodeToString(sum[:12])
}

// verifySession checks an edge session token against the caller's IP and
// returns the token and the kind of caller it proves.
func (s *Server) verifySession(tok, ip string) (protocol.Token, protocol.CallerKind, *protocol.Error) {
	var reason, msg string
	t, kind, err := s.verifyToken(tok, ip)
	if err == nil {
		return t, kind, nil
	}
	switch {
	case errors.Is(err, protocol.ErrTokenMalformed):
		reason, msg = "malformed", err.Error()
	case errors.Is(err, protocol.ErrTokenSignature):
		reason, msg = "signature", err.Error()
	case errors.Is(err, protocol.ErrTokenExpired):
		reason, msg = "expired", "invalid session: expired; get a new one from GET /mcpv2/session"
		if pt, _, perr := protocol.ParseToken(tok); perr == nil && pt.IssuedAt+pt.TTL > pt.IssuedAt {
			msg = fmt.Sprintf("invalid session: expired at %s; get a new one from GET /mcpv2/session", pt.ExpiresAt().UTC().Format(time.RFC3339))
		}
	case errors.Is(err, protocol.ErrTokenFuture):
		reason, msg = "future", fmt.Sprintf("invalid session: issued in the future (more than %s ahead of this node's clock)", s.cfg.ClockSkew)
	case errors.Is(err, protocol.ErrTokenSubject):
		reason, msg = "other_ip", fmt.Sprintf("invalid session: minted for another IP address; this request comes from %s, and a session is valid only from the IP it was issued to", ip)
	default:
		reason, msg = "invalid", "invalid session: "+err.Error()
	}
	return protocol.Token{}, 0, invalidCredential(reason, msg)
}

// ReadBody reads r's body up to the edge's cap. Over the cap it answers 413
// with -32600 naming the cap; a body that cannot be read is 400. On a refusal
// it has written the answer and the audit line, and returns ok == false.
// Faces mounted on Mux may call it from an Authenticated handler.
func (s *Server) ReadBody(w http.ResponseWriter, r *http.Request) (body []byte, ok bool) {
	q := requestFrom(r.Context())
	if q == nil {
		q = s.newRequest(r)
	}
	tooBig := func() ([]byte, bool) {
		s.refuse(w, r, q, http.StatusRequestEntityTooLarge, protocol.Errorf(protocol.CodeInvalidRequest,
			"invalid request: the body is larger than this edge's cap of %s", sizeText(s.cfg.MaxBody)))
		return nil, false
	}
	body, err := ReadLimited(w, r, s.cfg.MaxBody)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooBig()
		}
		s.log.Debug("read request body", "remote", r.RemoteAddr, "err", err)
		s.refuse(w, r, q, http.StatusBadRequest, protocol.Errorf(protocol.CodeParseError, "parse error: the request body could not be read"))
		return nil, false
	}
	return body, true
}

// refuse answers a refusal by the edge: the status, a JSON-RPC error
// response with a null id, and one audit line.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, q *request, status int, perr *protocol.Error) {
	q.refused = perr
	s.b.Audit(r.Context(), q.caller, auditMethod(r), perr, q.start)
	if rc := RefusalCode(perr.Code, q.refusalCode); rc != perr.Code {
		c := *perr
		c.Code, perr = rc, &c
	}
	if q.refusalWriter != nil {
		q.refusalWriter(w, r, status, perr)
		return
	}
	writeJSON(w, status, protocol.ErrorResponse(nil, perr))
}

// Caller is who sent r as the edge knows it: the caller Authenticated
// checked, or, on an open endpoint of a face (a card), the observed IP
// with no session.
func (s *Server) Caller(r *http.Request) protocol.Caller {
	if q := requestFrom(r.Context()); q != nil {
		return q.caller
	}
	return s.newRequest(r).caller
}

// PeerFace serves a face's route for mesh peers (/peers/{peer}/…, inside
// AuthenticatedFace): a path value that does not decode as a PeerID is
// refused (400); the node's own PeerID is served by own; any other peer
// costs one token of the caller IP's gateway bucket (429 past it) and is
// served by the handler forPeer returns (Cache.Serve: a face is made only
// for a peer that answers, within the caps).
func (s *Server) PeerFace(own func(http.ResponseWriter, *http.Request, protocol.Caller),
	forPeer func(peer string) func(http.ResponseWriter, *http.Request, protocol.Caller)) func(http.ResponseWriter, *http.Request, protocol.Caller) {
	return func(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
		peer := r.PathValue("peer")
		switch {
		case !protocol.LooksLikePeerID(peer) || !decodes(peer):
			s.Refuse(w, r, http.StatusBadRequest, protocol.Errorf(protocol.CodeInvalidParams,
				"invalid params: %q is not a PeerID (want %s with 12D3Koo… in place of {peer})", protocol.Clip(peer, 80), r.Pattern))
		case peer == s.b.PeerID():
			own(w, r, c)
		case !s.allowIP(w, r, requestFrom(r.Context()), s.gwLimits, s.cfg.GatewayRateLimit, "gateway requests"):
		default:
			forPeer(peer)(w, r, c)
		}
	}
}

// Refuse answers a refusal by a face mounted on Mux, as the edge answers its
// own: status, a JSON-RPC error response with a null id, and one audit line
// (for the caller the edge authenticated, when it did).
func (s *Server) Refuse(w http.ResponseWriter, r *http.Request, status int, perr *protocol.Error) {
	q := requestFrom(r.Context())
	if q == nil {
		q = s.newRequest(r)
	}
	s.refuse(w, r, q, status, perr)
}

// rateLimited answers 429 with Retry-After and -32005.
func (s *Server) rateLimited(w http.ResponseWriter, r *http.Request, q *request, wait time.Duration, msg string) {
	secs := retryAfterSeconds(wait)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	s.refuse(w, r, q, http.StatusTooManyRequests, &protocol.Error{
		Code:    protocol.CodeRateLimited,
		Message: fmt.Sprintf("%s; retry after %ds", msg, secs),
		Data:    map[string]int64{"retry_after_ms": wait.Milliseconds()},
	})
}

func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request, q *request, allowed string) {
	w.Header().Set("Allow", allowed)
	s.refuse(w, r, q, http.StatusMethodNotAllowed, protocol.Errorf(protocol.CodeInvalidRequest,
		"invalid request: method %s is not allowed on %s; use %s", protocol.Clip(r.Method, 20), r.URL.Path, allowed))
}

// auditMethod names an edge request in the audit log: "http", the HTTP
// method and the path, escaped and clipped.
func auditMethod(r *http.Request) string {
	return "http " + protocol.Clip(r.Method, 20) + " " + protocol.Clip(r.URL.EscapedPath(), 160)
}

// writeJSON writes v as the JSON body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, status = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`), http.StatusInternalServerError
	}
	writeRaw(w, status, b)
}

// Header values every JSON answer carries, shared by all answers: net/http
// only reads them, and each has len == cap, so an Add elsewhere copies
// rather than writes into them.
var (
	jsonContentType = []string{"application/json"}
	noStore         = []string{"no-store"}
)

// writeRaw writes b, a JSON document, with status.
func writeRaw(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Cache-Control"] = noStore
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request, q *request) {
	s.b.Audit(r.Context(), q.caller, auditMethod(r), nil, q.start)
	writeJSON(w, http.StatusOK, HealthStatus{
		Status:          "ok",
		Version:         s.b.Card().Version,
		PeerID:          s.b.PeerID(),
		ProtocolVersion: protocol.Version,
		LLMMode:         s.cfg.LLMMode,
		TLS:             s.TLS(),
		MTLS:            s.MTLS(),
		Flags:           map[string]bool{"llm_mode": s.cfg.LLMMode, "tls": s.TLS(), "mtls": s.MTLS()},
		UptimeS:         int64(s.cfg.Now().Sub(s.started).Seconds()),
		PeerAddress:     s.PeerAddress(),
		Credentials:     s.credentialCounts(),
	})
}

// sessionAnswer is the body of GET /mcpv2/session.
type sessionAnswer struct {
	SessionID string `json:"sessionId"`
	ExpiresAt int64  `json:"expires_at"` // unix seconds
	TTL       int64  `json:"ttl"`        // seconds
}

func (s *Server) session(w http.ResponseWriter, r *http.Request, q *request) {
	ip := clientIP(r.RemoteAddr)
	if ok, wait := s.ipLimits.allow(ip, s.cfg.Now()); !ok {
		s.rateLimited(w, r, q, wait, fmt.Sprintf("rate limited: %s may get %s sessions per second", ip, formatRate(s.cfg.SessionRateLimit)))
		return
	}
	// An anonymous session: MACed with the derived key, so that it grants
	// only what the policy gives "http" (SPEC §6).
	now := s.cfg.Now()
	tok, t := protocol.MintToken(s.anonKey, ip, now, s.cfg.SessionTTL)
	s.sessions.issue(t.ExpiresAt(), now)
	s.b.Audit(r.Context(), q.caller, auditMethod(r), nil, q.start)
	writeJSON(w, http.StatusOK, sessionAnswer{SessionID: tok, ExpiresAt: t.ExpiresAt().Unix(), TTL: t.TTL})
}

// revokeAnswer is the body of DELETE /mcpv2/session.
type revokeAnswer struct {
	Revoked   bool  `json:"revoked"`
	ExpiresAt int64 `json:"expires_at"` // when the token would have expired, unix seconds
}

// revokeSession is DELETE /mcpv2/session: the session the request
// presents is refused from the next request on, until it would have
// expired (the seed's revoke()). Presenting it is the proof of holding it.
func (s *Server) revokeSession(w http.ResponseWriter, r *http.Request, q *request) {
	tok := presented(r)
	if tok == "" || !isSessionShaped(tok) {
		s.refuse(w, r, q, http.StatusBadRequest, protocol.Errorf(protocol.CodeInvalidParams,
			"invalid params: DELETE /mcpv2/session revokes the edge session the request presents (sessionId, X-MCPV2-Session or Authorization: Bearer); "+
				"an API key is revoked with `mcpv2 key revoke NAME` on the node, an OpenID Connect token at its issuer"))
		return
	}
	cred, perr := s.sessionCredential(tok, clientIP(r.RemoteAddr))
	if perr != nil {
		s.unauthorized(w, r, q, perr)
		return
	}
	q.caller.Kind, q.caller.Owner = cred.kind, cred.owner
	if !s.sessions.revoke(cred.nonce, cred.expires, cred.kind == protocol.CallerAnonymous, s.cfg.Now()) {
		w.Header().Set("Retry-After", "60")
		s.refuse(w, r, q, http.StatusServiceUnavailable, &protocol.Error{Code: protocol.CodeRateLimited,
			Message: fmt.Sprintf("busy: this edge remembers %d revoked sessions, its most, until they expire; retry later", maxRevoked),
			Data:    map[string]int64{"retry_after_ms": 60000}})
		return
	}
	s.b.Audit(r.Context(), q.caller, auditMethod(r), nil, q.start)
	writeJSON(w, http.StatusOK, revokeAnswer{Revoked: true, ExpiresAt: cred.expires.Unix()})
}

func (s *Server) agentCard(w http.ResponseWriter, r *http.Request, q *request) {
	card := s.b.Card()
	if card.Endpoints.HTTP == "" {
		card.Endpoints.HTTP = s.PeerAddress()
	}
	s.b.Audit(r.Context(), q.caller, auditMethod(r), nil, q.start)
	writeJSON(w, http.StatusOK, card)
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request, q *request) {
	s.refuse(w, r, q, http.StatusNotFound, protocol.Errorf(protocol.CodeMethodNotFound,
		"not found: no endpoint at %q; this edge serves %s", protocol.Clip(r.URL.Path, 100), s.endpoints()))
}

// faceEndpoints are the faces' endpoints that the edge's 404 names when a
// face is mounted there (edge/mcp's Path, edge/a2a's Path; the edge may not
// import them), with what each speaks.
var faceEndpoints = []struct{ path, what string }{{"/mcp", "MCP"}, {"/a2a", "A2A"}}

// endpoints lists what the edge serves, for its 404 (GET / among them):
// its own endpoints, then each face mounted on its mux.
func (s *Server) endpoints() string {
	list := []string{"/mcpv2", "/mcpv2/session", "/mcpv2/health", "/mcpv2/agent-card", "/mcpv2/ai/{provider}", "/mcpv2/peers/{PeerID}", "/mcpv2/find"}
	for _, f := range faceEndpoints {
		probe := &http.Request{Method: http.MethodPost, URL: &url.URL{Path: f.path}, Header: http.Header{}}
		if _, pattern := s.mux.Handler(probe); pattern == f.path {
			list = append(list, f.path+" ("+f.what+")")
		}
	}
	return strings.Join(list[:len(list)-1], ", ") + " and " + list[len(list)-1]
}

// rpc is POST /mcpv2: a slot or a batch for the node.
func (s *Server) rpc(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	body, ok := s.ReadBody(w, r)
	if !ok {
		return
	}
	out, refused := s.b.Handle(r.Context(), c, body)
	switch {
	case refused != nil:
		status := refusalStatus(refused)
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", strconv.Itoa(ErrorRetryAfter(refused)))
		}
		if len(out) == 0 {
			out, _ = json.Marshal(protocol.ErrorResponse(nil, refused))
		}
		writeRaw(w, status, out)
	case len(out) == 0:
		w.WriteHeader(http.StatusNoContent)
	default:
		writeRaw(w, http.StatusOK, out)
	}
}

// refusalStatus maps a whole-message refusal by Handle to an HTTP status:
// a malformed message is 400, a rate limit 429, anything else 200 with the
// error inside (as the seed answered).
func refusalStatus(e *protocol.Error) int {
	switch e.Code {
	case protocol.CodeParseError, protocol.CodeInvalidRequest:
		return http.StatusBadRequest
	case protocol.CodeRateLimited:
		return http.StatusTooManyRequests
	}
	return http.StatusOK
}

// ErrorStatus maps an mcpv2 error of an endpoint that has no JSON-RPC
// envelope of its own (the /mcpv2/ai answer, the gateway, find, the REST
// face's routes) to an HTTP status: 400 for a malformed request, 401 an
// invalid session, 403 not permitted, 402 a payment failure, 404 an
// unknown method, skill or file, 429 a rate limit (see ErrorRetryAfter),
// 502 a skill's or tool's failure, 500 anything else.
func ErrorStatus(e *protocol.Error) int {
	switch e.Code {
	case protocol.CodeParseError, protocol.CodeInvalidRequest, protocol.CodeInvalidParams,
		protocol.CodeUnsupportedProvider, protocol.CodeVersionMismatch:
		return http.StatusBadRequest
	case protocol.CodeInvalidSession:
		return http.StatusUnauthorized
	case protocol.CodeNotPermitted:
		return http.StatusForbidden
	case protocol.CodePaymentFailed:
		return http.StatusPaymentRequired
	case protocol.CodeMethodNotFound, protocol.CodeSkillNotFound, protocol.CodeFileNotFound:
		return http.StatusNotFound
	case protocol.CodeRateLimited:
		return http.StatusTooManyRequests
	case protocol.CodeSkillExecution, protocol.CodeToolExecution:
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}

// ErrorRetryAfter is the Retry-After header value, in whole seconds (at
// least 1), of the rate-limit error e: its data.retry_after_ms rounded up,
// one second when that is absent or out of range.
func ErrorRetryAfter(e *protocol.Error) int { return retryAfterSeconds(retryAfter(e)) }

// retryAfter reads data.retry_after_ms of a rate-limit error (the node's
// form); one second when it is absent.
func retryAfter(e *protocol.Error) time.Duration {
	var ms float64
	switch d := e.Data.(type) {
	case map[string]any:
		switch v := d["retry_after_ms"].(type) {
		case int:
			ms = float64(v)
		case int64:
			ms = float64(v)
		case float64:
			ms = v
		case json.Number:
			ms, _ = v.Float64()
		}
	case map[string]int64:
		ms = float64(d["retry_after_ms"])
	}
	if ms <= 0 || ms > 24*3600*1000 {
		return time.Second
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// forward is the gateway: POST /mcpv2/peers/{PeerID} forwards the slot or
// batch to that mesh peer and returns its answer.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	q := requestFrom(r.Context())
	peer := r.PathValue("peer")
	if !protocol.LooksLikePeerID(peer) {
		s.refuse(w, r, q, http.StatusBadRequest, protocol.Errorf(protocol.CodeInvalidParams,
			"invalid params: gateway: %q is not a PeerID (want /mcpv2/peers/12D3Koo…)", protocol.Clip(peer, 80)))
		return
	}
	if !s.allowIP(w, r, q, s.gwLimits, s.cfg.GatewayRateLimit, "gateway requests") {
		return
	}
	body, ok := s.ReadBody(w, r)
	if !ok {
		return
	}
	if _, perr := protocol.ParseRequest(body); perr != nil {
		s.refuse(w, r, q, http.StatusBadRequest, perr)
		return
	}
	out, err := s.b.Forward(r.Context(), c, peer, body)
	if err != nil {
		var pe *protocol.Error
		switch {
		case errors.As(err, &pe):
			s.refuse(w, r, q, ErrorStatus(pe), pe)
		case r.Context().Err() != nil:
			s.refuse(w, r, q, http.StatusGatewayTimeout, protocol.Errorf(protocol.CodeInternal, "gateway: peer %s did not answer before the request ended", peer))
		default:
			s.log.Debug("gateway forward failed", "peer", peer, "err", err)
			s.refuse(w, r, q, http.StatusBadGateway, PeerUnreachable(peer, err))
		}
		return
	}
	// The node counted the request's slots (face gateway): its line is
	// not counted again.
	s.b.Audit(protocol.Uncounted(r.Context()), c, auditMethod(r), nil, q.start)
	if len(out) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeRaw(w, http.StatusOK, out)
}

// FindAnswer is the body of GET /mcpv2/find.
type FindAnswer struct {
	// Query is the skill name or tag searched for.
	Query string `json:"query"`
	// By is "skill" or "tag", as asked.
	By string `json:"by"`
	// Results are the ranked cards, best first; never null.
	Results []protocol.FindResult `json:"results"`
}

// find is GET /mcpv2/find?skill=…|tag=…[&limit=N].
func (s *Server) find(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	q := requestFrom(r.Context())
	if !s.allowIP(w, r, q, s.findLimits, s.cfg.FindRateLimit, "finds") {
		return
	}
	v := r.URL.Query()
	skill, tag := strings.TrimSpace(v.Get("skill")), strings.TrimSpace(v.Get("tag"))
	by, term := "skill", skill
	if tag != "" {
		by, term = "tag", tag
	}
	if (skill == "") == (tag == "") || len(term) > 256 {
		s.refuse(w, r, q, http.StatusBadRequest, protocol.Errorf(protocol.CodeInvalidParams,
			"invalid params: find needs exactly one of ?skill=NAME or ?tag=TAG (at most 256 bytes)"))
		return
	}
	limit := 10
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxFindLimit {
			s.refuse(w, r, q, http.StatusBadRequest, protocol.Errorf(protocol.CodeInvalidParams,
				"invalid params: limit must be an integer from 1 to %d", maxFindLimit))
			return
		}
		limit = n
	}
	res, err := s.b.Find(r.Context(), term, limit)
	if err != nil {
		var pe *protocol.Error
		switch {
		case errors.Is(err, ErrFindUnavailable):
			s.refuse(w, r, q, http.StatusNotImplemented, protocol.Errorf(protocol.CodeMethodNotFound,
				"find: discovery is not enabled on this node, so it cannot search the mesh"))
		case errors.As(err, &pe):
			s.refuse(w, r, q, ErrorStatus(pe), pe)
		default:
			s.log.Debug("find failed", "query", term, "err", err)
			s.refuse(w, r, q, http.StatusBadGateway, protocol.Errorf(protocol.CodeInternal, "find: discovery failed: %s", protocol.Clip(err.Error(), 300)))
		}
		return
	}
	if res == nil {
		res = []protocol.FindResult{}
	}
	s.b.Audit(r.Context(), c, auditMethod(r), nil, q.start)
	writeJSON(w, http.StatusOK, FindAnswer{Query: term, By: by, Results: res})
}

// AllowFind takes one of the finds that the client at remoteAddr (a
// RemoteAddr, "ip:port") may make per second, for a face that searches the
// mesh on its behalf (MCP's mesh_find); nil when allowed, else the -32005
// error to answer. GET /mcpv2/find draws from the same bucket.
func (s *Server) AllowFind(remoteAddr string) *protocol.Error {
	return s.allowKey(s.findLimits, s.cfg.FindRateLimit, clientIP(remoteAddr), "finds")
}

// AllowGateway is AllowFind for the gateway's forwards (MCP's mesh_call);
// POST /mcpv2/peers/… draws from the same bucket.
func (s *Server) AllowGateway(remoteAddr string) *protocol.Error {
	return s.allowKey(s.gwLimits, s.cfg.GatewayRateLimit, clientIP(remoteAddr), "gateway requests")
}

// allowKey takes a token of ip's bucket in ls; nil when there was one.
func (s *Server) allowKey(ls *limiterSet, rate float64, ip, what string) *protocol.Error {
	ok, wait := ls.allow(ip, s.cfg.Now())
	if ok {
		return nil
	}
	secs := retryAfterSeconds(wait)
	return &protocol.Error{Code: protocol.CodeRateLimited,
		Message: fmt.Sprintf("rate limited: %s may make %s %s per second; retry after %ds", ip, formatRate(rate), what, secs),
		Data:    map[string]int64{"retry_after_ms": wait.Milliseconds()}}
}

// allowIP takes a token of the caller IP's bucket in ls, for an endpoint
// whose cost is not bounded by one session's rate: a caller can hold many
// sessions. When the bucket is empty it answers 429 and returns false.
func (s *Server) allowIP(w http.ResponseWriter, r *http.Request, q *request, ls *limiterSet, rate float64, what string) bool {
	perr := s.allowKey(ls, rate, clientIP(r.RemoteAddr), what)
	if perr != nil {
		w.Header().Set("Retry-After", strconv.Itoa(ErrorRetryAfter(perr)))
		s.refuse(w, r, q, http.StatusTooManyRequests, perr)
	}
	return perr == nil
}

func formatRate(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) }

// sizeText names a byte count, with its MiB or KiB size when exact:
// "8388608 bytes (8 MiB)".
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d bytes (%d MiB)", n, n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d bytes (%d KiB)", n, n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
