package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// Client errors; test for them with errors.Is.
var (
	// ErrUnreachable is wrapped when the edge could not be reached, or the
	// connection failed before an HTTP answer came: connection refused, no
	// route, DNS failure, a timeout.
	ErrUnreachable = errors.New("unreachable")
	// ErrSessionRefused is wrapped when the edge would not give a session
	// (GET /mcpv2/session failed, for example rate limited), or refused the
	// session again after one refresh. The *HTTPError it also wraps has the
	// details.
	ErrSessionRefused = errors.New("session refused")
)

// DefaultMaxResponse caps the body of an answer the Client reads (16 MiB).
const DefaultMaxResponse = 16 << 20

// sessionMargin is how long before its expiry a cached session is replaced.
const sessionMargin = 30 * time.Second

// HTTPError is an HTTP answer that the Client did not expect. It unwraps to
// the answer's JSON-RPC error when the body carried one.
type HTTPError struct {
	// URL is the request URL (without any session token).
	URL string
	// StatusCode is the HTTP status.
	StatusCode int
	// RetryAfter is the Retry-After header of a 429 or 503, or zero.
	RetryAfter time.Duration
	// RPC is the JSON-RPC error of the body, or nil.
	RPC *protocol.Error
	// Body is the start of a body that is not a JSON-RPC error.
	Body string
}

// Error describes the answer: status, URL and the server's message.
func (e *HTTPError) Error() string {
	msg := http.StatusText(e.StatusCode)
	switch {
	case e.RPC != nil:
		msg = e.RPC.Message
	case e.Body != "":
		msg = e.Body
	}
	return fmt.Sprintf("HTTP %d from %s: %s", e.StatusCode, e.URL, msg)
}

// Unwrap returns the JSON-RPC error of the body, or nil.
func (e *HTTPError) Unwrap() error {
	if e.RPC == nil {
		return nil
	}
	return e.RPC
}

// unreachableError is a transport failure; it wraps ErrUnreachable and the
// cause.
type unreachableError struct {
	op, target, reason string
	err                error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("edge: %s %s: unreachable: %s", e.op, e.target, e.reason)
}

func (e *unreachableError) Unwrap() []error { return []error{ErrUnreachable, e.err} }

// Client is a node's HTTP client of other edges: it fetches and caches
// sessions per edge, retries once with a fresh session on 401, reuses
// connections through one transport and caps answer bodies. It is safe for
// concurrent use.
type Client struct {
	hc          *http.Client
	maxResponse int64
	now         func() time.Time
	secret      []byte // set: mint sessions as a secret holder
	key         string // set: present this API key instead of a session
	closed      atomic.Bool

	mu       sync.Mutex // guards sessions
	sessions map[string]cachedSession
}

type cachedSession struct {
	token   string
	expires time.Time // when to stop using it (before the real expiry)
}

// clientConfig is what ClientOptions set; NewClient fills in the defaults
// first.
type clientConfig struct {
	hc          *http.Client
	maxResponse int64
	now         func() time.Time
	secret      []byte
	key         string
}

// ClientOption configures a Client.
type ClientOption func(*clientConfig) error

// WithHTTPClient makes the client send through hc, which it may share with
// other clients (their sessions stay apart). Default: a client of its own
// with one shared transport (16 idle connections per host) that does not
// follow redirects. nil is an error.
func WithHTTPClient(hc *http.Client) ClientOption {
	return func(c *clientConfig) error {
		if hc == nil {
			return errors.New("WithHTTPClient: nil client")
		}
		c.hc = hc
		return nil
	}
}

// WithSecret makes the client a secret holder (SPEC §6): instead of asking
// GET /mcpv2/session for an anonymous session, it mints its own sessions
// with secret, the edge's --secret, for the address it reaches the edge
// from, as the seed's client did. Such a session is granted every skill. A
// client behind a NAT that changes its address cannot mint a valid one.
// Empty: no secret (the default). The slice is copied.
func WithSecret(secret []byte) ClientOption {
	return func(c *clientConfig) error {
		c.secret = nil
		if len(secret) > 0 {
			c.secret = append([]byte(nil), secret...)
		}
		return nil
	}
}

