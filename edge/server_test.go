package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

func TestHealth(t *testing.T) {
	e := startEdge(t, Config{LLMMode: true})
	for _, path := range []string{"/mcpv2/health", "/health"} {
		status, hdr, body := e.do(t, http.MethodGet, path, nil, nil)
		if status != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: status %d, type %q", path, status, hdr.Get("Content-Type"))
		}
		var h HealthStatus
		if err := json.Unmarshal(body, &h); err != nil {
			t.Fatal(err)
		}
		if h.Status != "ok" || h.PeerID != testPeerID || h.Version != "0.0.0-test" || !h.LLMMode || !h.Flags["llm_mode"] ||
			h.ProtocolVersion != protocol.Version || h.PeerAddress != e.s.PeerAddress() {
			t.Errorf("%s: %+v", path, h)
		}
	}
	if n := len(e.b.auditLines()); n != 2 {
		t.Errorf("audit lines = %d, want 2", n)
	}
}

func TestSessionIssueAndReuse(t *testing.T) {
	e := startEdge(t, Config{SessionTTL: 30 * time.Minute})
	status, _, body := e.do(t, http.MethodGet, "/mcpv2/session", nil, nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var sa map[string]any
	if err := json.Unmarshal(body, &sa); err != nil {
		t.Fatal(err)
	}
	tok, _ := sa["sessionId"].(string)
	if tok == "" || sa["ttl"] != float64(1800) || sa["expires_at"] != float64(e.clk.Now().Add(30*time.Minute).Unix()) {
		t.Fatalf("session answer %s", body)
	}
	// The token is bound to the caller's IP and signed with the key derived
	// from the secret, never with the secret itself: it is anonymous.
	if _, err := protocol.VerifyToken(anonymousKey(testSecret), tok, "127.0.0.1", e.clk.Now(), time.Minute); err != nil {
		t.Fatalf("issued token does not verify: %v", err)
	}
	if _, err := protocol.VerifyToken(testSecret, tok, "127.0.0.1", e.clk.Now(), time.Minute); err == nil {
		t.Fatal("an issued session verifies with the secret: it would pass for a secret holder's")
	}
	// Reuse: many calls with one session, by header and by query.
	for i := range 3 {
		st, _, b := e.do(t, http.MethodPost, "/mcpv2", []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ping"}}`, i)),
			map[string]string{SessionHeader: tok})
		if st != http.StatusOK || !strings.Contains(string(b), `"pong":true`) {
			t.Fatalf("call %d: %d %s", i, st, b)
		}
		st, _, b = e.do(t, http.MethodPost, "/mcpv2?sessionId="+url.QueryEscape(tok), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), nil)
		if st != http.StatusOK || !strings.Contains(string(b), `"tools"`) {
			t.Fatalf("call %d by query: %d %s", i, st, b)
		}
	}
	// The caller reached Handle as ip:127.0.0.1, via http, anonymous.
	c := e.b.callerList()[0]
	if c.ID != "ip:127.0.0.1" || c.Via != "http" || c.Kind != protocol.CallerAnonymous || !strings.HasPrefix(c.Remote, "127.0.0.1:") {
		t.Errorf("caller = %+v", c)
	}
}

func TestAgentCard(t *testing.T) {
	e := startEdge(t, Config{})
	status, _, body := e.do(t, http.MethodGet, "/mcpv2/agent-card", nil, nil)
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	var c protocol.AgentCard
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	if c.PeerID != testPeerID || c.Name != "test-agent" || c.Endpoints.HTTP != e.s.PeerAddress() || len(c.Skills) != 1 {
		t.Errorf("card = %+v", c)
	}
}

