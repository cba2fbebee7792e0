package edge

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/protocol"
)

// countingEdge serves a Server's handler through httptest, counting new
// connections and session issues.
type countingEdge struct {
	s        *Server
	b        *fakeBackend
	ts       *httptest.Server
	newConns atomic.Int64
	sessions atomic.Int64
	addr     protocol.Address
}

func startCountingEdge(t *testing.T, cfg Config) *countingEdge {
	t.Helper()
	if cfg.BindHost == "" {
		cfg.BindHost = "127.0.0.1"
	}
	if cfg.Secret == nil {
		cfg.Secret = testSecret
	}
	ce := &countingEdge{b: &fakeBackend{}}
	s, err := New(ce.b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ce.s = s
	ce.ts = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mcpv2/session" {
			ce.sessions.Add(1)
		}
		s.Handler().ServeHTTP(w, r)
	}))
	ce.ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			ce.newConns.Add(1)
		}
	}
	ce.ts.Start()
	t.Cleanup(func() {
		ce.ts.Close()
		s.Close()
	})
	ce.addr, err = protocol.ParseAddress("mcpv2://" + ce.ts.Listener.Addr().String() + "/mcpv2")
	if err != nil {
		t.Fatal(err)
	}
	return ce
}

func TestClientSessionFetchAndReuse(t *testing.T) {
	ce := startCountingEdge(t, Config{})
	c := newClient(t)
	defer c.Close()
	for i := range 10 {
		res, err := c.CallSkill(t.Context(), ce.addr, "ping", json.RawMessage(`{"payload":"x"}`), protocol.CallOptions{})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if !strings.Contains(string(res), `"pong":true`) {
			t.Fatalf("result %s", res)
		}
	}
	if n := ce.sessions.Load(); n != 1 {
		t.Errorf("session fetched %d times, want 1 (cached)", n)
	}
	if n := ce.newConns.Load(); n != 1 {
		t.Errorf("%d new connections for 11 requests, want 1 (reused)", n)
	}
	tok, err := c.Session(t.Context(), ce.addr)
	if err != nil || tok == "" || ce.sessions.Load() != 1 {
		t.Errorf("Session = %q, %v (fetches %d)", tok, err, ce.sessions.Load())
	}
}

func TestClientConcurrentCallsShareConnections(t *testing.T) {
	ce := startCountingEdge(t, Config{})
	c := newClient(t)
	defer c.Close()
	if _, err := c.Session(t.Context(), ce.addr); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				if _, err := c.CallSkill(t.Context(), ce.addr, "ping", nil, protocol.CallOptions{}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// The transport may dial a spare connection when one frees up while a
	// dial is in flight, but 100 calls never take more than a few.
	if n := ce.newConns.Load(); n > 8 {
		t.Errorf("%d new connections for 100 calls by 4 concurrent callers", n)
	}
}

func TestClientRefreshesOnceOn401(t *testing.T) {
	clk := newClock()
	ce := startCountingEdge(t, Config{Now: clk.Now})
	c := newClient(t)
	defer c.Close()
	// An address carrying a session from another secret: 401, then a fresh
	// session, then success.
	stale := ce.addr
	stale.SessionID, _ = protocol.MintToken([]byte("old secret"), "127.0.0.1", clk.Now(), time.Hour)
	res, err := c.CallSkill(t.Context(), stale, "ping", nil, protocol.CallOptions{})
	if err != nil {
		t.Fatalf("call with a stale session: %v", err)
	}
	if !strings.Contains(string(res), "pong") || ce.sessions.Load() != 1 {
		t.Errorf("res %s, session fetches %d", res, ce.sessions.Load())
	}
	// A cached session that the edge no longer accepts (here: the edge's
	// clock is past its expiry, the client's is not) is replaced the same way.
	clk.Add(2 * time.Hour)
	if _, err := c.CallSkill(t.Context(), ce.addr, "ping", nil, protocol.CallOptions{}); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	if n := ce.sessions.Load(); n != 2 {
		t.Errorf("session fetches %d, want 2", n)
	}
}

func TestClientSessionRefusedTwice(t *testing.T) {
	// An edge that issues sessions that it then refuses: one retry, then a
	// session-refused error.
	var posts atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/mcpv2/session":
			writeJSON(w, 200, sessionAnswer{SessionID: "x.y", ExpiresAt: time.Now().Add(time.Hour).Unix(), TTL: 3600})
		default:
			posts.Add(1)
			writeJSON(w, 401, protocol.ErrorResponse(nil, protocol.Errorf(protocol.CodeInvalidSession, "invalid session: bad signature")))
		}
	}))
	defer ts.Close()
	c := newClient(t)
	defer c.Close()
	addr, _ := protocol.ParseAddress("http://" + ts.Listener.Addr().String())
	_, err := c.Call(t.Context(), addr, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if !errors.Is(err, ErrSessionRefused) || errors.Is(err, ErrUnreachable) {
		t.Fatalf("err = %v", err)
	}
	var he *HTTPError
	var pe *protocol.Error
	if !errors.As(err, &he) || he.StatusCode != 401 || !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidSession {
		t.Errorf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "session refused") || !strings.Contains(err.Error(), "bad signature") {
		t.Errorf("message %q", err)
	}
	if posts.Load() != 2 {
		t.Errorf("%d POSTs, want 2 (one retry)", posts.Load())
	}
}