// WithKey makes the client present key, an API key of the edge's node
// (`mcpv2 key add`), as its credential (docs/spec.md §0) instead of a
// session: it runs what the key is granted, from any address. It takes
// precedence over WithSecret. Empty: no key (the default).
func WithKey(key string) ClientOption {
	return func(c *clientConfig) error {
		c.key = key
		return nil
	}
}

// WithMaxResponse caps the body of an answer the client reads, in bytes
// (default DefaultMaxResponse). Zero or negative is an error.
func WithMaxResponse(n int64) ClientOption {
	return func(c *clientConfig) error {
		if n <= 0 {
			return fmt.Errorf("WithMaxResponse: %d is not positive", n)
		}
		c.maxResponse = n
		return nil
	}
}

// WithClock sets the clock that ages cached sessions and mints a secret
// holder's (default time.Now). nil is an error.
func WithClock(now func() time.Time) ClientOption {
	return func(c *clientConfig) error {
		if now == nil {
			return errors.New("WithClock: nil clock")
		}
		c.now = now
		return nil
	}
}

// NewClient returns a Client: defaults, then opts in order, then
// validation; the first option error fails it. It starts nothing.
func NewClient(opts ...ClientOption) (*Client, error) {
	cfg := clientConfig{maxResponse: DefaultMaxResponse, now: time.Now}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("edge: new client: %w", err)
		}
	}
	if cfg.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 16
		cfg.hc = &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return &Client{hc: cfg.hc, maxResponse: cfg.maxResponse, now: cfg.now, secret: cfg.secret, key: cfg.key,
		sessions: map[string]cachedSession{}}, nil
}

// Close closes the idle connections of the client's transport (of the
// WithHTTPClient client too, which others may share: they open new ones)
// and ends the client: a request begun after Close fails with
// net.ErrClosed; one under way runs to its end. It is idempotent: a second
// call returns net.ErrClosed.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return net.ErrClosed
	}
	c.hc.CloseIdleConnections()
	return nil
}

// Call sends msg, a slot or a batch, to the edge at addr (an AddrHTTP
// address) and returns the answer: the response JSON, nil for notifications
// (HTTP 204). A whole-message refusal that the edge answered with a JSON-RPC
// error (HTTP 400, 413, 429) is returned as that answer, as the mesh returns
// it. The session is addr.SessionID when given, else a cached one or a new
// one from GET /mcpv2/session; on 401 a fresh session is fetched once and the
// call retried. Errors wrap ErrUnreachable, ErrSessionRefused, or are an
// *HTTPError.
func (c *Client) Call(ctx context.Context, addr protocol.Address, msg []byte) ([]byte, error) {
	return c.post(ctx, addr, "call", addr.URL, msg)
}

// Forward sends msg through the edge at addr to the mesh peer peerID (the
// gateway, POST /mcpv2/peers/{PeerID}) and returns the peer's answer, as
// Call does; the edge forwards with this client's grants there.
func (c *Client) Forward(ctx context.Context, addr protocol.Address, peerID string, msg []byte) ([]byte, error) {
	if addr.Kind != protocol.AddrHTTP {
		return nil, fmt.Errorf("edge: forward: %s is not an HTTP edge address", addr)
	}
	return c.post(ctx, addr, "forward", strings.TrimSuffix(addr.URL, "/")+"/peers/"+url.PathEscape(peerID), msg)
}