func TestRPC(t *testing.T) {
	e := startEdge(t, Config{})
	tests := []struct {
		name       string
		body       string
		wantStatus int
		check      func(t *testing.T, body []byte)
	}{
		{"single", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"ping"}}`, 200, func(t *testing.T, b []byte) {
			var r protocol.Response
			if err := json.Unmarshal(b, &r); err != nil || string(r.ID) != `"a"` || r.Error != nil {
				t.Errorf("single: %s", b)
			}
		}},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping"}},
			{"jsonrpc":"2.0","method":"tools/call","params":{"name":"ping"}},
			{"jsonrpc":"2.0","id":2,"method":"nope"}]`, 200, func(t *testing.T, b []byte) {
			var rs []protocol.Response
			if err := json.Unmarshal(b, &rs); err != nil || len(rs) != 2 {
				t.Fatalf("batch: %s", b)
			}
			if string(rs[0].ID) != "1" || rs[0].Error != nil || string(rs[1].ID) != "2" || rs[1].Error.Code != protocol.CodeMethodNotFound {
				t.Errorf("batch: %s", b)
			}
		}},
		{"notification", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"ping"}}`, 204, nil},
		{"batch of notifications", `[{"jsonrpc":"2.0","method":"tools/list"},{"jsonrpc":"2.0","method":"tools/list"}]`, 204, nil},
		{"bad JSON", `{"jsonrpc":`, 400, func(t *testing.T, b []byte) {
			if rpcError(t, b).Code != protocol.CodeParseError {
				t.Errorf("%s", b)
			}
		}},
		{"empty body", ``, 400, func(t *testing.T, b []byte) {
			if rpcError(t, b).Code != protocol.CodeParseError {
				t.Errorf("%s", b)
			}
		}},
		{"empty batch", `[]`, 400, func(t *testing.T, b []byte) {
			if rpcError(t, b).Code != protocol.CodeInvalidRequest {
				t.Errorf("%s", b)
			}
		}},
		{"101 slots", "[" + strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"tools/list"},`, 100) + `{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, 400, func(t *testing.T, b []byte) {
			if e := rpcError(t, b); e.Code != protocol.CodeInvalidRequest || !strings.Contains(e.Message, "101") {
				t.Errorf("%s", b)
			}
		}},
		{"bad provider in a slot", `{"jsonrpc":"2.0","id":1,"method":"tools/list","context":{"provider":"llama"}}`, 200, func(t *testing.T, b []byte) {
			var r protocol.Response
			if err := json.Unmarshal(b, &r); err != nil || r.Error == nil || r.Error.Code != protocol.CodeUnsupportedProvider {
				t.Errorf("%s", b)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, body := e.post(t, "/mcpv2", tc.body)
			if status != tc.wantStatus {
				t.Fatalf("status = %d, want %d: %s", status, tc.wantStatus, body)
			}
			if status == 204 {
				if len(body) != 0 {
					t.Errorf("204 with a body: %q", body)
				}
				return
			}
			if hdr.Get("Content-Type") != "application/json" || !json.Valid(body) {
				t.Errorf("not JSON: %q %s", hdr.Get("Content-Type"), body)
			}
			tc.check(t, body)
		})
	}
}

func TestRPCRefusedByBackend(t *testing.T) {
	e := startEdge(t, Config{})
	e.b.set(func(f *fakeBackend) {
		f.refuse = &protocol.Error{Code: protocol.CodeRateLimited, Message: "rate limited: retry after 2500ms", Data: map[string]any{"retry_after_ms": int64(2500)}}
	})
	n := len(e.b.auditLines())
	status, hdr, body := e.post(t, "/mcpv2", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if status != http.StatusTooManyRequests || hdr.Get("Retry-After") != "3" || rpcError(t, body).Code != protocol.CodeRateLimited {
		t.Fatalf("status %d, Retry-After %q, body %s", status, hdr.Get("Retry-After"), body)
	}
	// Handle audits its own refusal; the edge adds nothing.
	if lines := e.b.auditLines()[n:]; len(lines) != 1 {
		t.Errorf("audit lines = %+v", lines)
	}
	// Any other whole-message refusal is 200 with the error inside.
	e.b.set(func(f *fakeBackend) { f.refuse = protocol.Errorf(protocol.CodeNotPermitted, "not permitted") })
	status, _, body = e.post(t, "/mcpv2", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if status != http.StatusOK || rpcError(t, body).Code != protocol.CodeNotPermitted {
		t.Fatalf("status %d, body %s", status, body)
	}
}

func TestSessionRefusals(t *testing.T) {
	e := startEdge(t, Config{})
	now := e.clk.Now()
	good := e.token
	parsed, _, err := protocol.ParseToken(good)
	if err != nil {
		t.Fatal(err)
	}
	tampered := func() string {
		t2 := parsed
		t2.TTL = 999999 // longer life, same MAC
		forged := protocol.EncodeToken([]byte("attacker"), t2)
		_, mac, _ := strings.Cut(good, ".")
		payload, _, _ := strings.Cut(forged, ".")
		return payload + "." + mac
	}()
	tests := []struct {
		name   string
		token  string
		reason string
		msg    string
	}{
		{"missing", "", "missing", "no session token"},
		{"malformed", "not-a-token", "malformed", "malformed"},
		{"tampered payload", tampered, "signature", "bad signature"},
		{"other secret", protocol.EncodeToken([]byte("other"), parsed), "signature", "another secret"},
		{"expired", protocol.EncodeToken(testSecret, protocol.Token{Subject: "127.0.0.1", Nonce: "n1", IssuedAt: now.Add(-2 * time.Hour).Unix(), TTL: 3600}), "expired", "expired at"},
		{"future", protocol.EncodeToken(testSecret, protocol.Token{Subject: "127.0.0.1", Nonce: "n2", IssuedAt: now.Add(time.Hour).Unix(), TTL: 3600}), "future", "in the future"},
		{"other IP", func() string { tok, _ := protocol.MintToken(testSecret, "10.9.9.9", now, time.Hour); return tok }(), "other_ip", "another IP address"},
	}
	for _, tc := range tests {
		for _, where := range []string{"header", "query"} {
			t.Run(tc.name+"/"+where, func(t *testing.T) {
				for _, path := range []string{"/mcpv2", "/mcpv2/ai/claude", "/mcpv2/find?skill=x", "/mcpv2/peers/" + testPeerID} {
					method := http.MethodPost
					if strings.HasPrefix(path, "/mcpv2/find") {
						method = http.MethodGet
					}
					hdr := map[string]string{}
					p := path
					if tc.token != "" {
						if where == "header" {
							hdr[SessionHeader] = tc.token
						} else {
							sep := "?"
							if strings.Contains(p, "?") {
								sep = "&"
							}
							p += sep + "sessionId=" + url.QueryEscape(tc.token)
						}
					}
					n := len(e.b.auditLines())
					status, h, body := e.do(t, method, p, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), hdr)
					perr := e.wantRefusal(t, n, status, h, body, http.StatusUnauthorized, protocol.CodeInvalidSession, tc.msg)
					if d, _ := perr.Data.(map[string]any); d["reason"] != tc.reason {
						t.Errorf("%s: data = %v, want reason %q", path, perr.Data, tc.reason)
					}
				}
			})
		}
	}
	// Nothing refused reached Handle.
	if n := len(e.b.callerList()); n != 0 {
		t.Errorf("Handle ran %d times for refused sessions", n)
	}
}

func TestSessionExpiresWithShortTTL(t *testing.T) {
	e := startEdge(t, Config{SessionTTL: 2 * time.Second})
	tok, _ := e.s.MintSession("127.0.0.1")
	call := func() (int, []byte) {
		st, _, b := e.do(t, http.MethodPost, "/mcpv2", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), map[string]string{SessionHeader: tok})
		return st, b
	}
	if st, b := call(); st != 200 {
		t.Fatalf("fresh: %d %s", st, b)
	}
	e.clk.Add(3 * time.Second)
	st, b := call()
	if st != 401 || !strings.Contains(rpcError(t, b).Message, "expired") {
		t.Fatalf("after the TTL: %d %s", st, b)
	}
}

func TestHeaderWinsOverQuery(t *testing.T) {
	e := startEdge(t, Config{})
	st, _, b := e.do(t, http.MethodPost, "/mcpv2?sessionId=garbage", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), map[string]string{SessionHeader: e.token})
	if st != 200 {
		t.Fatalf("valid header, bad query: %d %s", st, b)
	}
	st, _, b = e.do(t, http.MethodPost, "/mcpv2?sessionId="+url.QueryEscape(e.token), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), map[string]string{SessionHeader: "garbage"})
	if st != 401 {
		t.Fatalf("bad header, valid query: %d %s", st, b)
	}
}

func TestSessionRateLimit(t *testing.T) {
	e := startEdge(t, Config{RateLimit: 3})
	other, _ := e.s.MintSession("127.0.0.1")
	for i := range 3 {
		if st, _, b := e.post(t, "/mcpv2", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); st != 200 {
			t.Fatalf("request %d: %d %s", i, st, b)
		}
	}
	n := len(e.b.auditLines())
	st, hdr, body := e.post(t, "/mcpv2", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	perr := e.wantRefusal(t, n, st, hdr, body, http.StatusTooManyRequests, protocol.CodeRateLimited, "rate limited", "3 requests per second")
	if hdr.Get("Retry-After") != "1" {
		t.Errorf("Retry-After = %q, want 1", hdr.Get("Retry-After"))
	}
	if d, _ := perr.Data.(map[string]any); d["retry_after_ms"] == nil {
		t.Errorf("data = %v", perr.Data)
	}
	// Another session of the same IP has its own bucket.
	st, _, _ = e.do(t, http.MethodPost, "/mcpv2", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), map[string]string{SessionHeader: other})
	if st != 200 {
		t.Errorf("another session: %d", st)
	}
	// A second later the bucket has refilled.
	e.clk.Add(time.Second)
	if st, _, b := e.post(t, "/mcpv2", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); st != 200 {
		t.Fatalf("after a second: %d %s", st, b)
	}
}

func TestSessionIssueRateLimitPerIP(t *testing.T) {
	e := startEdge(t, Config{SessionRateLimit: 2})
	for i := range 2 {
		if st, _, b := e.do(t, http.MethodGet, "/mcpv2/session", nil, nil); st != 200 {
			t.Fatalf("issue %d: %d %s", i, st, b)
		}
	}
	n := len(e.b.auditLines())
	st, hdr, body := e.do(t, http.MethodGet, "/mcpv2/session", nil, nil)
	e.wantRefusal(t, n, st, hdr, body, http.StatusTooManyRequests, protocol.CodeRateLimited, "127.0.0.1", "2 sessions per second")
	if hdr.Get("Retry-After") != "1" {
		t.Errorf("Retry-After = %q", hdr.Get("Retry-After"))
	}
	e.clk.Add(500 * time.Millisecond)
	if st, _, _ := e.do(t, http.MethodGet, "/mcpv2/session", nil, nil); st != 200 {
		t.Errorf("after half a second: %d", st)
	}
}

func TestRateLimitOff(t *testing.T) {
	e := startEdge(t, Config{RateLimit: -1, SessionRateLimit: -1})
	for i := range 50 {
		if st, _, _ := e.do(t, http.MethodGet, "/mcpv2/session", nil, nil); st != 200 {
			t.Fatalf("issue %d: %d", i, st)
		}
	}
}

func TestBodyCap(t *testing.T) {
	e := startEdge(t, Config{MaxBody: 1024})
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping","arguments":{"payload":"` + strings.Repeat("x", 2048) + `"}}}`
	for _, path := range []string{"/mcpv2", "/mcpv2/ai/openai", "/mcpv2/peers/" + testPeerID} {
		n := len(e.b.auditLines())
		st, hdr, body := e.post(t, path, big)
		e.wantRefusal(t, n, st, hdr, body, http.StatusRequestEntityTooLarge, protocol.CodeInvalidRequest, "1024 bytes", "1 KiB")
	}
	// Without a Content-Length (chunked), the cap holds while reading.
	req, _ := http.NewRequest(http.MethodPost, e.base+"/mcpv2", struct{ *strings.Reader }{strings.NewReader(big)})
	req.Header.Set(SessionHeader, e.token)
	req.ContentLength = -1
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked: status %d", resp.StatusCode)
	}
	// At the cap exactly, the body passes.
	ok := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	ok += strings.Repeat(" ", 1024-len(ok))
	if st, _, b := e.post(t, "/mcpv2", ok); st != 200 {
		t.Errorf("at the cap: %d %s", st, b)
	}
}

