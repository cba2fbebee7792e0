package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/mcpv2/mcpv2/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testPeerID = "12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN"

// auditLine is one Backend.Audit call (or one slot audited by Handle).
type auditLine struct {
	caller protocol.Caller
	method string
	code   int               // 0 when allowed
	span   trace.SpanContext // of the ctx the line was audited with
}

// fakeBackend is a Backend that runs the real protocol.ParseRequest and
// answers ping, ask and tools/list deterministically. mu guards every field
// below it.
type fakeBackend struct {
	mu        sync.Mutex
	audits    []auditLine
	asks      []askArgs
	askCtx    []string // context.provider of each ask
	callers   []protocol.Caller
	forwarded []forwardCall
	// refuse, when set, makes Handle refuse every message with it.
	refuse *protocol.Error
	// askErr, when set, makes the ask slot fail with it.
	askErr *protocol.Error
	// forwardErr, when set, makes Forward fail with it.
	forwardErr error
	// findErr, when set, makes Find fail with it.
	findErr error
	// handleDelay delays Handle (to test graceful shutdown); entered, when
	// set, receives a value as Handle starts.
	handleDelay time.Duration
	entered     chan struct{}
	// quiet keeps only the audit count, not the lines, asks and callers
	// (for fuzzing).
	quiet   bool
	audited int
}

type forwardCall struct {
	caller protocol.Caller
	peer   string
	msg    string
}

func (f *fakeBackend) PeerID() string { return testPeerID }

func (f *fakeBackend) Card() protocol.AgentCard {
	return protocol.AgentCard{
		Name: "test-agent", Description: "A test agent.", Version: "0.0.0-test", PeerID: testPeerID,
		Addrs: []string{}, ProtocolVersions: []string{protocol.Version},
		Skills: []protocol.SkillDescriptor{{Name: "ping", Description: "Ping.", InputSchema: json.RawMessage(`{"type":"object"}`), Tags: []string{"core"}}},
	}
}

func (f *fakeBackend) Audit(ctx context.Context, c protocol.Caller, method string, perr *protocol.Error, start time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.audited++
	if f.quiet {
		return
	}
	l := auditLine{caller: c, method: method, span: trace.SpanContextFromContext(ctx)}
	if perr != nil {
		l.code = perr.Code
	}
	f.audits = append(f.audits, l)
}

func (f *fakeBackend) Handle(ctx context.Context, c protocol.Caller, msg []byte) ([]byte, *protocol.Error) {
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.handleDelay > 0 {
		select {
		case <-time.After(f.handleDelay):
		case <-ctx.Done():
		}
	}
	f.mu.Lock()
	refuse := f.refuse
	if !f.quiet {
		f.callers = append(f.callers, c)
	}
	f.mu.Unlock()
	req, perr := protocol.ParseRequest(msg)
	if perr == nil && refuse != nil {
		perr = refuse
	}
	if perr != nil {
		f.Audit(ctx, c, "", perr, time.Now())
		b, _ := json.Marshal(protocol.ErrorResponse(nil, perr))
		return b, perr
	}
	var resps []protocol.Response
	for i := range req.Slots {
		s := &req.Slots[i]
		result, perr := f.run(s)
		f.Audit(ctx, c, s.Method, perr, time.Now())
		if s.IsNotification() {
			continue
		}
		if perr != nil {
			resps = append(resps, protocol.ErrorResponse(s.ID, perr))
			continue
		}
		resps = append(resps, protocol.Response{JSONRPC: "2.0", ID: s.ID, Result: result})
	}
	out, err := protocol.EncodeResponses(req.IsBatch, resps)
	if err != nil {
		panic(err)
	}
	return out, nil
}

func (f *fakeBackend) run(s *protocol.Slot) (json.RawMessage, *protocol.Error) {
	if s.Err != nil {
		return nil, s.Err
	}
	switch s.Method {
	case protocol.MethodToolsList:
		return json.RawMessage(`{"tools":[{"name":"ping"},{"name":"ask"}]}`), nil
	case protocol.MethodToolsCall:
		var p protocol.CallParams
		if err := json.Unmarshal(s.Params, &p); err != nil || p.Name == "" {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params")
		}
		switch p.Name {
		case "ping":
			return json.RawMessage(`{"pong":true,"peer_id":"` + testPeerID + `","time_unix_ms":1}`), nil
		case "ask":
			var a askArgs
			if err := json.Unmarshal(p.Arguments, &a); err != nil || a.Query == "" {
				return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for ask")
			}
			f.mu.Lock()
			prov := ""
			if s.Context != nil {
				prov = s.Context.Provider
			}
			if !f.quiet {
				f.asks = append(f.asks, a)
				f.askCtx = append(f.askCtx, prov)
			}
			askErr := f.askErr
			f.mu.Unlock()
			if askErr != nil {
				return nil, askErr
			}
			conv := a.ConversationID
			if conv == "" {
				conv = "conv-test"
			}
			last := a.Query
			if i := strings.LastIndex(last, "Current message:\n"); i >= 0 {
				last = last[i+len("Current message:\n"):]
			}
			b, _ := json.Marshal(askResult{Response: "echo: " + last, Provider: "local", Model: "local-echo-1", Turn: 1, ConversationID: conv})
			return b, nil
		}
		return nil, protocol.Errorf(protocol.CodeSkillNotFound, "skill not found: %q", p.Name)
	}
	return nil, protocol.Errorf(protocol.CodeMethodNotFound, "method not found: %q", s.Method)
}