// Find asks the edge at addr for agents with a skill or tag (GET
// /mcpv2/find), best first, at most limit (1-100).
func (c *Client) Find(ctx context.Context, addr protocol.Address, skillOrTag string, limit int) ([]protocol.FindResult, error) {
	if addr.Kind != protocol.AddrHTTP {
		return nil, fmt.Errorf("edge: find: %s is not an HTTP edge address", addr)
	}
	u := strings.TrimSuffix(addr.URL, "/") + "/find?" + url.Values{"skill": {skillOrTag}, "limit": {strconv.Itoa(limit)}}.Encode()
	tok := addr.SessionID
	if tok == "" {
		var err error
		if tok, err = c.Session(ctx, addr); err != nil {
			return nil, err
		}
	}
	status, hdr, body, err := c.do(ctx, "find", hostPort(addr), http.MethodGet, u, tok, nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		he := httpError(u, status, hdr, body)
		if he.RPC != nil {
			if status == http.StatusNotImplemented {
				return nil, fmt.Errorf("edge: find: %w: %w", protocol.ErrNoDiscovery, he.RPC)
			}
			return nil, he.RPC
		}
		return nil, fmt.Errorf("edge: find %s: %w", hostPort(addr), he)
	}
	var fa FindAnswer
	if err := json.Unmarshal(body, &fa); err != nil {
		return nil, fmt.Errorf("edge: find %s: the answer is not a find answer: %v", hostPort(addr), err)
	}
	return fa.Results, nil
}

// post is Call to the URL u of the edge at addr.
func (c *Client) post(ctx context.Context, addr protocol.Address, op, u string, msg []byte) ([]byte, error) {
	if addr.Kind != protocol.AddrHTTP {
		return nil, fmt.Errorf("edge: %s: %s is not an HTTP edge address", op, addr)
	}
	target := hostPort(addr)
	tok := addr.SessionID
	if tok == "" {
		var err error
		if tok, err = c.Session(ctx, addr); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		status, hdr, body, err := c.do(ctx, op, target, http.MethodPost, u, tok, msg)
		if err != nil {
			return nil, err
		}
		switch {
		case status == http.StatusOK:
			return body, nil
		case status == http.StatusNoContent:
			return nil, nil
		case status == http.StatusUnauthorized && attempt == 0:
			c.forget(addr)
			if tok, err = c.fetchSession(ctx, addr); err != nil {
				return nil, err
			}
			continue
		}
		he := httpError(u, status, hdr, body)
		switch {
		case status == http.StatusUnauthorized:
			c.forget(addr)
			return nil, fmt.Errorf("edge: %s %s: %w: %w", op, target, ErrSessionRefused, he)
		case he.RPC != nil && (status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge || status == http.StatusTooManyRequests):
			return body, nil
		}
		return nil, fmt.Errorf("edge: %s %s: %w", op, target, he)
	}
}

// CallSkill runs one tools/call of skill with args (nil: {}) on the edge at
// addr and returns the result: o.Provider sets the slot's
// context.provider, o.Session is the session presented in place of
// addr.SessionID. A failed slot is returned as its *protocol.Error.
func (c *Client) CallSkill(ctx context.Context, addr protocol.Address, skill string, args json.RawMessage, o protocol.CallOptions) (json.RawMessage, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if !json.Valid(args) {
		return nil, fmt.Errorf("edge: call %s: the arguments are not JSON", skill)
	}
	params, err := json.Marshal(protocol.CallParams{Name: skill, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("edge: call %s: %w", skill, err)
	}
	return c.callOne(ctx, addr, protocol.MethodToolsCall, params, o)
}

// CallMethod runs one slot of method (tools/list, agent/card) with empty
// params on the edge at addr, with o as CallSkill takes it, and returns the
// result; a failed slot is returned as its *protocol.Error.
func (c *Client) CallMethod(ctx context.Context, addr protocol.Address, method string, o protocol.CallOptions) (json.RawMessage, error) {
	return c.callOne(ctx, addr, method, json.RawMessage("{}"), o)
}

func (c *Client) callOne(ctx context.Context, addr protocol.Address, method string, params json.RawMessage, o protocol.CallOptions) (json.RawMessage, error) {
	slot := protocol.Slot{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: method, Params: params}
	if o.Provider != "" {
		slot.Context = &protocol.SlotContext{Provider: o.Provider}
	}
	if o.Session != "" {
		addr.SessionID = o.Session
	}
	msg, err := json.Marshal(slot)
	if err != nil {
		return nil, fmt.Errorf("edge: call: %w", err)
	}
	out, err := c.Call(ctx, addr, msg)
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, fmt.Errorf("edge: call %s: the edge sent no response", hostPort(addr))
	}
	resps, err := protocol.ParseResponses(out)
	if err != nil || len(resps) != 1 {
		return nil, fmt.Errorf("edge: call %s: the answer is not one JSON-RPC response", hostPort(addr))
	}
	if resps[0].Error != nil {
		return nil, resps[0].Error
	}
	return resps[0].Result, nil
}