func TestMethodsAndNotFound(t *testing.T) {
	e := startEdge(t, Config{})
	tests := []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodGet, "/mcpv2", 405, "POST"},
		{http.MethodPut, "/mcpv2", 405, "POST"},
		{http.MethodPost, "/mcpv2/session", 405, "GET, DELETE"},
		{http.MethodDelete, "/mcpv2/health", 405, "GET"},
		{http.MethodPost, "/health", 405, "GET"},
		{http.MethodPost, "/mcpv2/agent-card", 405, "GET"},
		{http.MethodGet, "/mcpv2/ai/claude", 405, "POST"},
		{http.MethodGet, "/mcpv2/peers/" + testPeerID, 405, "POST"},
		{http.MethodPost, "/mcpv2/find", 405, "GET"},
		{http.MethodGet, "/nope", 404, ""},
		{http.MethodPost, "/mcpv2/", 404, ""},
		{http.MethodPost, "/mcpv2/ai/", 404, ""},
	}
	for _, tc := range tests {
		n := len(e.b.auditLines())
		st, hdr, body := e.do(t, tc.method, tc.path, []byte("{}"), map[string]string{SessionHeader: e.token})
		code := protocol.CodeInvalidRequest
		if tc.status == 404 {
			code = protocol.CodeMethodNotFound
		}
		e.wantRefusal(t, n, st, hdr, body, tc.status, code)
		if hdr.Get("Allow") != tc.allow {
			t.Errorf("%s %s: Allow = %q, want %q", tc.method, tc.path, hdr.Get("Allow"), tc.allow)
		}
	}
}