func TestClientSessionIssueRateLimited(t *testing.T) {
	ce := startCountingEdge(t, Config{SessionRateLimit: 1})
	c1, c2 := newClient(t), newClient(t)
	defer c1.Close()
	defer c2.Close()
	if _, err := c1.Session(t.Context(), ce.addr); err != nil {
		t.Fatal(err)
	}
	_, err := c2.Session(t.Context(), ce.addr)
	var he *HTTPError
	if !errors.Is(err, ErrSessionRefused) || !errors.As(err, &he) || he.StatusCode != 429 || he.RetryAfter != time.Second {
		t.Fatalf("err = %v", err)
	}
}

func TestClientUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens there now
	addr, _ := protocol.ParseAddress("mcpv2://127.0.0.1:" + strconv.Itoa(port) + "/mcpv2")
	c := newClient(t)
	defer c.Close()
	_, err = c.CallSkill(t.Context(), addr, "ping", nil, protocol.CallOptions{})
	if !errors.Is(err, ErrUnreachable) || errors.Is(err, ErrSessionRefused) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"edge: session 127.0.0.1:" + strconv.Itoa(port), "unreachable", "connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	// With a session in the address the call itself is unreachable.
	addr.SessionID = "a.b"
	_, err = c.Call(t.Context(), addr, []byte(`{}`))
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "edge: call ") {
		t.Errorf("err = %v", err)
	}
	if _, err := c.Health(t.Context(), addr); !errors.Is(err, ErrUnreachable) {
		t.Errorf("health err = %v", err)
	}
}

func TestClientTimeoutIsUnreachable(t *testing.T) {
	// A listener that accepts and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			cn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, cn)
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, cn := range conns {
			cn.Close()
		}
		mu.Unlock()
	}()
	addr, _ := protocol.ParseAddress("mcpv2://" + ln.Addr().String() + "/mcpv2")
	c := newClient(t)
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err = c.Health(ctx, addr)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "no answer before the deadline") {
		t.Errorf("err = %v", err)
	}
}