func (f *fakeBackend) Forward(ctx context.Context, c protocol.Caller, peerID string, msg []byte) ([]byte, error) {
	f.mu.Lock()
	if !f.quiet {
		f.forwarded = append(f.forwarded, forwardCall{caller: c, peer: peerID, msg: string(msg)})
	}
	err := f.forwardErr
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	req, perr := protocol.ParseRequest(msg)
	if perr != nil {
		return nil, perr
	}
	if len(req.Slots) == 1 && req.Slots[0].IsNotification() {
		return nil, nil
	}
	return []byte(`{"jsonrpc":"2.0","id":1,"result":{"forwarded_to":"` + peerID + `"}}`), nil
}

func (f *fakeBackend) Find(ctx context.Context, term string, limit int) ([]protocol.FindResult, error) {
	f.mu.Lock()
	err := f.findErr
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	c := f.Card()
	return []protocol.FindResult{{Card: c, Score: 3, Reachable: true}}, nil
}

func (f *fakeBackend) auditCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.audited
}

func (f *fakeBackend) auditLines() []auditLine {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]auditLine(nil), f.audits...)
}

func (f *fakeBackend) lastAsk() (askArgs, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.asks) == 0 {
		return askArgs{}, ""
	}
	return f.asks[len(f.asks)-1], f.askCtx[len(f.askCtx)-1]
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var testSecret = []byte("test-secret-0123456789")

// testEdge is a running Server on 127.0.0.1 with a fake backend and an HTTP
// client of its own.
type testEdge struct {
	s     *Server
	b     *fakeBackend
	clk   *clock
	base  string // http://127.0.0.1:port
	http  *http.Client
	token string // a valid session for 127.0.0.1
}

func startEdge(t *testing.T, cfg Config) *testEdge {
	t.Helper()
	return startEdgeWith(t, &fakeBackend{}, cfg)
}

// startEdgeWith is startEdge with the caller's backend.
func startEdgeWith(t *testing.T, b *fakeBackend, cfg Config) *testEdge {
	t.Helper()
	clk := newClock()
	if cfg.BindHost == "" && cfg.PublicIP == "" {
		cfg.BindHost = "127.0.0.1"
	}
	if cfg.Secret == nil {
		cfg.Secret = testSecret
	}
	if cfg.Now == nil {
		cfg.Now = clk.Now
	}
	s, err := New(b, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	tr := &http.Transport{}
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	tok, _ := s.MintSession("127.0.0.1")
	return &testEdge{s: s, b: b, clk: clk, base: "http://" + s.Addr().String(), http: hc, token: tok}
}

// do sends a request and returns the status, headers and body.
func (e *testEdge) do(t *testing.T, method, path string, body []byte, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// post sends body to path with the edge's valid session in the header.
func (e *testEdge) post(t *testing.T, path string, body string) (int, http.Header, []byte) {
	t.Helper()
	return e.do(t, http.MethodPost, path, []byte(body), map[string]string{SessionHeader: e.token})
}

// rpcError decodes a JSON-RPC error response body and fails the test when
// it is not one.
func rpcError(t *testing.T, body []byte) *protocol.Error {
	t.Helper()
	var r protocol.Response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("body is not a JSON-RPC response: %v: %s", err, body)
	}
	if r.Error == nil || string(r.ID) != "null" || r.JSONRPC != "2.0" {
		t.Fatalf("body is not a JSON-RPC error with a null id: %s", body)
	}
	return r.Error
}

// wantRefusal checks a refusal: status, error code, message substrings, and
// exactly one new audit line with that code.
func (e *testEdge) wantRefusal(t *testing.T, auditsBefore int, status int, hdr http.Header, body []byte, wantStatus, wantCode int, msgHas ...string) *protocol.Error {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("status = %d, want %d; body %s", status, wantStatus, body)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	perr := rpcError(t, body)
	if perr.Code != wantCode {
		t.Errorf("code = %d, want %d (%s)", perr.Code, wantCode, perr.Message)
	}
	for _, s := range msgHas {
		if !strings.Contains(perr.Message, s) {
			t.Errorf("message %q does not contain %q", perr.Message, s)
		}
	}
	lines := e.b.auditLines()[auditsBefore:]
	if len(lines) != 1 || lines[0].code != wantCode {
		t.Errorf("audit lines for the refusal = %+v, want exactly one with code %d", lines, wantCode)
	}
	return perr
}

// set changes the backend's behaviour under its lock.
func (f *fakeBackend) set(fn func(f *fakeBackend)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeBackend) callerList() []protocol.Caller {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]protocol.Caller(nil), f.callers...)
}

func (f *fakeBackend) forwardList() []forwardCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]forwardCall(nil), f.forwarded...)
}

func newTextLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
