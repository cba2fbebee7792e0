package a2aclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcpv2/mcpv2/internal/netscope"
)

// Defaults of the options.
const (
	// DefaultTimeout bounds a Card or a Call (WithTimeout).
	DefaultTimeout = 60 * time.Second
	// DefaultMaxResponse caps one JSON-RPC answer, one stream event, and
	// the total of a stream's events (WithMaxResponse).
	DefaultMaxResponse = 8 << 20
	// DefaultPollMin and DefaultPollMax bound the pause between two
	// GetTask polls: it starts at the first and doubles to the second.
	DefaultPollMin = 50 * time.Millisecond
	DefaultPollMax = 2 * time.Second
)

// versionHeader is the A2A version a request speaks (v1.0: "1.0"; a
// request without it is v0.3).
const versionHeader = "A2A-Version"

type config struct {
	hc               *http.Client
	log              *slog.Logger
	timeout          time.Duration
	maxCard          int64
	maxResponse      int64
	pollMin, pollMax time.Duration
	headers          http.Header
	streaming        *bool
	cardKey          any // WithCardKey's
}

// Option configures a Client (see New).
type Option func(*config) error

// WithHTTPClient sets the client every request goes through (the card,
// a jku's key set, messages, polls). Nil (the default) is a client of the
// outbound scope with no prefix allowed (internal/netscope): no loopback,
// link-local or private target. A node passes its scoped client
// (node.Node.OutboundClient).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *config) error { c.hc = hc; return nil }
}

// WithLogger sets the logger of request details (Debug). Nil discards.
func WithLogger(log *slog.Logger) Option {
	return func(c *config) error { c.log = log; return nil }
}

// WithTimeout bounds each Card and Call (default DefaultTimeout); the
// caller's context may bound it more. It must be positive.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("a2aclient: timeout %v is not positive", d)
		}
		c.timeout = d
		return nil
	}
}

// ownHeaders are the headers the client sets itself, beyond those no
// outbound request may be configured with (netscope.CheckHeader).
var ownHeaders = []string{"Accept", versionHeader}

// CheckHeader refuses a header name WithHeaders refuses: not a valid
// name, or one net/http or the client sets (Host, Content-Type,
// Content-Length, Transfer-Encoding, Connection, Accept, A2A-Version; any
// case). Errors name it.
func CheckHeader(name string) error { return netscope.CheckHeader(name, ownHeaders...) }

// WithHeaders adds headers (an API key the agent asks for) to the requests
// that go to the origin (scheme, host and port) of the URL given to Card:
// the card's and, when the card's endpoint is at that origin, the
// messages and polls. A jku, an endpoint on another origin and a redirect
// get none of them (and a redirect to another origin is refused). Names
// CheckHeader refuses are an error.
func WithHeaders(h http.Header) Option {
	return func(c *config) error {
		for k := range h {
			if err := CheckHeader(k); err != nil {
				return fmt.Errorf("a2aclient: %w", err)
			}
		}
		c.headers = h.Clone()
		return nil
	}
}

// WithCardKey pins the key the agent's card must be signed with (see
// ParseCardKey): an unsigned card, or one no signature of which verifies
// with it, fails with ErrBadSignature, and the keys the card names (jwk,
// jku, a PeerID kid) are not used. A verified card's Key is KeyPinned.
func WithCardKey(key any) Option {
	return func(c *config) error {
		switch key.(type) {
		case nil:
			return errors.New("a2aclient: card key is nil")
		case string, []byte:
			return errors.New("a2aclient: card key is text; parse it with ParseCardKey")
		}
		c.cardKey = key
		return nil
	}
}

// WithMaxCard caps a card's body in bytes (default DefaultMaxCard; at most
// that).
func WithMaxCard(n int64) Option {
	return func(c *config) error {
		if n <= 0 || n > DefaultMaxCard {
			return fmt.Errorf("a2aclient: card cap %d is not in 1..%d", n, DefaultMaxCard)
		}
		c.maxCard = n
		return nil
	}
}

// WithMaxResponse caps one JSON-RPC answer, one stream event, and the
// total of one stream's events (what a Call accumulates from them) in
// bytes (default DefaultMaxResponse). Past it the Call fails.
func WithMaxResponse(n int64) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("a2aclient: response cap %d is not positive", n)
		}
		c.maxResponse = n
		return nil
	}
}

// WithPollInterval sets the first and the largest pause between two
// polls of a task (defaults DefaultPollMin, DefaultPollMax).
func WithPollInterval(first, most time.Duration) Option {
	return func(c *config) error {
		if first <= 0 || most < first {
			return fmt.Errorf("a2aclient: poll interval %v..%v: want 0 < first <= most", first, most)
		}
		c.pollMin, c.pollMax = first, most
		return nil
	}
}

// WithStreaming forces streaming on (only where the card says the agent
// streams) or off (always send and poll). Without it the client streams
// when the card says the agent streams.
func WithStreaming(on bool) Option {
	return func(c *config) error { c.streaming = &on; return nil }
}

// Client calls A2A agents (v1.0 or v0.3, JSON-RPC binding). It owns no
// goroutine: every request runs on its caller's. Safe for concurrent use.
type Client struct {
	cfg config
	hc  *http.Client
	log *slog.Logger
}