func TestGateway(t *testing.T) {
	e := startEdge(t, Config{})
	msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping"}}`
	st, _, body := e.post(t, "/mcpv2/peers/"+testPeerID, msg)
	if st != 200 || !strings.Contains(string(body), `"forwarded_to":"`+testPeerID+`"`) {
		t.Fatalf("forward: %d %s", st, body)
	}
	if f := e.b.forwardList(); len(f) != 1 || f[0].peer != testPeerID || f[0].msg != msg {
		t.Errorf("forwarded = %+v", f)
	}
	// A notification: no answer.
	if st, _, b := e.post(t, "/mcpv2/peers/"+testPeerID, `{"jsonrpc":"2.0","method":"tools/list"}`); st != 204 {
		t.Errorf("notification: %d %s", st, b)
	}
	// Not a PeerID, and not a message: refused before forwarding.
	n := len(e.b.auditLines())
	st, hdr, body := e.post(t, "/mcpv2/peers/not-a-peer", msg)
	e.wantRefusal(t, n, st, hdr, body, 400, protocol.CodeInvalidParams, "not a PeerID")
	n = len(e.b.auditLines())
	st, hdr, body = e.post(t, "/mcpv2/peers/"+testPeerID, `{"jsonrpc":`)
	e.wantRefusal(t, n, st, hdr, body, 400, protocol.CodeParseError)
	if n := len(e.b.forwardList()); n != 2 {
		t.Errorf("forwarded %d messages, want 2", n)
	}
	// The peer cannot be reached: whatever the dial found, the caller gets
	// the same body, without it (issue 18: no port scan through the
	// gateway).
	var unreachable []byte
	for i, cause := range []error{
		errors.New("failed to dial: no addresses"),
		errors.New("failed to dial 12D3KooW…: all dials failed\n  * [/ip4/127.0.0.1/tcp/4242] dial tcp4 127.0.0.1:4242: connect: connection refused"),
		errors.New("failed to negotiate security protocol: read tcp4 127.0.0.1:4001->127.0.0.1:4243: EOF"),
	} {
		e.b.set(func(f *fakeBackend) { f.forwardErr = cause })
		n = len(e.b.auditLines())
		st, hdr, body = e.post(t, "/mcpv2/peers/"+testPeerID, msg)
		perr := e.wantRefusal(t, n, st, hdr, body, 502, protocol.CodeToolExecution, "could not reach peer "+testPeerID)
		if d, _ := json.Marshal(perr.Data); string(d) != `{"reason":"unreachable"}` {
			t.Errorf("data = %s, want the reason unreachable", d)
		}
		for _, leak := range []string{"dial", "refused", "4242", "4243", "EOF", "addresses", "negotiate"} {
			if bytes.Contains(body, []byte(leak)) {
				t.Errorf("%q of the dial error reached the caller: %s", leak, body)
			}
		}
		if i == 0 {
			unreachable = body
		} else if !bytes.Equal(body, unreachable) {
			t.Errorf("unreachable peers answered differently:\n%s\n%s", unreachable, body)
		}
	}
	// A peer reached that did not answer says so, without the cause.
	e.b.set(func(f *fakeBackend) { f.forwardErr = noAnswer{errors.New("stream reset")} })
	n = len(e.b.auditLines())
	st, hdr, body = e.post(t, "/mcpv2/peers/"+testPeerID, msg)
	if perr := e.wantRefusal(t, n, st, hdr, body, 502, protocol.CodeToolExecution, "could not reach peer "+testPeerID); fmt.Sprint(perr.Data) != "map[reason:no_answer]" || bytes.Contains(body, []byte("reset")) {
		t.Errorf("no answer: %s", body)
	}
	// A protocol error from the node passes through.
	e.b.set(func(f *fakeBackend) {
		f.forwardErr = fmt.Errorf("node: %w", protocol.Errorf(protocol.CodeNotPermitted, "not permitted"))
	})
	n = len(e.b.auditLines())
	st, hdr, body = e.post(t, "/mcpv2/peers/"+testPeerID, msg)
	e.wantRefusal(t, n, st, hdr, body, 403, protocol.CodeNotPermitted)
}