func TestClientHTTPErrors(t *testing.T) {
	ce := startCountingEdge(t, Config{MaxBody: 256})
	c := newClient(t)
	defer c.Close()
	// A whole-message refusal comes back as the answer, as on the mesh.
	out, err := c.Call(t.Context(), ce.addr, []byte(`[]`))
	if err != nil || rpcError(t, out).Code != protocol.CodeInvalidRequest {
		t.Fatalf("empty batch: %s, %v", out, err)
	}
	out, err = c.Call(t.Context(), ce.addr, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"`+strings.Repeat("y", 300)+`"}}`))
	if err != nil || !strings.Contains(rpcError(t, out).Message, "256 bytes") {
		t.Fatalf("too big: %s, %v", out, err)
	}
	// Notifications: no answer, no error.
	out, err = c.Call(t.Context(), ce.addr, []byte(`{"jsonrpc":"2.0","method":"tools/list"}`))
	if err != nil || out != nil {
		t.Fatalf("notification: %q, %v", out, err)
	}
	// A failed slot is the remote *protocol.Error.
	_, err = c.CallSkill(t.Context(), ce.addr, "nope", nil, protocol.CallOptions{})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeSkillNotFound {
		t.Errorf("err = %v", err)
	}
	// The provider travels in the slot's context.
	if _, err := c.CallSkill(t.Context(), ce.addr, "ask", json.RawMessage(`{"query":"hi"}`), protocol.CallOptions{Provider: "gemini"}); err != nil {
		t.Fatal(err)
	}
	if _, prov := ce.b.lastAsk(); prov != "gemini" {
		t.Errorf("provider = %q", prov)
	}
	// Not an HTTP edge address.
	mesh, _ := protocol.ParseAddress(testPeerID)
	if _, err := c.Call(t.Context(), mesh, []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "not an HTTP edge address") {
		t.Errorf("mesh address: %v", err)
	}
	// Something that is not an edge: an HTTPError with the status.
	ts := httptest.NewServer(http.NotFoundHandler())
	defer ts.Close()
	other, _ := protocol.ParseAddress("http://" + ts.Listener.Addr().String())
	other.SessionID = "a.b"
	_, err = c.Call(t.Context(), other, []byte(`{}`))
	var he *HTTPError
	if !errors.As(err, &he) || he.StatusCode != 404 || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("err = %v", err)
	}
}

func TestClientHealthAndMethods(t *testing.T) {
	ce := startCountingEdge(t, Config{LLMMode: true})
	c := newClient(t)
	defer c.Close()
	h, err := c.Health(t.Context(), ce.addr)
	if err != nil || h.Status != "ok" || h.PeerID != testPeerID || !h.LLMMode {
		t.Fatalf("health %+v, %v", h, err)
	}
	res, err := c.CallMethod(t.Context(), ce.addr, protocol.MethodToolsList, protocol.CallOptions{})
	if err != nil || !strings.Contains(string(res), `"tools"`) {
		t.Fatalf("tools/list %s, %v", res, err)
	}
}

func TestClientResponseCap(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("x", 2048)))
	}))
	defer ts.Close()
	c := newClient(t, WithMaxResponse(1024))
	addr, _ := protocol.ParseAddress("http://" + ts.Listener.Addr().String())
	if _, err := c.Health(t.Context(), addr); err == nil || !strings.Contains(err.Error(), "larger than the client's cap") {
		t.Errorf("err = %v", err)
	}
}

// newClient returns a Client with opts, closed when the test ends.
func newClient(t testing.TB, opts ...ClientOption) *Client {
	t.Helper()
	c, err := NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestClientOptions: an option error fails NewClient; the defaults and the
// options land in the client.
func TestClientOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  ClientOption
	}{
		{"nil http client", WithHTTPClient(nil)},
		{"zero response cap", WithMaxResponse(0)},
		{"nil clock", WithClock(nil)},
	} {
		if c, err := NewClient(tc.opt); err == nil || c != nil || !strings.HasPrefix(err.Error(), "edge: new client: ") {
			t.Errorf("%s: NewClient = %v, %v; want an error", tc.name, c, err)
		}
	}
	hc := &http.Client{}
	c := newClient(t, WithHTTPClient(hc), WithMaxResponse(77), WithSecret([]byte("s")), WithKey("k"))
	if c.hc != hc || c.maxResponse != 77 || string(c.secret) != "s" || c.key != "k" {
		t.Errorf("options not applied: %+v", c)
	}
	d := newClient(t)
	if d.hc == nil || d.maxResponse != DefaultMaxResponse || d.secret != nil || d.key != "" || d.now == nil {
		t.Errorf("defaults: %+v", d)
	}
}

// TestClientCloseTwice: Close is idempotent, net.ErrClosed on repeat, and
// a call after Close fails with net.ErrClosed without reaching the edge.
func TestClientCloseTwice(t *testing.T) {
	ce := startCountingEdge(t, Config{})
	c := newClient(t)
	if _, err := c.CallSkill(t.Context(), ce.addr, "ping", nil, protocol.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.CloseTwice(t, c)
	conns := ce.newConns.Load()
	for _, call := range []func() error{
		func() error {
			_, err := c.CallSkill(t.Context(), ce.addr, "ping", nil, protocol.CallOptions{})
			return err
		},
		func() error { _, err := c.Call(t.Context(), ce.addr, []byte(`{}`)); return err },
		func() error { _, err := c.Health(t.Context(), ce.addr); return err },
		func() error { _, err := c.Find(t.Context(), ce.addr, "ping", 1); return err },
	} {
		if err := call(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("call after Close: %v, want net.ErrClosed", err)
		}
	}
	if n := ce.newConns.Load(); n != conns {
		t.Errorf("%d new connections after Close", n-conns)
	}
}

// TestClientCallOptionsSession: CallOptions.Session is presented in place
// of a cached session (and of the address's sessionId).
func TestClientCallOptionsSession(t *testing.T) {
	ce := startCountingEdge(t, Config{})
	c := newClient(t)
	tok, err := c.Session(t.Context(), ce.addr)
	if err != nil {
		t.Fatal(err)
	}
	other := newClient(t)
	if _, err := other.CallSkill(t.Context(), ce.addr, "ping", nil, protocol.CallOptions{Session: tok}); err != nil {
		t.Fatal(err)
	}
	if n := ce.sessions.Load(); n != 1 {
		t.Errorf("%d sessions issued, want 1: the call presented the given one", n)
	}
}