// New returns a Client. Errors name the bad option.
func New(opts ...Option) (*Client, error) {
	cfg := config{timeout: DefaultTimeout, maxCard: DefaultMaxCard, maxResponse: DefaultMaxResponse,
		pollMin: DefaultPollMin, pollMax: DefaultPollMax, headers: http.Header{}}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.hc == nil {
		// No keep-alive: the client owns no connection (and so no
		// goroutine) once a request is done.
		cfg.hc = netscope.New(nil).Client(0)
		cfg.hc.Transport.(*http.Transport).DisableKeepAlives = true
	}
	hc := *cfg.hc // the caller's client, with redirects kept to their origin
	next := hc.CheckRedirect
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !sameOrigin(req.URL, via[0].URL) {
			return fmt.Errorf("redirect from %s to another origin (%s) refused", via[0].URL.Redacted(), clip(req.URL.Redacted(), 200))
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	cfg.hc = &hc
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	return &Client{cfg: cfg, hc: cfg.hc, log: cfg.log}, nil
}

// bound is ctx with the client's timeout.
func (c *Client) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.timeout)
}

// RPCError is a JSON-RPC error an agent answered.
type RPCError struct {
	Agent   string // the agent's endpoint
	Method  string
	Code    int
	Message string
	Data    json.RawMessage
}

// Error names the agent, the method and the agent's error.
func (e *RPCError) Error() string {
	s := fmt.Sprintf("a2a agent %s: %s: error %d: %s", e.Agent, e.Method, e.Code, clip(e.Message, 300))
	if len(e.Data) > 0 && string(e.Data) != "null" {
		s += " (data: " + clip(string(e.Data), 200) + ")"
	}
	return s
}

// rpcResponse is a JSON-RPC 2.0 answer.
type rpcResponse struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// decodeRPC reads one JSON-RPC answer: its result, or an *RPCError.
func decodeRPC(body []byte, card *Card, method string) (json.RawMessage, error) {
	var r rpcResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("a2a agent %s: %s: the answer is not JSON-RPC: %v", card.Endpoint, method, err)
	}
	if r.Error != nil {
		return nil, &RPCError{Agent: card.Endpoint, Method: method, Code: r.Error.Code, Message: r.Error.Message, Data: r.Error.Data}
	}
	if len(r.Result) == 0 || string(r.Result) == "null" {
		return nil, fmt.Errorf("a2a agent %s: %s: the answer has neither result nor error", card.Endpoint, method)
	}
	return r.Result, nil
}

// post sends one JSON-RPC request to card's endpoint. With stream, it asks
// for an event stream; the caller closes the response's body. A non-2xx
// status is an error naming it and the start of the body.
func (c *Client) post(ctx context.Context, card *Card, method string, params any, stream bool) (*http.Response, error) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": newID(), "method": method, "params": params})
	if err != nil {
		return nil, fmt.Errorf("a2a agent %s: %s: %w", card.Endpoint, method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, card.Endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("a2a agent %s: %s: %w", card.Endpoint, method, err)
	}
	req.Header = http.Header{}
	if o, err := url.Parse(card.origin()); err == nil && sameOrigin(req.URL, o) {
		req.Header = c.cfg.headers.Clone()
	} else if len(c.cfg.headers) > 0 {
		c.log.Debug("a2a request: the endpoint is on another origin than the agent's URL; its headers are withheld", "agent", card.Endpoint, "url", card.origin())
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(versionHeader, card.ProtocolVersion)
	if stream {
		req.Header.Set("Accept", "text/event-stream, application/json")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	c.log.Debug("a2a request", "agent", card.Endpoint, "method", method, "version", card.ProtocolVersion)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("a2a agent %s: %s: %w", card.Endpoint, method, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		var r rpcResponse // a JSON-RPC error on a non-2xx status says more than the status
		if json.Unmarshal(b, &r) == nil && r.Error != nil {
			return nil, &RPCError{Agent: card.Endpoint, Method: method, Code: r.Error.Code, Message: r.Error.Message + " (HTTP " + resp.Status + ")", Data: r.Error.Data}
		}
		return nil, fmt.Errorf("a2a agent %s: %s: HTTP status %s: %s", card.Endpoint, method, resp.Status, clip(strings.TrimSpace(string(b)), 200))
	}
	return resp, nil
}

// call sends one JSON-RPC request and returns its result.
func (c *Client) call(ctx context.Context, card *Card, method string, params any) (json.RawMessage, error) {
	resp, err := c.post(ctx, card, method, params, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.maxResponse+1))
	if err != nil {
		return nil, fmt.Errorf("a2a agent %s: %s: reading the answer: %w", card.Endpoint, method, err)
	}
	if int64(len(body)) > c.cfg.maxResponse {
		return nil, fmt.Errorf("a2a agent %s: %s: the answer is larger than %d bytes", card.Endpoint, method, c.cfg.maxResponse)
	}
	return decodeRPC(body, card, method)
}

// sameOrigin says a and b have one scheme, host and port (a missing port
// is the scheme's default).
func sameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "https") {
			return "443"
		}
		return "80"
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

// isEventStream says the response is an SSE stream.
func isEventStream(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "text/event-stream"
}

// newID is a random id (messages, JSON-RPC requests).
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// clip shortens s (the agent wrote it) to n bytes of valid UTF-8, with an
// ellipsis.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