// HealthStatus is the body of GET /mcpv2/health.
type HealthStatus struct {
	// Status is "ok" when the node is up.
	Status string `json:"status"`
	// Version is the node's software version.
	Version string `json:"version"`
	// PeerID is the node's PeerID.
	PeerID string `json:"peer_id"`
	// ProtocolVersion is the mcpv2 protocol version ("mcpv2/1.0").
	ProtocolVersion string `json:"protocol_version"`
	// LLMMode reports whether ask keeps per-conversation history.
	LLMMode bool `json:"llm_mode"`
	// TLS reports whether the edge serves HTTPS.
	TLS bool `json:"tls"`
	// MTLS reports whether the edge requires client certificates (mutual
	// TLS).
	MTLS bool `json:"mtls"`
	// Flags repeats the boolean flags (llm_mode, tls, mtls) as the seed
	// listed them.
	Flags map[string]bool `json:"flags"`
	// UptimeS is how long the edge has run, in seconds.
	UptimeS int64 `json:"uptime_s"`
	// PeerAddress is the edge's advertised address.
	PeerAddress string `json:"peer_address"`
	// Credentials says which credentials the edge accepts and how many
	// are active.
	Credentials *CredentialCounts `json:"credentials,omitempty"`
}

// CredentialCounts is the credentials part of the health answer.
type CredentialCounts struct {
	// APIKeys counts the node's API keys that are neither revoked nor
	// expired; -1 when the edge accepts no keys.
	APIKeys int `json:"api_keys"`
	// Sessions counts the anonymous sessions this edge issued that have
	// neither expired nor been revoked.
	Sessions int `json:"sessions"`
	// RevokedSessions counts the revoked sessions not yet expired.
	RevokedSessions int `json:"revoked_sessions"`
	// OIDCIssuers are the OpenID Connect issuers whose tokens it accepts.
	OIDCIssuers []string `json:"oidc_issuers,omitempty"`
	// Anonymous says whether the faces serve callers without a credential.
	Anonymous bool `json:"anonymous"`
}

// Health asks the edge at addr for its health (no session needed).
func (c *Client) Health(ctx context.Context, addr protocol.Address) (HealthStatus, error) {
	if addr.Kind != protocol.AddrHTTP {
		return HealthStatus{}, fmt.Errorf("edge: health: %s is not an HTTP edge address", addr)
	}
	target := hostPort(addr)
	u := addr.URL + "/health"
	status, hdr, body, err := c.do(ctx, "health", target, http.MethodGet, u, "", nil)
	if err != nil {
		return HealthStatus{}, err
	}
	if status != http.StatusOK {
		return HealthStatus{}, fmt.Errorf("edge: health %s: %w", target, httpError(u, status, hdr, body))
	}
	var h HealthStatus
	if err := json.Unmarshal(body, &h); err != nil || h.Status == "" {
		return HealthStatus{}, fmt.Errorf("edge: health %s: the answer is not an mcpv2 health document", target)
	}
	return h, nil
}