func TestFind(t *testing.T) {
	e := startEdge(t, Config{FindRateLimit: -1})
	get := func(q string) (int, http.Header, []byte) {
		return e.do(t, http.MethodGet, "/mcpv2/find"+q, nil, map[string]string{SessionHeader: e.token})
	}
	st, _, body := get("?skill=ping&limit=5")
	var fa FindAnswer
	if st != 200 || json.Unmarshal(body, &fa) != nil || fa.Query != "ping" || fa.By != "skill" || len(fa.Results) != 1 || fa.Results[0].Card.PeerID != testPeerID {
		t.Fatalf("find: %d %s", st, body)
	}
	st, _, body = get("?tag=core")
	if st != 200 || json.Unmarshal(body, &fa) != nil || fa.By != "tag" {
		t.Fatalf("find by tag: %d %s", st, body)
	}
	for _, q := range []string{"", "?skill=a&tag=b", "?skill=a&limit=0", "?skill=a&limit=x", "?skill=a&limit=101"} {
		n := len(e.b.auditLines())
		st, hdr, body := get(q)
		e.wantRefusal(t, n, st, hdr, body, 400, protocol.CodeInvalidParams)
	}
	e.b.set(func(f *fakeBackend) { f.findErr = fmt.Errorf("node: find: %w", ErrFindUnavailable) })
	n := len(e.b.auditLines())
	st, hdr, body := get("?skill=ping")
	e.wantRefusal(t, n, st, hdr, body, http.StatusNotImplemented, protocol.CodeMethodNotFound, "discovery is not enabled")
	e.b.set(func(f *fakeBackend) { f.findErr = errors.New("dht: no peers") })
	n = len(e.b.auditLines())
	st, hdr, body = get("?skill=ping")
	e.wantRefusal(t, n, st, hdr, body, http.StatusBadGateway, protocol.CodeInternal, "no peers")
}