// Session returns a session token for the edge at addr: a cached one that is
// still valid for at least 30 s, else a new one from GET /mcpv2/session,
// which is then cached until shortly before it expires. It ignores
// addr.SessionID.
func (c *Client) Session(ctx context.Context, addr protocol.Address) (string, error) {
	if addr.Kind != protocol.AddrHTTP {
		return "", fmt.Errorf("edge: session: %s is not an HTTP edge address", addr)
	}
	c.mu.Lock()
	cs, ok := c.sessions[addr.URL]
	c.mu.Unlock()
	if ok && c.now().Before(cs.expires) {
		return cs.token, nil
	}
	return c.fetchSession(ctx, addr)
}

// fetchSession gets a new session from the edge, or mints one with the
// client's secret, and caches it.
func (c *Client) fetchSession(ctx context.Context, addr protocol.Address) (string, error) {
	target := hostPort(addr)
	if c.key != "" {
		return c.key, nil
	}
	if c.secret != nil {
		ip, err := sourceIP(ctx, target)
		if err != nil {
			return "", fmt.Errorf("edge: session %s: %w", target, err)
		}
		tok, _ := protocol.MintToken(c.secret, ip, c.now(), mintedSessionTTL)
		c.mu.Lock()
		c.sessions[addr.URL] = cachedSession{token: tok, expires: c.now().Add(mintedSessionTTL - sessionMargin)}
		c.mu.Unlock()
		return tok, nil
	}
	u := addr.URL + "/session"
	status, hdr, body, err := c.do(ctx, "session", target, http.MethodGet, u, "", nil)
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("edge: session %s: %w: %w", target, ErrSessionRefused, httpError(u, status, hdr, body))
	}
	var sa sessionAnswer
	if err := json.Unmarshal(body, &sa); err != nil || sa.SessionID == "" {
		return "", fmt.Errorf("edge: session %s: %w: the answer has no sessionId", target, ErrSessionRefused)
	}
	ttl := time.Duration(sa.TTL) * time.Second
	if ttl <= 0 {
		ttl = time.Minute
	}
	margin := min(sessionMargin, ttl/10)
	c.mu.Lock()
	c.sessions[addr.URL] = cachedSession{token: sa.SessionID, expires: c.now().Add(ttl - margin)}
	c.mu.Unlock()
	return sa.SessionID, nil
}

// mintedSessionTTL is the lifetime of sessions a secret holder mints.
const mintedSessionTTL = 10 * time.Minute

// sourceIP returns the local address this machine sends from to reach
// target (host:port): the address the edge sees, unless a NAT is between.
// Connecting a UDP socket sends nothing; it only asks the kernel's routing.
func sourceIP(ctx context.Context, target string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", target)
	if err != nil {
		return "", fmt.Errorf("cannot tell which address reaches %s: %w", target, err)
	}
	defer conn.Close()
	ua, ok := conn.LocalAddr().(*net.UDPAddr)
	if !ok {
		return "", fmt.Errorf("cannot tell which address reaches %s", target)
	}
	return ua.AddrPort().Addr().Unmap().String(), nil
}

// forget drops the cached session of addr.
func (c *Client) forget(addr protocol.Address) {
	c.mu.Lock()
	delete(c.sessions, addr.URL)
	c.mu.Unlock()
}

// do sends one request, with the traceparent header of ctx's span when
// it has one, and reads the answer, capped. A transport failure is
// an unreachableError; the caller's cancellation is returned as it is.
func (c *Client) do(ctx context.Context, op, target, method, u, token string, body []byte) (int, http.Header, []byte, error) {
	if c.closed.Load() {
		return 0, nil, nil, fmt.Errorf("edge: %s %s: %w", op, target, net.ErrClosed)
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("edge: %s %s: %w", op, target, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set(SessionHeader, token)
	}
	injectTraceparent(ctx, req.Header) // the edge's span of the call is its child
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, nil, transportError(ctx, op, target, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.maxResponse+1))
	if err != nil {
		return 0, nil, nil, transportError(ctx, op, target, err)
	}
	if int64(len(data)) > c.maxResponse {
		return 0, nil, nil, fmt.Errorf("edge: %s %s: the answer is larger than the client's cap of %d bytes", op, target, c.maxResponse)
	}
	return resp.StatusCode, resp.Header, data, nil
}