func TestCloseIsIdempotentAndGraceful(t *testing.T) {
	b := &fakeBackend{handleDelay: 300 * time.Millisecond, entered: make(chan struct{}, 1)}
	s, err := New(b, Config{BindHost: "127.0.0.1", Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err == nil {
		t.Error("a second Start succeeded")
	}
	tok, _ := s.MintSession("127.0.0.1")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.Addr().String()+"/mcpv2", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set(SessionHeader, tok)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-b.entered // the request is in flight
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if st := <-done; st != 200 {
		t.Errorf("the request in flight got %d, want 200 (graceful shutdown)", st)
	}
	if err := s.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close = %v, want net.ErrClosed", err)
	}
	if err := s.Serve(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve after Close = %v", err)
	}
	if _, err := net.Dial("tcp", s.Addr().String()); err == nil {
		t.Error("the port still accepts connections after Close")
	}
}

func TestServeBlocksUntilClose(t *testing.T) {
	s, err := New(&fakeBackend{}, Config{BindHost: "127.0.0.1", Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Serve() }()
	c := newClient(t)
	defer c.Close()
	addr, _ := protocol.ParseAddress(s.PeerAddress())
	if _, err := c.Health(t.Context(), addr); err != nil {
		t.Fatalf("health while serving: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Errorf("Serve returned %v after Close, want nil", err)
	}
}

func TestCloseWithoutServe(t *testing.T) {
	s, err := New(&fakeBackend{}, Config{BindHost: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Start after Close = %v", err)
	}
}

func TestRandomSecretWhenNoneGiven(t *testing.T) {
	var logs strings.Builder
	s, err := New(&fakeBackend{}, Config{BindHost: "127.0.0.1", Logger: newTextLogger(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.secret) != 32 {
		t.Errorf("secret of %d bytes", len(s.secret))
	}
	if !strings.Contains(logs.String(), "generated a random one") {
		t.Errorf("no log line about the random secret: %s", logs.String())
	}
}

func TestLimiterSetSweeps(t *testing.T) {
	ls := newLimiterSet(10)
	now := time.Unix(1000, 0)
	for i := range sweepEvery - 1 {
		ls.allow(fmt.Sprint("k", i), now)
	}
	if ls.size() != sweepEvery-1 {
		t.Fatalf("size %d", ls.size())
	}
	// After a second every bucket is full again; the next insert sweeps.
	ls.allow("last", now.Add(2*time.Second))
	if ls.size() != 1 {
		t.Errorf("after the sweep: size %d, want 1", ls.size())
	}
	if got := retryAfterSeconds(1100 * time.Millisecond); got != 2 {
		t.Errorf("retryAfterSeconds(1.1s) = %d", got)
	}
	if got := retryAfterSeconds(time.Millisecond); got != 1 {
		t.Errorf("retryAfterSeconds(1ms) = %d", got)
	}
}

func TestClientIP(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:5000":          "127.0.0.1",
		"[::ffff:127.0.0.1]:5000": "127.0.0.1",
		"[::1]:80":                "::1",
		"[fe80::1%eth0]:80":       "fe80::1%eth0",
		"10.0.0.1":                "10.0.0.1",
		"":                        "unknown",
	} {
		if got := clientIP(in); got != want {
			t.Errorf("clientIP(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestForwardedForIsNotTrusted(t *testing.T) {
	e := startEdge(t, Config{})
	// A session minted for 10.9.9.9 does not become valid by claiming that
	// address in a forwarding header.
	other, _ := e.s.MintSession("10.9.9.9")
	for _, h := range []string{"X-Forwarded-For", "X-Real-IP", "Forwarded"} {
		v := "10.9.9.9"
		if h == "Forwarded" {
			v = "for=10.9.9.9"
		}
		st, _, body := e.do(t, http.MethodPost, "/mcpv2", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`),
			map[string]string{SessionHeader: other, h: v})
		if st != http.StatusUnauthorized || !strings.Contains(rpcError(t, body).Message, "127.0.0.1") {
			t.Errorf("%s: %d %s", h, st, body)
		}
	}
	// A session issued to a caller claiming another address is for its real one.
	st, _, body := e.do(t, http.MethodGet, "/mcpv2/session", nil, map[string]string{"X-Forwarded-For": "10.9.9.9"})
	var sa sessionAnswer
	if st != 200 || json.Unmarshal(body, &sa) != nil {
		t.Fatalf("%d %s", st, body)
	}
	if tok, _, err := protocol.ParseToken(sa.SessionID); err != nil || tok.Subject != "127.0.0.1" {
		t.Errorf("issued for %q, %v", tok.Subject, err)
	}
}

func TestFaceMountedOnMux(t *testing.T) {
	b := &fakeBackend{}
	s, err := New(b, Config{BindHost: "127.0.0.1", Secret: testSecret, MaxBody: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got protocol.Caller
	var gotBody string
	s.Mux().Handle("/face", s.Authenticated(http.MethodPost, func(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
		body, ok := s.ReadBody(w, r)
		if !ok {
			return
		}
		got, gotBody = c, string(body)
		w.WriteHeader(http.StatusNoContent)
	}))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	tok, _ := s.MintSession("127.0.0.1")
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	post := func(body string, token string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.Addr().String()+"/face", strings.NewReader(body))
		if token != "" {
			req.Header.Set(SessionHeader, token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post("hello", ""); st != 401 {
		t.Errorf("no session: %d", st)
	}
	if st := post("hello", tok); st != 204 || gotBody != "hello" || got.Kind != protocol.CallerSecretHolder || got.ID != "ip:127.0.0.1" {
		t.Errorf("with a session: %d %q %+v", st, gotBody, got)
	}
	if st := post(strings.Repeat("x", 33), tok); st != 413 {
		t.Errorf("over the cap: %d", st)
	}
	lines := b.auditLines()
	if len(lines) != 2 || lines[0].code != protocol.CodeInvalidSession || lines[1].code != protocol.CodeInvalidRequest || lines[1].caller.Kind != protocol.CallerSecretHolder {
		t.Errorf("audit lines %+v", lines)
	}
}

func TestErrorStatus(t *testing.T) {
	for code, want := range map[int]int{
		protocol.CodeParseError: 400, protocol.CodeInvalidRequest: 400, protocol.CodeInvalidParams: 400,
		protocol.CodeUnsupportedProvider: 400, protocol.CodeVersionMismatch: 400, protocol.CodeInvalidSession: 401,
		protocol.CodePaymentFailed: 402, protocol.CodeNotPermitted: 403, protocol.CodeMethodNotFound: 404,
		protocol.CodeSkillNotFound: 404, protocol.CodeFileNotFound: 404, protocol.CodeRateLimited: 429,
		protocol.CodeInternal: 500, protocol.CodeSkillExecution: 502, protocol.CodeToolExecution: 502, -1: 500,
	} {
		if got := ErrorStatus(&protocol.Error{Code: code}); got != want {
			t.Errorf("ErrorStatus(%d) = %d, want %d", code, got, want)
		}
	}
	for _, tc := range []struct {
		data any
		want time.Duration
	}{
		{nil, time.Second},
		{map[string]any{"retry_after_ms": float64(2500)}, 2500 * time.Millisecond},
		{map[string]any{"retry_after_ms": json.Number("40")}, 40 * time.Millisecond},
		{map[string]int64{"retry_after_ms": 7}, 7 * time.Millisecond},
		{map[string]any{"retry_after_ms": "soon"}, time.Second},
		{map[string]any{"retry_after_ms": float64(-5)}, time.Second},
	} {
		if got := retryAfter(&protocol.Error{Code: protocol.CodeRateLimited, Data: tc.data}); got != tc.want {
			t.Errorf("retryAfter(%v) = %v, want %v", tc.data, got, tc.want)
		}
	}
}

// noAnswer is a Forward error with a reason, as the node's PeerError.
type noAnswer struct{ error }

func (noAnswer) PeerReason() string { return ReasonNoAnswer }