// transportError classifies a failed request.
func transportError(ctx context.Context, op, target string, err error) error {
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return fmt.Errorf("edge: %s %s: %w", op, target, ctx.Err())
	}
	inner := err
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		inner = urlErr.Err // without the URL, which the message names already
	}
	reason := "connection failed: " + inner.Error()
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		reason = "connection refused (no mcpv2 edge listens there; is the node running with --port?)"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		reason = "no route to the host"
	case errors.As(err, &dnsErr):
		reason = "cannot resolve the host name: " + dnsErr.Err
	case errors.Is(err, context.DeadlineExceeded):
		reason = "no answer before the deadline"
	case errors.As(err, &ne) && ne.Timeout():
		reason = "timed out"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		reason = "cannot connect: " + opErr.Err.Error()
	}
	return &unreachableError{op: op, target: target, reason: reason, err: err}
}

// httpError builds the HTTPError of an unexpected answer.
func httpError(u string, status int, hdr http.Header, body []byte) *HTTPError {
	he := &HTTPError{URL: u, StatusCode: status}
	if ra := hdr.Get("Retry-After"); ra != "" {
		if n, err := strconv.Atoi(ra); err == nil && n >= 0 {
			he.RetryAfter = time.Duration(n) * time.Second
		}
	}
	var r protocol.Response
	if json.Unmarshal(body, &r) == nil && r.Error != nil {
		he.RPC = r.Error
		return he
	}
	he.Body = strings.ToValidUTF8(protocol.Clip(strings.TrimSpace(string(body)), 200), "?")
	return he
}

func hostPort(a protocol.Address) string {
	return net.JoinHostPort(a.Host, strconv.Itoa(a.Port))
}

// Reasons of PeerUnreachable's error (its data.reason).
const (
	// ReasonUnreachable: the node could not connect to the peer.
	ReasonUnreachable = "unreachable"
	// ReasonNoAnswer: the node reached the peer, which did not answer.
	ReasonNoAnswer = "no_answer"
)

// PeerUnreachable is the error a caller gets when a Backend's Forward to
// peer failed without a protocol error: -32004, "could not reach peer
// <peer>", and data {"reason": …}: ReasonUnreachable, or the reason err
// gives through a PeerReason() string method (the node's PeerError). What
// the dial found stays out of it, so that a caller cannot tell an open port
// from a closed one or a dead peer through the peers it asks for; the node
// logs it. It is the same on the gateway, the MCP and the A2A faces.
func PeerUnreachable(peer string, err error) *protocol.Error {
	reason := ReasonUnreachable
	var r interface{ PeerReason() string }
	if errors.As(err, &r) && r.PeerReason() == ReasonNoAnswer {
		reason = ReasonNoAnswer
	}
	return &protocol.Error{Code: protocol.CodeToolExecution, Message: "could not reach peer " + peer,
		Data: map[string]string{"reason": reason}}
}

// HandleByForward answers msg for c as a node's Handle would, by
// forwarding it with forward (a Backend's Forward) to the mesh peer peer:
// the Handle of a face that serves a peer of the mesh. A peer that cannot
// be reached refuses the whole message with PeerUnreachable's error; a
// refusal the gateway made (-32009 for a skill c may not run) is passed on.
func HandleByForward(ctx context.Context, forward func(context.Context, protocol.Caller, string, []byte) ([]byte, error),
	c protocol.Caller, peer string, msg []byte) ([]byte, *protocol.Error) {
	out, err := forward(ctx, c, peer, msg)
	if err == nil {
		return out, nil
	}
	perr := protocol.AsError(err)
	if perr.Code == protocol.CodeInternal {
		perr = PeerUnreachable(peer, err)
	}
	o, _ := protocol.EncodeResponses(false, []protocol.Response{protocol.ErrorResponse(nil, perr)})
	return o, perr
}
