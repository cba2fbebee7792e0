package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/protocol"
)

// The HTTP edge end to end (issue acceptance 1, 3 and 4): real `mcpv2 node`
// processes, driven by plain net/http (the view of an HTTP-only peer of the
// original Python seed) and by curl.
//
// runEdgeScenarios holds every scenario of the seed's suite; TestEdgeE2E runs
// it three times on loopback (A on 127.0.0.1, B on 127.0.0.2) and
// TestNetnsEdgeE2E (netns_test.go) runs it between two network namespaces.

// edgeRounds is how many times in a row the scenario list runs.
const edgeRounds = 3

// edgeSecret is the --secret shared by the nodes of these tests.
const edgeSecret = "e2e-shared-secret"

// Settings of the two peers that runEdgeScenarios relies on.
const (
	// edgeAMaxMessage lets A take a 16 MiB file as base64 (about 22 MiB).
	edgeAMaxMessage = 32 << 20
	// edgeBTTL is B's --session-ttl: short, so that a real token expires
	// within a round.
	edgeBTTL = 3 * time.Second
	// edgeBRate is B's --rate-limit, low enough for a burst to meet it.
	edgeBRate = 20
)

// edgeProc is a running `mcpv2 node` (testenv.Proc) with a name for the
// logs.
type edgeProc struct {
	*testenv.Proc
	name string
}

func (p *edgeProc) first(key string) string { return p.First(key) }

func (p *edgeProc) stderr() string { return p.Log.String() }

// tcpAddr returns the node's first TCP multiaddr.
func (p *edgeProc) tcpAddr(t *testing.T) string {
	t.Helper()
	for _, a := range p.Banner["MCPV2_P2P_ADDRESS"] {
		if strings.Contains(a, "/tcp/") {
			return a
		}
	}
	t.Fatalf("%s: no tcp address in its banner %v", p.name, p.Banner)
	return ""
}

// startEdgeProc runs prefix + `mcpv2 node args…` (prefix is e.g. `ip netns
// exec NS`, which execs the node in place) with testenv.StartProc, which
// waits for the banner's last line and stops the process when the test
// ends; if the test failed, the tail of its stderr is logged.
func startEdgeProc(t *testing.T, name string, prefix []string, args ...string) *edgeProc {
	t.Helper()
	argv := append(append(append([]string{}, prefix...), binPath, "node"), args...)
	start := time.Now()
	p := &edgeProc{Proc: testenv.StartProc(t, argv...), name: name}
	t.Logf("%s up in %v: peer %s, edge %s", name, time.Since(start).Round(time.Millisecond), p.first("MCPV2_PEER_ID"), p.first("MCPV2_PEER_ADDRESS"))
	return p
}

func edgeLastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// edgeFreePort returns a TCP port that is free on ip right now. It is taken
// below the kernel's ephemeral range (32768 and up on Linux), so that the
// node's own listeners on port 0 and outgoing connections cannot be given it
// between this check and the node's bind.
func edgeFreePort(t *testing.T, ip string) int {
	t.Helper()
	for range 200 {
		port := 20000 + mrand.IntN(12000)
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			continue
		}
		ln.Close()
		if ip != "0.0.0.0" {
			// Also free on every interface, where the binding tests look too.
			if ln, err := net.Listen("tcp", net.JoinHostPort("0.0.0.0", strconv.Itoa(port))); err == nil {
				ln.Close()
			} else {
				continue
			}
		}
		return port
	}
	t.Fatal("no free TCP port between 20000 and 32000")
	return 0
}

// edgePeer is a node with an HTTP edge, as the scenarios see it.
type edgePeer struct {
	name   string
	proc   *edgeProc
	peerID string
	ip     string // the edge's address
	port   int
	base   string // http://ip:port

	llmMode    bool
	greet      bool          // serves the custom skill "greet"
	ttl        time.Duration // --session-ttl
	rateLimit  int           // --rate-limit
	maxMessage int           // --max-message

	// client is the test's client. altClient reaches the edge from another
	// source address (altIP), so that the edge sees another caller.
	// localClient runs on the edge's own host (its network namespace), for
	// the banner's demo session address.
	client, altClient, localClient *http.Client
	altIP                          string
}

// newEdgePeer reads p's banner into an edgePeer.
func newEdgePeer(t *testing.T, name string, p *edgeProc) edgePeer {
	t.Helper()
	pa, err := protocol.ParseAddress(p.first("MCPV2_PEER_ADDRESS"))
	if err != nil || pa.Kind != protocol.AddrHTTP {
		t.Fatalf("%s: MCPV2_PEER_ADDRESS %q: %v", name, p.first("MCPV2_PEER_ADDRESS"), err)
	}
	port, err := strconv.Atoi(p.first("MCPV2_BOUND_PORT"))
	if err != nil || port != pa.Port {
		t.Fatalf("%s: MCPV2_BOUND_PORT %q does not match MCPV2_PEER_ADDRESS %q", name, p.first("MCPV2_BOUND_PORT"), p.first("MCPV2_PEER_ADDRESS"))
	}
	return edgePeer{name: name, proc: p, peerID: p.first("MCPV2_PEER_ID"), ip: pa.Host, port: port,
		base: "http://" + net.JoinHostPort(pa.Host, strconv.Itoa(port))}
}

// edgeHTTPClient returns a client whose connections are made by dial (nil:
// the default dialer) from the source address local ("" for any). Its idle
// connections are closed when the test ends.
func edgeHTTPClient(t *testing.T, local string, dial func(ctx context.Context, network, addr, local string) (net.Conn, error)) *http.Client {
	if dial == nil {
		dial = func(ctx context.Context, network, addr, local string) (net.Conn, error) {
			d := net.Dialer{Timeout: 10 * time.Second}
			if local != "" {
				d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
			}
			return d.DialContext(ctx, network, addr)
		}
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dial(ctx, network, addr, local)
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// --- HTTP and JSON-RPC helpers

type edgeRPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

type edgeRPCResp struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *edgeRPCError   `json:"error"`
}

type edgeAnswer struct {
	status int
	header http.Header
	body   []byte
	local  string // the client's source IP on this request's connection
}

func (a edgeAnswer) String() string {
	b := a.body
	if len(b) > 600 {
		b = append(b[:600:600], "…"...)
	}
	return fmt.Sprintf("HTTP %d %s", a.status, b)
}

// do sends one request. body is nil, []byte, or a value marshalled to JSON.
func edgeDo(t *testing.T, c *http.Client, method, u string, hdr map[string]string, body any) edgeAnswer {
	t.Helper()
	ans, err := edgeTryDo(c, method, u, hdr, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	return ans
}

func edgeTryDo(c *http.Client, method, u string, hdr map[string]string, body any) (edgeAnswer, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return edgeAnswer{}, err
		}
		rd = bytes.NewReader(raw)
	}
	var ans edgeAnswer
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(ci httptrace.GotConnInfo) {
			if a, ok := ci.Conn.LocalAddr().(*net.TCPAddr); ok {
				ans.local = a.IP.String()
			}
		},
	})
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return edgeAnswer{}, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return edgeAnswer{}, err
	}
	defer resp.Body.Close()
	ans.status, ans.header = resp.StatusCode, resp.Header
	ans.body, err = io.ReadAll(resp.Body)
	return ans, err
}

type edgeSession struct {
	SessionID string `json:"sessionId"`
	ExpiresAt int64  `json:"expires_at"`
	TTL       int64  `json:"ttl"`
	local     string // the source IP the session was fetched from
}

// session returns a secret holder's session for client c, as the seed's
// client minted it (SPEC §6): the anonymous session p's edge issues tells the
// address the edge sees c from, its TTL and expiry, and the same token is
// then signed with the edge's --secret.
func (p edgePeer) session(t *testing.T, c *http.Client) edgeSession {
	t.Helper()
	s := p.anonSession(t, c)
	tk := edgeToken(t, s.SessionID)
	s.SessionID = protocol.EncodeToken([]byte(edgeSecret), tk)
	return s
}

// anonSession gets an anonymous session from p's edge with client c: what
// anyone who can reach the edge gets.
func (p edgePeer) anonSession(t *testing.T, c *http.Client) edgeSession {
	t.Helper()
	ans := edgeDo(t, c, http.MethodGet, p.base+"/mcpv2/session", nil, nil)
	if ans.status != http.StatusOK {
		t.Fatalf("%s: GET /mcpv2/session: %s", p.name, ans)
	}
	var s edgeSession
	if err := json.Unmarshal(ans.body, &s); err != nil || s.SessionID == "" {
		t.Fatalf("%s: session answer %s: %v", p.name, ans.body, err)
	}
	s.local = ans.local
	return s
}

// post sends body to path on p's edge with session tok (in the header; ""
// for none) from client c.
func (p edgePeer) post(t *testing.T, c *http.Client, path, tok string, body any) edgeAnswer {
	t.Helper()
	var hdr map[string]string
	if tok != "" {
		hdr = map[string]string{"X-MCPV2-Session": tok}
	}
	return edgeDo(t, c, http.MethodPost, p.base+path, hdr, body)
}

func edgeSlot(id any, name string, args any) map[string]any {
	s := map[string]any{"jsonrpc": "2.0", "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}}
	if id != nil {
		s["id"] = id
	}
	return s
}

// call runs one tools/call on p with tok and returns its result or error;
// the HTTP status must be 200 and the id echoed.
func (p edgePeer) call(t *testing.T, tok, name string, args any) (json.RawMessage, *edgeRPCError) {
	t.Helper()
	return p.callVia(t, p.client, "/mcpv2", tok, name, args)
}

func (p edgePeer) callVia(t *testing.T, c *http.Client, path, tok, name string, args any) (json.RawMessage, *edgeRPCError) {
	t.Helper()
	ans := p.post(t, c, path, tok, edgeSlot(42, name, args))
	if ans.status != http.StatusOK {
		t.Fatalf("%s: %s %s: %s", p.name, path, name, ans)
	}
	var r edgeRPCResp
	if err := json.Unmarshal(ans.body, &r); err != nil {
		t.Fatalf("%s: %s: answer is not one response object: %v: %s", p.name, name, err, ans.body)
	}
	if r.JSONRPC != "2.0" || string(r.ID) != "42" {
		t.Fatalf("%s: %s: jsonrpc %q id %s, want 2.0 and 42: %s", p.name, name, r.JSONRPC, r.ID, ans.body)
	}
	if (r.Error == nil) == (r.Result == nil) {
		t.Fatalf("%s: %s: want exactly one of result and error: %s", p.name, name, ans.body)
	}
	return r.Result, r.Error
}

// mustCall is call that must succeed; the result is decoded into out.
func (p edgePeer) mustCall(t *testing.T, tok, name string, args, out any) {
	t.Helper()
	res, perr := p.call(t, tok, name, args)
	if perr != nil {
		t.Fatalf("%s: %s(%v): error %d %s", p.name, name, args, perr.Code, perr.Message)
	}
	if err := json.Unmarshal(res, out); err != nil {
		t.Fatalf("%s: %s result %s: %v", p.name, name, res, err)
	}
}

// wantCallError is call that must fail with code.
func (p edgePeer) wantCallError(t *testing.T, tok, name string, args any, code int) *edgeRPCError {
	t.Helper()
	res, perr := p.call(t, tok, name, args)
	if perr == nil || perr.Code != code {
		t.Fatalf("%s: %s(%v): want error %d, got result %s error %+v", p.name, name, args, code, res, perr)
	}
	return perr
}

// edgeWantRefused checks a whole-request refusal: status, one JSON-RPC error
// response with a null id and code, and data.reason when reason != "".
func edgeWantRefused(t *testing.T, what string, ans edgeAnswer, status, code int, reason string) edgeRPCError {
	t.Helper()
	if ans.status != status {
		t.Fatalf("%s: want HTTP %d, got %s", what, status, ans)
	}
	var r edgeRPCResp
	if err := json.Unmarshal(ans.body, &r); err != nil || r.Error == nil {
		t.Fatalf("%s: want a JSON-RPC error body, got %s (%v)", what, ans.body, err)
	}
	if r.Error.Code != code || string(r.ID) != "null" || r.Result != nil {
		t.Fatalf("%s: want code %d with id null, got %s", what, code, ans.body)
	}
	if reason != "" {
		var d struct {
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal(r.Error.Data, &d); err != nil || d.Reason != reason {
			t.Fatalf("%s: want data.reason %q, got %s", what, reason, ans.body)
		}
	}
	return *r.Error
}

// edgeJSONEqual compares two JSON documents as values.
func edgeJSONEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func edgeRandTag() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// edgeToken decodes the payload of a session token.
func edgeToken(t *testing.T, tok string) protocol.Token {
	t.Helper()
	pt, _, err := protocol.ParseToken(tok)
	if err != nil {
		t.Fatalf("session token %q: %v", tok, err)
	}
	return pt
}

// edgeWaitGateway waits until the edge at base forwards a ping to the mesh peer
// peerID, and says how long that took. A node prints its banner before it
// has dialled its --bootstrap peers; until then it has no address for them,
// and the gateway answers 502.
func edgeWaitGateway(t *testing.T, c *http.Client, base, tok, peerID string) {
	t.Helper()
	start := time.Now()
	var last edgeAnswer
	for tries := 1; ; tries++ {
		ans, err := edgeTryDo(c, http.MethodPost, base+"/mcpv2/peers/"+peerID, map[string]string{"X-MCPV2-Session": tok}, edgeSlot(1, "ping", nil))
		if err == nil && ans.status == http.StatusOK && bytes.Contains(ans.body, []byte(peerID)) {
			if tries > 1 {
				t.Logf("the gateway reached %s after %v (%d tries; first answer: %s)", peerID, time.Since(start).Round(time.Millisecond), tries, last)
			}
			return
		}
		if tries == 1 {
			last = ans
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("the gateway at %s does not reach %s after 15s: %v %s", base, peerID, err, ans)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// --- the scenarios

// runEdgeScenarios runs the seed suite's scenarios against two peers:
//
//   - a: stateless ask, --max-message >= 32 MiB, default rate limit, long
//     session TTL; it has b as a mesh bootstrap peer (for the gateway);
//   - b: --llm-mode with the custom skill "greet", a session TTL of a few
//     seconds and a low --rate-limit;
//
// both with the secret edgeSecret. It may run several times on the same
// processes: names it creates are unique per run.
func runEdgeScenarios(t *testing.T, a, b edgePeer) {
	if a.llmMode || a.maxMessage < edgeAMaxMessage || !b.llmMode || !b.greet || b.ttl > 10*time.Second || b.rateLimit > 50 {
		t.Fatalf("runEdgeScenarios needs a stateless A with a large --max-message and an LLM-mode B with greet, a short TTL and a low rate limit; got A %+v, B %+v", a, b)
	}
	both := []edgePeer{a, b}
	tag := edgeRandTag()
	secret := []byte(edgeSecret)
	began := time.Now()

	// A real session of B, to be presented again once its short TTL is over.
	expiring := b.session(t, b.client)
	if ans := b.post(t, b.client, "/mcpv2", expiring.SessionID, edgeSlot(1, "ping", nil)); ans.status != http.StatusOK {
		t.Fatalf("fresh B session refused: %s", ans)
	}

	t.Run("health", func(t *testing.T) {
		for _, p := range both {
			for _, path := range []string{"/mcpv2/health", "/health"} {
				ans := edgeDo(t, p.client, http.MethodGet, p.base+path, nil, nil)
				var h struct {
					Status          string          `json:"status"`
					Version         string          `json:"version"`
					PeerID          string          `json:"peer_id"`
					ProtocolVersion string          `json:"protocol_version"`
					LLMMode         bool            `json:"llm_mode"`
					Flags           map[string]bool `json:"flags"`
					UptimeS         *int64          `json:"uptime_s"`
					PeerAddress     string          `json:"peer_address"`
				}
				if ans.status != http.StatusOK || ans.header.Get("Content-Type") != "application/json" || json.Unmarshal(ans.body, &h) != nil {
					t.Fatalf("%s %s: %s (%s)", p.name, path, ans, ans.header.Get("Content-Type"))
				}
				if h.Status != "ok" || h.PeerID != p.peerID || h.ProtocolVersion != protocol.Version || h.Version == "" || h.UptimeS == nil ||
					h.LLMMode != p.llmMode || h.Flags["llm_mode"] != p.llmMode || h.PeerAddress != p.proc.first("MCPV2_PEER_ADDRESS") {
					t.Fatalf("%s %s: %s", p.name, path, ans.body)
				}
			}
			// Health is open, and a wrong method is 405 with Allow.
			ans := edgeDo(t, p.client, http.MethodPost, p.base+"/mcpv2/health", nil, []byte("{}"))
			edgeWantRefused(t, p.name+" POST /mcpv2/health", ans, http.StatusMethodNotAllowed, -32600, "")
			if ans.header.Get("Allow") != http.MethodGet {
				t.Fatalf("%s: 405 without Allow: GET: %v", p.name, ans.header)
			}
		}
	})

	t.Run("agent-card", func(t *testing.T) {
		for _, p := range both {
			ans := edgeDo(t, p.client, http.MethodGet, p.base+"/mcpv2/agent-card", nil, nil)
			var card protocol.AgentCard
			if ans.status != http.StatusOK || json.Unmarshal(ans.body, &card) != nil {
				t.Fatalf("%s: agent card: %s", p.name, ans)
			}
			names := edgeSkillNames(card.Skills)
			want := len(edgeStandardSkills)
			if p.greet {
				want++
			}
			if card.PeerID != p.peerID || card.Endpoints.HTTP != p.proc.first("MCPV2_PEER_ADDRESS") ||
				card.Capabilities.LLMMode != p.llmMode || len(card.Skills) != want || slices.Contains(names, "greet") != p.greet ||
				!slices.Contains(card.ProtocolVersions, protocol.Version) {
				t.Fatalf("%s: agent card %s", p.name, ans.body)
			}
		}
	})

	t.Run("session-issue-and-reuse", func(t *testing.T) {
		for _, p := range both {
			s1, s2 := p.anonSession(t, p.client), p.anonSession(t, p.client)
			now := time.Now().Unix()
			wantTTL := int64(p.ttl / time.Second)
			if s1.SessionID == s2.SessionID || s1.TTL != wantTTL || s1.ExpiresAt < now+wantTTL-2 || s1.ExpiresAt > now+wantTTL+2 {
				t.Fatalf("%s: sessions %+v %+v, want distinct, ttl %d, expiring in about %ds", p.name, s1, s2, wantTTL, wantTTL)
			}
			// The token is the spec's: base64url(ip:nonce:issued_at:ttl).hex(hmac),
			// its subject the caller's IP as the edge sees it.
			tk := edgeToken(t, s1.SessionID)
			if tk.Subject != s1.local || tk.TTL != wantTTL || tk.IssuedAt+tk.TTL != s1.ExpiresAt {
				t.Fatalf("%s: token %+v for a caller at %s, answer %+v", p.name, tk, s1.local, s1)
			}
			// It is anonymous: signed with a key derived from the secret, so
			// that it cannot pass for a secret holder's token.
			if _, err := protocol.VerifyToken(secret, s1.SessionID, s1.local, time.Now(), time.Minute); err == nil {
				t.Fatalf("%s: an issued session verifies with the shared secret: anyone would be a secret holder", p.name)
			}
			// Reuse: one session, several requests, in the header and in the
			// query parameter.
			for i := range 3 {
				var pong struct {
					Pong bool `json:"pong"`
				}
				p.mustCall(t, s1.SessionID, "ping", map[string]any{"payload": i}, &pong)
				if !pong.Pong {
					t.Fatalf("%s: ping %d", p.name, i)
				}
			}
			ans := edgeDo(t, p.client, http.MethodPost, p.base+"/mcpv2?sessionId="+url.QueryEscape(s2.SessionID), nil,
				map[string]any{"jsonrpc": "2.0", "id": "q", "method": "tools/list"})
			if ans.status != http.StatusOK || !bytes.Contains(ans.body, []byte(`"tools"`)) {
				t.Fatalf("%s: sessionId query parameter: %s", p.name, ans)
			}
			// The other session still works after the first was used.
			p.mustCall(t, s2.SessionID, "ping", nil, &struct{}{})
		}
	})

	t.Run("tokens-refused", func(t *testing.T) {
		for _, p := range both {
			s := p.session(t, p.client)
			me := s.local
			slot := edgeSlot(1, "ping", nil)
			refused := func(what, tok, reason string) {
				t.Helper()
				edgeWantRefused(t, p.name+": "+what, p.post(t, p.client, "/mcpv2", tok, slot), http.StatusUnauthorized, -32001, reason)
			}
			refused("no token", "", "missing")
			refused("garbage", "not-a-token", "malformed")
			// Tampered: one MAC digit changed; the payload changed under the old MAC.
			mac := []byte(s.SessionID)
			last := len(mac) - 1
			if mac[last] == '0' {
				mac[last] = '1'
			} else {
				mac[last] = '0'
			}
			refused("tampered MAC", string(mac), "signature")
			b64, sig, _ := strings.Cut(s.SessionID, ".")
			payload, _ := base64.RawURLEncoding.DecodeString(b64)
			longer := string(payload[:bytes.LastIndexByte(payload, ':')]) + ":999999" // a longer TTL under the old MAC
			refused("tampered payload", base64.RawURLEncoding.EncodeToString([]byte(longer))+"."+sig, "signature")
			refused("another secret", protocol.EncodeToken([]byte("not-"+edgeSecret), protocol.Token{Subject: me, Nonce: "n1", IssuedAt: time.Now().Unix(), TTL: 3600}), "signature")
			// Expired: issued two hours ago for one hour.
			refused("expired", protocol.EncodeToken(secret, protocol.Token{Subject: me, Nonce: "n2", IssuedAt: time.Now().Add(-2 * time.Hour).Unix(), TTL: 3600}), "expired")
			// Future-dated beyond the 300 s clock skew; within it is accepted.
			refused("future", protocol.EncodeToken(secret, protocol.Token{Subject: me, Nonce: "n3", IssuedAt: time.Now().Add(time.Hour).Unix(), TTL: 3600}), "future")
			near := protocol.EncodeToken(secret, protocol.Token{Subject: me, Nonce: "n4" + tag, IssuedAt: time.Now().Add(time.Minute).Unix(), TTL: 3600})
			if ans := p.post(t, p.client, "/mcpv2", near, slot); ans.status != http.StatusOK {
				t.Fatalf("%s: a token issued 60 s ahead (within the skew) was refused: %s", p.name, ans)
			}
			// Other IP, forged with the right secret for an address that is not ours.
			refused("other IP (minted for 10.9.9.9)", protocol.EncodeToken(secret, protocol.Token{Subject: "10.9.9.9", Nonce: "n5", IssuedAt: time.Now().Unix(), TTL: 3600}), "other_ip")
			// Other IP, for real: a session fetched from another source
			// address works from there and is refused from ours.
			alt := p.session(t, p.altClient)
			if alt.local != p.altIP || edgeToken(t, alt.SessionID).Subject != p.altIP || p.altIP == me {
				t.Fatalf("%s: session from %s has subject %q (our address %s)", p.name, alt.local, edgeToken(t, alt.SessionID).Subject, me)
			}
			if ans := p.post(t, p.altClient, "/mcpv2", alt.SessionID, slot); ans.status != http.StatusOK {
				t.Fatalf("%s: the session from %s refused there: %s", p.name, p.altIP, ans)
			}
			e := edgeWantRefused(t, p.name+": other IP (real)", p.post(t, p.client, "/mcpv2", alt.SessionID, slot), http.StatusUnauthorized, -32001, "other_ip")
			if !strings.Contains(e.Message, me) {
				t.Fatalf("%s: other-IP refusal does not name the caller's address %s: %q", p.name, me, e.Message)
			}
			// Every session endpoint checks: /mcpv2/ai and the gateway too.
			edgeWantRefused(t, p.name+": /mcpv2/ai without a token", p.post(t, p.client, "/mcpv2/ai/openai", "", map[string]any{"messages": []any{}}), http.StatusUnauthorized, -32001, "missing")
			edgeWantRefused(t, p.name+": gateway with a tampered token", p.post(t, p.client, "/mcpv2/peers/"+b.peerID, string(mac), slot), http.StatusUnauthorized, -32001, "signature")
		}
	})

	t.Run("demo-session-address", func(t *testing.T) {
		// The banner's MCPV2_DEMO_SESSION_ADDRESS is for a client on the
		// node's own host: its host and port reach this edge, and its token
		// is minted for the address such a client is seen from (so it works
		// as printed for as long as the token lives).
		for _, p := range both {
			demo := p.proc.first("MCPV2_DEMO_SESSION_ADDRESS")
			da, err := protocol.ParseAddress(demo)
			if err != nil || da.Kind != protocol.AddrHTTP || da.SessionID == "" || da.Port != p.port {
				t.Fatalf("%s: MCPV2_DEMO_SESSION_ADDRESS %q: %v", p.name, demo, err)
			}
			hp := "http://" + net.JoinHostPort(da.Host, strconv.Itoa(da.Port))
			h, err := edgeTryDo(p.localClient, http.MethodGet, hp+"/mcpv2/health", nil, nil)
			if err != nil || h.status != http.StatusOK || !bytes.Contains(h.body, []byte(p.peerID)) {
				t.Errorf("%s: the printed demo address %s does not reach the edge from the node's own host (the edge listens on %s:%d): %v %v",
					p.name, demo, p.ip, p.port, err, h)
				continue
			}
			tk := edgeToken(t, da.SessionID)
			if _, err := protocol.VerifyToken([]byte(edgeSecret), da.SessionID, h.local, time.Unix(tk.IssuedAt, 0), time.Minute); err != nil {
				t.Errorf("%s: the demo token is for %q, but a client on the node's host reaching %s is seen as %s: %v", p.name, tk.Subject, hp, h.local, err)
				continue
			}
			if time.Now().Unix() < tk.IssuedAt+tk.TTL {
				ans, err := edgeTryDo(p.localClient, http.MethodPost, hp+"/mcpv2?sessionId="+url.QueryEscape(da.SessionID), nil, edgeSlot(1, "ping", nil))
				if err != nil || ans.status != http.StatusOK {
					t.Errorf("%s: the demo address as printed: %v %v", p.name, err, ans)
				}
			}
		}
	})

	t.Run("ping", func(t *testing.T) {
		for _, p := range both {
			tok := p.session(t, p.client).SessionID
			payload := map[string]any{"nested": []any{1.5, "two", nil, true}, "tag": tag}
			var r struct {
				Pong       bool            `json:"pong"`
				PeerID     string          `json:"peer_id"`
				TimeUnixMS int64           `json:"time_unix_ms"`
				Payload    json.RawMessage `json:"payload"`
			}
			p.mustCall(t, tok, "ping", map[string]any{"payload": payload}, &r)
			pj, _ := json.Marshal(payload)
			if !r.Pong || r.PeerID != p.peerID || !edgeJSONEqual(r.Payload, pj) ||
				time.Since(time.UnixMilli(r.TimeUnixMS)).Abs() > time.Minute {
				t.Fatalf("%s: ping %+v", p.name, r)
			}
			var noPayload map[string]any
			p.mustCall(t, tok, "ping", map[string]any{}, &noPayload)
			if _, ok := noPayload["payload"]; ok {
				t.Fatalf("%s: ping without payload echoed one: %v", p.name, noPayload)
			}
		}
	})

	t.Run("tools-list", func(t *testing.T) {
		for _, p := range both {
			tok := p.session(t, p.client).SessionID
			ans := p.post(t, p.client, "/mcpv2", tok, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": map[string]any{}})
			var r struct {
				Result struct {
					Tools []struct {
						Name        string          `json:"name"`
						InputSchema json.RawMessage `json:"inputSchema"`
						Tags        []string        `json:"tags"`
					} `json:"tools"`
				} `json:"result"`
			}
			if ans.status != http.StatusOK || json.Unmarshal(ans.body, &r) != nil {
				t.Fatalf("%s: tools/list %s", p.name, ans)
			}
			var names []string
			for _, tool := range r.Result.Tools {
				names = append(names, tool.Name)
				if !bytes.Contains(tool.InputSchema, []byte(`"object"`)) {
					t.Errorf("%s: %s inputSchema %s", p.name, tool.Name, tool.InputSchema)
				}
				if tool.Name == "greet" && !slices.Equal(tool.Tags, []string{"demo", "e2e"}) {
					t.Errorf("%s: greet tags %v", p.name, tool.Tags)
				}
			}
			want := append([]string{}, edgeStandardSkills...)
			if p.greet {
				want = append(want, "greet")
			}
			slices.Sort(names)
			slices.Sort(want)
			if !slices.Equal(names, want) {
				t.Fatalf("%s: tools %v, want %v", p.name, names, want)
			}
		}
	})

	t.Run("ask-stateless", func(t *testing.T) {
		tok := a.session(t, a.client).SessionID
		conv := "stateless-" + tag
		var r1, r2 edgeAskResult
		a.mustCall(t, tok, "ask", map[string]any{"query": "My name is Ada and my favourite colour is teal.", "conversation_id": conv}, &r1)
		a.mustCall(t, tok, "ask", map[string]any{"query": "What is my favourite colour?", "conversation_id": conv, "system": "Be brief."}, &r2)
		for i, r := range []edgeAskResult{r1, r2} {
			if r.Turn != 1 || r.Provider != "local" || r.Model == "" || r.Response == "" || r.ConversationID != conv {
				t.Fatalf("A ask %d (stateless): %+v", i+1, r)
			}
		}
		if strings.Contains(r2.Response, "teal") || !strings.Contains(r1.Response, "teal") {
			t.Fatalf("A is stateless, yet the second ask saw the first: %q / %q", r1.Response, r2.Response)
		}
		a.wantCallError(t, tok, "ask", map[string]any{"query": "   "}, -32602)
		a.wantCallError(t, tok, "ask", map[string]any{"conversation_id": conv}, -32602)
	})

	t.Run("ask-llm-mode-4-turns", func(t *testing.T) {
		conv := "trip-" + tag
		turns := []struct{ query, want string }{
			{"My name is Ada and my favourite colour is teal.", "teal"},
			{"I live in the city of Lisbon and I keep a lighthouse.", "Lisbon"},
			{"What is my favourite colour?", "teal"},
			{"Which city do I live in?", "Lisbon"},
		}
		for i, tu := range turns {
			tok := b.session(t, b.client).SessionID // a new session each turn: the context is the caller's
			var r edgeAskResult
			b.mustCall(t, tok, "ask", map[string]any{"query": tu.query, "conversation_id": conv}, &r)
			if r.Turn != i+1 || r.ConversationID != conv || r.Provider != "local" || !strings.Contains(r.Response, tu.want) {
				t.Fatalf("B turn %d: %+v, want turn %d mentioning %q", i+1, r, i+1, tu.want)
			}
			if i >= 2 && !strings.Contains(r.Response, fmt.Sprintf("turn %d", i-1)) {
				t.Fatalf("B turn %d does not answer from turn %d: %q", i+1, i-1, r.Response)
			}
		}
		tok := b.session(t, b.client).SessionID
		// Another conversation of the same caller starts afresh.
		var other edgeAskResult
		b.mustCall(t, tok, "ask", map[string]any{"query": "What is my favourite colour?", "conversation_id": "other-" + tag}, &other)
		if other.Turn != 1 || strings.Contains(other.Response, "teal") {
			t.Fatalf("B: another conversation saw the first: %+v", other)
		}
		// Another caller (source address) with the same conversation id does
		// not see it either: history is keyed by caller and conversation.
		alt := b.session(t, b.altClient).SessionID
		res, perr := b.callVia(t, b.altClient, "/mcpv2", alt, "ask", map[string]any{"query": "What is my favourite colour?", "conversation_id": conv})
		var stranger edgeAskResult
		if perr != nil || json.Unmarshal(res, &stranger) != nil || stranger.Turn != 1 || strings.Contains(stranger.Response, "teal") {
			t.Fatalf("B: a caller from %s saw another caller's conversation: %s %+v", b.altIP, res, perr)
		}
		// Without a conversation_id, LLM mode opens a new one.
		var fresh edgeAskResult
		b.mustCall(t, tok, "ask", map[string]any{"query": "Hello there"}, &fresh)
		if fresh.Turn != 1 || fresh.ConversationID == "" || fresh.ConversationID == conv {
			t.Fatalf("B: ask without conversation_id: %+v", fresh)
		}
		// The conversation goes on where it was.
		var fifth edgeAskResult
		b.mustCall(t, tok, "ask", map[string]any{"query": "Do I keep a lighthouse?", "conversation_id": conv}, &fifth)
		if fifth.Turn != 5 || !strings.Contains(fifth.Response, "lighthouse") {
			t.Fatalf("B turn 5: %+v", fifth)
		}
	})

	t.Run("ai-endpoint", func(t *testing.T) {
		// /mcpv2/ai/{provider}: a provider-native request answered in that
		// provider's shape, with the history in the request as context.
		tok := a.session(t, a.client).SessionID
		ans := a.post(t, a.client, "/mcpv2/ai/claude", tok, map[string]any{
			"model": "claude-sonnet-4-5", "max_tokens": 256, "system": "Be brief.",
			"messages": []any{
				map[string]any{"role": "user", "content": "My name is Ada and my favourite colour is teal."},
				map[string]any{"role": "assistant", "content": "Nice to meet you, Ada."},
				map[string]any{"role": "user", "content": "What is my favourite colour?"},
			}})
		var msg struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			Content []struct {
				Type, Text string
			} `json:"content"`
			StopReason string `json:"stop_reason"`
		}
		if ans.status != http.StatusOK || json.Unmarshal(ans.body, &msg) != nil || msg.Type != "message" || msg.Role != "assistant" ||
			len(msg.Content) != 1 || !strings.Contains(msg.Content[0].Text, "teal") || msg.StopReason != "end_turn" {
			t.Fatalf("A /mcpv2/ai/claude: %s", ans)
		}
		ans = a.post(t, a.client, "/mcpv2/ai/openai", tok, map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": "Hello there"}}})
		var cc struct {
			Object  string `json:"object"`
			Choices []struct {
				Message struct{ Role, Content string } `json:"message"`
			} `json:"choices"`
		}
		if ans.status != http.StatusOK || json.Unmarshal(ans.body, &cc) != nil || cc.Object != "chat.completion" || len(cc.Choices) != 1 ||
			cc.Choices[0].Message.Role != "assistant" || cc.Choices[0].Message.Content == "" || ans.header.Get("X-MCPV2-Turn") != "1" {
			t.Fatalf("A /mcpv2/ai/openai: %s %v", ans, ans.header)
		}
	})

	t.Run("file-lifecycle", func(t *testing.T) {
		tok := a.session(t, a.client).SessionID
		type file struct {
			label, name, encoding string
			data                  []byte
		}
		files := []file{
			{"1KiB", "e2e-" + tag + "-1k.txt", "utf-8", edgeText(1<<10, 1, true)},
			{"1MiB", "e2e-" + tag + "-1m.txt", "base64", edgeText(1<<20, 2, false)},
			{"16MiB", "e2e-" + tag + "-16m.bin", "base64", edgeBigFile()},
		}
		for _, f := range files {
			start := time.Now()
			content := string(f.data)
			if f.encoding == "base64" {
				content = base64.StdEncoding.EncodeToString(f.data)
			}
			var up struct {
				Filename string `json:"filename"`
				Size     int64  `json:"size"`
				SHA256   string `json:"sha256"`
			}
			a.mustCall(t, tok, "upload_file", map[string]any{"filename": f.name, "content": content, "encoding": f.encoding}, &up)
			sum := sha256.Sum256(f.data)
			if up.Filename != f.name || up.Size != int64(len(f.data)) || up.SHA256 != hex.EncodeToString(sum[:]) {
				t.Fatalf("upload %s: %+v", f.label, up)
			}
			t.Logf("upload %s (%s): %v", f.label, f.encoding, time.Since(start).Round(time.Millisecond))
		}
		listed := func() map[string]map[string]any {
			var l struct {
				Files []map[string]any `json:"files"`
			}
			a.mustCall(t, tok, "list_files", map[string]any{}, &l)
			m := map[string]map[string]any{}
			for _, f := range l.Files {
				m[f["filename"].(string)] = f
			}
			return m
		}
		got := listed()
		for _, f := range files {
			sum := sha256.Sum256(f.data)
			e, ok := got[f.name]
			if !ok || e["size"] != float64(len(f.data)) || e["sha256"] != hex.EncodeToString(sum[:]) || e["modified"] == nil {
				t.Fatalf("list_files: %s is %v", f.name, e)
			}
		}
		for _, f := range files {
			var pr struct {
				Filename string    `json:"filename"`
				Result   string    `json:"result"`
				Stats    edgeStats `json:"stats"`
			}
			a.mustCall(t, tok, "process_instructions", map[string]any{"filename": f.name, "instructions": "Count the words and summarise."}, &pr)
			if want := edgeStatsOf(f.data); pr.Filename != f.name || pr.Result == "" || pr.Stats != want {
				t.Fatalf("process_instructions %s: %+v, want stats %+v", f.label, pr, want)
			}
		}
		// Overwrite: the new content replaces the old one whole.
		var up struct {
			Size   int64  `json:"size"`
			SHA256 string `json:"sha256"`
		}
		a.mustCall(t, tok, "upload_file", map[string]any{"filename": files[0].name, "content": "replaced\n"}, &up)
		sum := sha256.Sum256([]byte("replaced\n"))
		if up.Size != 9 || up.SHA256 != hex.EncodeToString(sum[:]) || listed()[files[0].name]["size"] != float64(9) {
			t.Fatalf("overwrite: %+v", up)
		}
		// Names that leave the store are refused.
		for _, bad := range []string{"../escape.txt", "dir/file.txt", "/etc/passwd", ".."} {
			a.wantCallError(t, tok, "upload_file", map[string]any{"filename": bad, "content": "x"}, -32602)
		}
		a.wantCallError(t, tok, "upload_file", map[string]any{"filename": "bad64-" + tag, "content": "!!!not base64", "encoding": "base64"}, -32602)
		for _, f := range files {
			var d struct {
				Filename string `json:"filename"`
				Deleted  bool   `json:"deleted"`
			}
			a.mustCall(t, tok, "delete_file", map[string]any{"filename": f.name}, &d)
			if d.Filename != f.name || !d.Deleted {
				t.Fatalf("delete %s: %+v", f.name, d)
			}
			a.wantCallError(t, tok, "delete_file", map[string]any{"filename": f.name}, -32007)
			a.wantCallError(t, tok, "process_instructions", map[string]any{"filename": f.name, "instructions": "x"}, -32007)
		}
		for _, f := range files {
			if _, ok := listed()[f.name]; ok {
				t.Fatalf("%s still listed after delete", f.name)
			}
		}
	})

	t.Run("translate-history-12-pairs", func(t *testing.T) {
		tok := a.session(t, a.client).SessionID
		hist := map[string]json.RawMessage{}
		for _, p := range protocol.Providers {
			raw, err := os.ReadFile(filepath.Join("testdata", "edge", "history_"+p+".json"))
			if err != nil {
				t.Fatal(err)
			}
			hist[p] = raw
		}
		type pair struct{ from, to string }
		var pairs []pair
		var fwd []any
		for _, from := range protocol.Providers {
			for _, to := range protocol.Providers {
				if from != to {
					fwd = append(fwd, edgeSlot(len(pairs), "translate_history", map[string]any{"history": hist[from], "from": from, "to": to}))
					pairs = append(pairs, pair{from, to})
				}
			}
		}
		if len(pairs) != 12 {
			t.Fatalf("%d pairs", len(pairs))
		}
		out := edgeBatch(t, a, tok, fwd, len(pairs))
		var back []any
		for i, r := range out {
			var tr struct {
				History  json.RawMessage `json:"history"`
				From, To string
			}
			if r.Error != nil || json.Unmarshal(r.Result, &tr) != nil || tr.From != pairs[i].from || tr.To != pairs[i].to || len(tr.History) < 10 {
				t.Fatalf("translate %s→%s: %s %+v", pairs[i].from, pairs[i].to, r.Result, r.Error)
			}
			back = append(back, edgeSlot(i, "translate_history", map[string]any{"history": tr.History, "from": pairs[i].to, "to": pairs[i].from}))
		}
		for i, r := range edgeBatch(t, a, tok, back, len(pairs)) {
			var tr struct {
				History json.RawMessage `json:"history"`
			}
			if r.Error != nil || json.Unmarshal(r.Result, &tr) != nil {
				t.Fatalf("translate back %s→%s: %+v", pairs[i].to, pairs[i].from, r.Error)
			}
			if !edgeJSONEqual(tr.History, hist[pairs[i].from]) {
				t.Errorf("%s→%s→%s is not the original:\n got %s\nwant %s", pairs[i].from, pairs[i].to, pairs[i].from, tr.History, hist[pairs[i].from])
			}
		}
		// A history that breaks its format's rules is -32602.
		a.wantCallError(t, tok, "translate_history", map[string]any{"history": json.RawMessage(`[{"role":"tool","tool_call_id":"nope","content":"x"}]`), "from": "openai", "to": "claude"}, -32602)
	})

	t.Run("negotiate", func(t *testing.T) {
		for _, p := range both {
			tok := p.session(t, p.client).SessionID
			var n struct {
				ProtocolVersion string   `json:"protocol_version"`
				Providers       []string `json:"providers"`
				Capabilities    []string `json:"capabilities"`
				Limits          struct {
					MaxBatch   int     `json:"max_batch"`
					MaxMessage int     `json:"max_message"`
					RateLimit  float64 `json:"rate_limit"`
				} `json:"limits"`
			}
			p.mustCall(t, tok, "negotiate", map[string]any{"protocol_versions": []string{"mcpv2/9.9", protocol.Version}, "providers": []string{"gemini", "claude", "mistral"}}, &n)
			if n.ProtocolVersion != protocol.Version || !slices.Equal(n.Providers, []string{"claude", "gemini"}) || n.Capabilities == nil ||
				n.Limits.MaxBatch != protocol.MaxBatchSize || n.Limits.MaxMessage != p.maxMessage || n.Limits.RateLimit != float64(p.rateLimit) {
				t.Fatalf("%s: negotiate %+v", p.name, n)
			}
			p.wantCallError(t, tok, "negotiate", map[string]any{"protocol_versions": []string{"mcpv2/9.9"}}, -32006)
			p.wantCallError(t, tok, "negotiate", map[string]any{}, -32602)
		}
	})

	t.Run("pay-stub", func(t *testing.T) {
		tok := a.session(t, a.client).SessionID
		var r map[string]any
		a.mustCall(t, tok, "pay", map[string]any{"amount": 12.5, "currency": "EUR", "memo": "e2e " + tag}, &r)
		if r["status"] != "pending" || r["stub"] != true || !strings.HasPrefix(fmt.Sprint(r["transaction_id"]), "tx_") {
			t.Fatalf("pay: %v", r)
		}
		var r2 map[string]any
		a.mustCall(t, tok, "pay", map[string]any{"amount": 1}, &r2)
		if r2["transaction_id"] == r["transaction_id"] {
			t.Fatalf("pay: two payments share a transaction id: %v %v", r, r2)
		}
		for _, amt := range []any{0, -5} {
			a.wantCallError(t, tok, "pay", map[string]any{"amount": amt}, -32602)
		}
		a.wantCallError(t, tok, "pay", map[string]any{"amount": "ten"}, -32602)
	})

	t.Run("unsupported-provider-32010", func(t *testing.T) {
		for _, p := range both {
			tok := p.session(t, p.client).SessionID
			s := edgeSlot(7, "ping", nil)
			s["context"] = map[string]any{"provider": "mistral"}
			ans := p.post(t, p.client, "/mcpv2", tok, s)
			var r edgeRPCResp
			if ans.status != http.StatusOK || json.Unmarshal(ans.body, &r) != nil || r.Error == nil || r.Error.Code != -32010 || string(r.ID) != "7" {
				t.Fatalf("%s: context.provider mistral: %s", p.name, ans)
			}
			// The four known providers are accepted.
			for _, prov := range protocol.Providers {
				s["context"] = map[string]any{"provider": prov}
				if ans := p.post(t, p.client, "/mcpv2", tok, s); ans.status != http.StatusOK || !bytes.Contains(ans.body, []byte(`"pong":true`)) {
					t.Fatalf("%s: context.provider %s: %s", p.name, prov, ans)
				}
			}
			p.wantCallError(t, tok, "translate_history", map[string]any{"history": json.RawMessage(`[]`), "from": "openai", "to": "mistral"}, -32010)
			edgeWantRefused(t, p.name+": /mcpv2/ai/mistral", p.post(t, p.client, "/mcpv2/ai/mistral", tok, map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}),
				http.StatusBadRequest, -32010, "")
		}
	})

	t.Run("method-not-found-32601", func(t *testing.T) {
		for _, p := range both {
			tok := p.session(t, p.client).SessionID
			ans := p.post(t, p.client, "/mcpv2", tok, map[string]any{"jsonrpc": "2.0", "id": "m", "method": "tools/explode", "params": map[string]any{}})
			var r edgeRPCResp
			if ans.status != http.StatusOK || json.Unmarshal(ans.body, &r) != nil || r.Error == nil || r.Error.Code != -32601 || string(r.ID) != `"m"` {
				t.Fatalf("%s: unknown method: %s", p.name, ans)
			}
			// An unknown skill is -32002; an unknown path is 404 with -32601.
			p.wantCallError(t, tok, "no_such_skill", map[string]any{}, -32002)
			edgeWantRefused(t, p.name+": GET /mcpv2/nowhere", edgeDo(t, p.client, http.MethodGet, p.base+"/mcpv2/nowhere", nil, nil), http.StatusNotFound, -32601, "")
			// Malformed JSON is -32700 (400); a slot without a method -32600.
			edgeWantRefused(t, p.name+": bad JSON", p.post(t, p.client, "/mcpv2", tok, []byte(`{"jsonrpc":"2.0",`)), http.StatusBadRequest, -32700, "")
		}
	})

	t.Run("custom-skill", func(t *testing.T) {
		tok := b.session(t, b.client).SessionID
		var g struct {
			Result string `json:"result"`
		}
		b.mustCall(t, tok, "greet", map[string]any{"name": "Ada"}, &g)
		if g.Result != "Hello, Ada!" {
			t.Fatalf("greet: %+v", g)
		}
		for _, bad := range []any{map[string]any{}, map[string]any{"name": 42}, map[string]any{"name": ""}, map[string]any{"name": "Ada", "extra": true}} {
			b.wantCallError(t, tok, "greet", bad, -32602)
		}
		var d struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		b.mustCall(t, tok, "get_skill", map[string]any{"name": "greet"}, &d)
		if d.Name != "greet" || d.Description != "Greets someone by name" || !bytes.Contains(d.InputSchema, []byte(`"required"`)) {
			t.Fatalf("get_skill greet: %+v", d)
		}
		// A has no such skill.
		a.wantCallError(t, a.session(t, a.client).SessionID, "greet", map[string]any{"name": "Ada"}, -32002)
	})

	t.Run("mixed-batch", func(t *testing.T) {
		for _, p := range both {
			tok := p.session(t, p.client).SessionID
			slots := []any{
				edgeSlot("good", "ping", map[string]any{"payload": "first"}),
				edgeSlot(2, "delete_file", map[string]any{"filename": "never-there-" + tag}),
				edgeSlot(nil, "ping", map[string]any{"payload": "a notification"}),
			}
			out := edgeBatch(t, p, tok, slots, 2)
			if string(out[0].ID) != `"good"` || out[0].Error != nil || !bytes.Contains(out[0].Result, []byte(`"payload":"first"`)) {
				t.Fatalf("%s: batch slot 0: %+v", p.name, out[0])
			}
			if string(out[1].ID) != "2" || out[1].Result != nil || out[1].Error == nil || out[1].Error.Code != -32007 {
				t.Fatalf("%s: batch slot 1: %+v", p.name, out[1])
			}
			// More kinds of failure side by side, each on its own.
			slots = []any{
				map[string]any{"jsonrpc": "2.0", "id": 10, "method": "tools/nope"},
				edgeSlot(11, "pay", map[string]any{"amount": -1}),
				edgeSlot(12, "ping", nil),
				map[string]any{"jsonrpc": "2.0", "id": 13},
				edgeSlot(14, "get_skill", map[string]any{"name": "ping"}),
			}
			out = edgeBatch(t, p, tok, slots, 5)
			wantCodes := []int{-32601, -32602, 0, -32600, 0}
			for i, r := range out {
				if string(r.ID) != strconv.Itoa(10+i) {
					t.Fatalf("%s: batch out of order: %d has id %s", p.name, i, r.ID)
				}
				if code := 0; r.Error != nil {
					if code = r.Error.Code; code != wantCodes[i] {
						t.Fatalf("%s: slot %d: error %+v, want %d", p.name, 10+i, r.Error, wantCodes[i])
					}
				} else if wantCodes[i] != 0 || r.Result == nil {
					t.Fatalf("%s: slot %d: %+v, want error %d", p.name, 10+i, r, wantCodes[i])
				}
			}
			// Only notifications: 204, nothing. An empty batch and 101 slots: 400 -32600.
			ans := p.post(t, p.client, "/mcpv2", tok, []any{edgeSlot(nil, "ping", nil), edgeSlot(nil, "ping", nil)})
			if ans.status != http.StatusNoContent || len(ans.body) != 0 {
				t.Fatalf("%s: notifications only: %s", p.name, ans)
			}
			edgeWantRefused(t, p.name+": empty batch", p.post(t, p.client, "/mcpv2", tok, []byte("[]")), http.StatusBadRequest, -32600, "")
			var big []any
			for i := range protocol.MaxBatchSize + 1 {
				big = append(big, edgeSlot(i, "ping", nil))
			}
			edgeWantRefused(t, p.name+": 101 slots", p.post(t, p.client, "/mcpv2", tok, big), http.StatusBadRequest, -32600, "")
		}
	})

	t.Run("body-cap", func(t *testing.T) {
		// B keeps the default 8 MiB cap: a 9 MiB body is 413 with -32600.
		tok := b.session(t, b.client).SessionID
		body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"upload_file","arguments":{"filename":"big-%s","content":"%s"}}}`,
			tag, strings.Repeat("x", 9<<20))
		e := edgeWantRefused(t, "B: 9 MiB body", b.post(t, b.client, "/mcpv2", tok, body), http.StatusRequestEntityTooLarge, -32600, "")
		if !strings.Contains(e.Message, "8 MiB") {
			t.Fatalf("B: 413 does not name the cap: %q", e.Message)
		}
	})

	t.Run("gateway-a-to-b", func(t *testing.T) {
		// A's edge forwards to B over the mesh (libp2p), not over HTTP.
		tok := a.session(t, a.client).SessionID
		edgeWaitGateway(t, a.client, a.base, tok, b.peerID)
		var r struct {
			Pong    bool   `json:"pong"`
			PeerID  string `json:"peer_id"`
			Payload string `json:"payload"`
		}
		res, perr := a.callVia(t, a.client, "/mcpv2/peers/"+b.peerID, tok, "ping", map[string]any{"payload": "via A " + tag})
		if perr != nil || json.Unmarshal(res, &r) != nil || !r.Pong || r.PeerID != b.peerID || r.Payload != "via A "+tag {
			t.Fatalf("gateway ping: %s %+v", res, perr)
		}
		out := edgeBatchAt(t, a, "/mcpv2/peers/"+b.peerID, tok, []any{
			map[string]any{"jsonrpc": "2.0", "id": 1, "method": "agent/card"},
			map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/nope"},
			edgeSlot(nil, "ping", nil),
		}, 2)
		if out[0].Error != nil || !bytes.Contains(out[0].Result, []byte(b.peerID)) || out[1].Error == nil || out[1].Error.Code != -32601 {
			t.Fatalf("gateway batch: %+v %+v", out[0], out[1])
		}
		if ans := a.post(t, a.client, "/mcpv2/peers/"+b.peerID, tok, edgeSlot(nil, "ping", nil)); ans.status != http.StatusNoContent {
			t.Fatalf("gateway notification: %s", ans)
		}
		edgeWantRefused(t, "gateway to a non-PeerID", a.post(t, a.client, "/mcpv2/peers/not-a-peer", tok, edgeSlot(1, "ping", nil)), http.StatusBadRequest, -32602, "")
	})

	t.Run("burst-429", func(t *testing.T) {
		// B allows edgeBRate requests per second per session: a burst of
		// three times that, at once, meets the limit.
		s := b.session(t, b.client)
		n := 3 * b.rateLimit
		type res struct {
			ans edgeAnswer
			err error
		}
		results := make([]res, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ans, err := edgeTryDo(b.client, http.MethodPost, b.base+"/mcpv2", map[string]string{"X-MCPV2-Session": s.SessionID}, edgeSlot(i, "ping", nil))
				results[i] = res{ans, err}
			}()
		}
		t0 := time.Now()
		close(start)
		wg.Wait()
		took := time.Since(t0)
		ok, limited, retry := 0, 0, 0
		for i, r := range results {
			switch {
			case r.err != nil:
				t.Fatalf("burst request %d: %v", i, r.err)
			case r.ans.status == http.StatusOK:
				ok++
			case r.ans.status == http.StatusTooManyRequests:
				limited++
				e := edgeWantRefused(t, "burst 429", r.ans, http.StatusTooManyRequests, -32005, "")
				ra, err := strconv.Atoi(r.ans.header.Get("Retry-After"))
				if err != nil || ra < 1 || ra > 5 || !bytes.Contains(e.Data, []byte("retry_after_ms")) {
					t.Fatalf("burst 429: Retry-After %q, error %+v", r.ans.header.Get("Retry-After"), e)
				}
				retry = max(retry, ra)
			default:
				t.Fatalf("burst request %d: %s", i, r.ans)
			}
		}
		// The bucket holds rate tokens and refills at rate per second.
		if limited == 0 || ok < b.rateLimit/2 || float64(ok) > float64(b.rateLimit)*(1+took.Seconds())+1 {
			t.Fatalf("burst of %d in %v: %d ok, %d limited (rate %d/s)", n, took, ok, limited, b.rateLimit)
		}
		t.Logf("burst of %d in %v: %d ok, %d × 429 (Retry-After %ds)", n, took.Round(time.Millisecond), ok, limited, retry)
		// Session issues are limited per IP too (20/s by default).
		var lim sync.WaitGroup
		issued := make([]edgeAnswer, 60)
		for i := range issued {
			lim.Add(1)
			go func() {
				defer lim.Done()
				issued[i], _ = edgeTryDo(b.client, http.MethodGet, b.base+"/mcpv2/session", nil, nil)
			}()
		}
		lim.Wait()
		statuses := map[int]int{}
		for _, ans := range issued {
			statuses[ans.status]++
			if ans.status == http.StatusTooManyRequests {
				edgeWantRefused(t, "session burst", ans, http.StatusTooManyRequests, -32005, "")
				ra, err := strconv.Atoi(ans.header.Get("Retry-After"))
				if err != nil || ra < 1 {
					t.Fatalf("session burst 429 with Retry-After %q", ans.header.Get("Retry-After"))
				}
				retry = max(retry, ra)
			}
		}
		if statuses[http.StatusOK] == 0 || statuses[http.StatusTooManyRequests] == 0 || statuses[http.StatusOK]+statuses[http.StatusTooManyRequests] != len(issued) {
			t.Fatalf("60 session issues at once: statuses %v", statuses)
		}
		// After Retry-After, the same session is served again.
		time.Sleep(time.Duration(retry)*time.Second + 100*time.Millisecond)
		if ans := b.post(t, b.client, "/mcpv2", s.SessionID, edgeSlot(1, "ping", nil)); ans.status != http.StatusOK {
			t.Fatalf("after Retry-After: %s", ans)
		}
		if s2 := b.session(t, b.client); s2.SessionID == "" {
			t.Fatal("no session after the session burst")
		}
	})

	t.Run("expired-short-ttl", func(t *testing.T) {
		// The session fetched at the start of the round, valid for B's
		// short TTL, is refused once it has run out.
		if wait := time.Until(time.Unix(expiring.ExpiresAt+1, 0)) + 50*time.Millisecond; wait > 0 {
			time.Sleep(wait)
		}
		e := edgeWantRefused(t, "B: expired session", b.post(t, b.client, "/mcpv2", expiring.SessionID, edgeSlot(1, "ping", nil)), http.StatusUnauthorized, -32001, "expired")
		if !strings.Contains(e.Message, "expired at") {
			t.Fatalf("expiry message: %q", e.Message)
		}
	})
	t.Logf("round took %v", time.Since(began).Round(time.Millisecond))
}

// edgeStandardSkills are the skills every node with a mesh serves: the ten
// of SPEC §3 and read_file (skills.StandardNames), scan (the guard) and
// orchestrate.
var edgeStandardSkills = []string{"ping", "ask", "upload_file", "list_files", "process_instructions", "delete_file", "get_skill", "pay", "negotiate", "translate_history", "read_file", "scan", "orchestrate"}

func edgeSkillNames(ds []protocol.SkillDescriptor) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}

type edgeAskResult struct {
	Response       string `json:"response"`
	Provider       string `json:"provider"`
	Model          string `json:"model"`
	Turn           int    `json:"turn"`
	ConversationID string `json:"conversation_id"`
}

// edgeBatch posts slots to p's /mcpv2 and returns the n responses.
func edgeBatch(t *testing.T, p edgePeer, tok string, slots []any, n int) []edgeRPCResp {
	t.Helper()
	return edgeBatchAt(t, p, "/mcpv2", tok, slots, n)
}

func edgeBatchAt(t *testing.T, p edgePeer, path, tok string, slots []any, n int) []edgeRPCResp {
	t.Helper()
	ans := p.post(t, p.client, path, tok, slots)
	var out []edgeRPCResp
	if ans.status != http.StatusOK || json.Unmarshal(ans.body, &out) != nil || len(out) != n {
		t.Fatalf("%s: batch of %d at %s: want an array of %d, got %s", p.name, len(slots), path, n, ans)
	}
	return out
}

// edgeStats is process_instructions's stats.
type edgeStats struct {
	Bytes int64 `json:"bytes"`
	Lines int64 `json:"lines"`
	Words int64 `json:"words"`
}

// edgeStatsOf counts as SPEC §3's process_instructions does: bytes, lines (a
// final unterminated one counts) and whitespace-separated edgeWords.
func edgeStatsOf(b []byte) edgeStats {
	st := edgeStats{Bytes: int64(len(b))}
	in := false
	for _, c := range b {
		if c == '\n' {
			st.Lines++
		}
		if unicode.IsSpace(rune(c)) {
			in = false
		} else if !in {
			in = true
			st.Words++
		}
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		st.Lines++
	}
	return st
}

var edgeWords = []string{"mesh", "peer", "agent", "skill", "slot", "batch", "edge", "session", "token", "lisbon", "lighthouse", "teal", "olá", "café", "naïve", "Ελληνικά"}

// edgeText returns n bytes of edgeWords and lines from seed; with ascii only
// ASCII edgeWords (so that cutting at n keeps the text valid UTF-8).
func edgeText(n int, seed uint64, ascii bool) []byte {
	r := mrand.New(mrand.NewPCG(seed, seed))
	var b bytes.Buffer
	for b.Len() < n {
		w := edgeWords[r.IntN(len(edgeWords))]
		if ascii && !edgeIsASCII(w) {
			continue
		}
		b.WriteString(w)
		if r.IntN(9) == 0 {
			b.WriteByte('\n')
		} else {
			b.WriteByte(' ')
		}
	}
	return b.Bytes()[:n]
}

func edgeIsASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

var edgeBigOnce = sync.OnceValue(func() []byte {
	// 16 MiB: mostly text, with a run of every byte value in it.
	b := edgeText(16<<20, 3, false)
	for i := range 4096 {
		b[8<<20+i] = byte(i)
	}
	return b
})

func edgeBigFile() []byte { return edgeBigOnce() }

// --- the tests

// TestEdgeE2E runs the scenario list three times on two node processes on
// loopback: B (127.0.0.2, LLM mode, custom skills) and A (127.0.0.1, with B
// as its bootstrap peer).
func TestEdgeE2E(t *testing.T) {
	t.Parallel()
	skills := filepath.Join("testdata", "edge", "skills.json")
	bPort, aPort := edgeFreePort(t, "127.0.0.2"), edgeFreePort(t, "127.0.0.1")
	common := []string{"--secret", edgeSecret, "--no-mdns", "--no-nat", "--log-level", "debug"}
	bp := startEdgeProc(t, "B", nil, append([]string{"--data-dir", t.TempDir(),
		"--listen", "/ip4/127.0.0.2/tcp/0", "--listen", "/ip4/127.0.0.2/udp/0/quic-v1",
		"--port", strconv.Itoa(bPort), "--public-ip", "127.0.0.2", "--name", "bob",
		"--llm-mode", "--skills", skills, "--session-ttl", edgeBTTL.String(), "--rate-limit", strconv.Itoa(edgeBRate)}, common...)...)
	ap := startEdgeProc(t, "A", nil, append([]string{"--data-dir", t.TempDir(),
		"--listen", "/ip4/127.0.0.1/tcp/0", "--listen", "/ip4/127.0.0.1/udp/0/quic-v1",
		"--port", strconv.Itoa(aPort), "--public-ip", "127.0.0.1", "--name", "alice",
		"--max-message", strconv.Itoa(edgeAMaxMessage), "--bootstrap", bp.tcpAddr(t)}, common...)...)

	a, b := newEdgePeer(t, "A", ap), newEdgePeer(t, "B", bp)
	if a.ip != "127.0.0.1" || a.port != aPort || b.ip != "127.0.0.2" || b.port != bPort {
		t.Fatalf("edges at %s:%d and %s:%d, want 127.0.0.1:%d and 127.0.0.2:%d", a.ip, a.port, b.ip, b.port, aPort, bPort)
	}
	a.maxMessage, a.ttl, a.rateLimit = edgeAMaxMessage, time.Hour, 200
	b.llmMode, b.greet, b.ttl, b.rateLimit, b.maxMessage = true, true, edgeBTTL, edgeBRate, 8<<20
	for _, p := range []*edgePeer{&a, &b} {
		p.client, p.localClient = edgeHTTPClient(t, "", nil), edgeHTTPClient(t, "", nil)
		p.altIP = "127.0.0.3"
		p.altClient = edgeHTTPClient(t, p.altIP, nil)
	}
	var took []string
	for i := 1; i <= edgeRounds; i++ {
		start := time.Now()
		ok := t.Run(fmt.Sprintf("round-%d", i), func(t *testing.T) { runEdgeScenarios(t, a, b) })
		took = append(took, fmt.Sprintf("%v (%s)", time.Since(start).Round(time.Millisecond), map[bool]string{true: "pass", false: "FAIL"}[ok]))
	}
	t.Logf("%d rounds on loopback: %s", edgeRounds, strings.Join(took, ", "))
}

// TestGatewayToMeshOnlyPeer: an HTTP-only client (curl, and Go's net/http)
// calls skills of C, a mesh peer with no HTTP edge, through A's edge, with
// an anonymous session: A's policy grants ask to "http" (every anonymous
// session), and C's grants A's PeerID every skill, so both must agree
// (SPEC §6: the gateway forwards with the caller's own grants).
func TestGatewayToMeshOnlyPeer(t *testing.T) {
	// C grants A (by PeerID) every skill, and the callers A forwards
	// ("via:<A>") ask; ping is open to all. A's own grants never go to
	// the callers it forwards (issue 18).
	aDir, cDir := t.TempDir(), t.TempDir()
	aID := peerIDOf(t, aDir)
	writeFile(t, filepath.Join(cDir, "policy.json"), fmt.Sprintf(`{"grants":{%q:["*"],%q:["ask"]}}`, aID, "via:"+aID))
	writeFile(t, filepath.Join(aDir, "policy.json"), `{"grants":{"http":["ask"]}}`)
	common := []string{"--secret", edgeSecret, "--no-mdns", "--no-nat"}
	cp := startEdgeProc(t, "C", nil, append([]string{"--data-dir", cDir, "--listen", "/ip4/127.0.0.1/tcp/0", "--name", "carol-mesh-only"}, common...)...)
	if cp.first("MCPV2_BOUND_PORT") != "" || cp.first("MCPV2_PEER_ADDRESS") != "" {
		t.Fatalf("C has an HTTP edge: %v", cp.Banner)
	}
	cID := cp.first("MCPV2_PEER_ID")
	port := edgeFreePort(t, "127.0.0.1")
	ap := startEdgeProc(t, "A", nil, append([]string{"--data-dir", aDir, "--listen", "/ip4/127.0.0.1/tcp/0",
		"--port", strconv.Itoa(port), "--public-ip", "127.0.0.1", "--bootstrap", cp.tcpAddr(t)}, common...)...)
	if ap.first("MCPV2_PEER_ID") != aID {
		t.Fatalf("A's PeerID %s, want %s", ap.first("MCPV2_PEER_ID"), aID)
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	{
		c := edgeHTTPClient(t, "", nil)
		ans := edgeDo(t, c, http.MethodGet, base+"/mcpv2/session", nil, nil)
		var s edgeSession
		if ans.status != http.StatusOK || json.Unmarshal(ans.body, &s) != nil {
			t.Fatalf("session: %s", ans)
		}
		edgeWaitGateway(t, c, base, s.SessionID, cID)
	}
	pingBody := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping","arguments":{"payload":"hello C"}}}`
	askBody := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{"query":"Who answers this?"}}}`
	checkPing := func(how string, status int, body []byte) {
		t.Helper()
		var r struct {
			Result struct {
				Pong    bool   `json:"pong"`
				PeerID  string `json:"peer_id"`
				Payload string `json:"payload"`
			} `json:"result"`
			Error *edgeRPCError `json:"error"`
		}
		if status != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Error != nil || !r.Result.Pong || r.Result.PeerID != cID || r.Result.Payload != "hello C" {
			t.Fatalf("%s: ping C through A: HTTP %d %s", how, status, body)
		}
	}
	checkAsk := func(how string, status int, body []byte) {
		t.Helper()
		var r struct {
			Result edgeAskResult `json:"result"`
			Error  *edgeRPCError `json:"error"`
		}
		if status != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Error != nil || r.Result.Provider != "local" || r.Result.Response == "" {
			t.Fatalf("%s: ask C through A: HTTP %d %s", how, status, body)
		}
	}

	t.Run("curl", func(t *testing.T) {
		curl, err := exec.LookPath("curl")
		if err != nil {
			testenv.SkipEnv(t, "curl is not installed (CI: add curl to .ci/run's apt packages)")
		}
		runCurl := func(args ...string) (int, []byte) {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, curl, append([]string{"-sS", "--max-time", "20", "-w", "\n%{http_code}"}, args...)...).Output()
			if err != nil {
				t.Fatalf("curl %v: %v", args, err)
			}
			i := bytes.LastIndexByte(out, '\n')
			code, _ := strconv.Atoi(string(out[i+1:]))
			return code, out[:i]
		}
		code, body := runCurl(base + "/mcpv2/session")
		var s edgeSession
		if code != http.StatusOK || json.Unmarshal(body, &s) != nil || s.SessionID == "" {
			t.Fatalf("curl session: %d %s", code, body)
		}
		for _, q := range []struct {
			body  string
			check func(string, int, []byte)
		}{{pingBody, checkPing}, {askBody, checkAsk}} {
			code, body = runCurl("-X", "POST", "-H", "Content-Type: application/json", "-H", "X-MCPV2-Session: "+s.SessionID,
				"--data-binary", q.body, base+"/mcpv2/peers/"+cID)
			q.check("curl", code, body)
		}
		// The query-parameter form of the seed's clients works too.
		code, body = runCurl("-X", "POST", "--data-binary", pingBody, base+"/mcpv2/peers/"+cID+"?sessionId="+url.QueryEscape(s.SessionID))
		checkPing("curl ?sessionId", code, body)
		// Without a session: 401.
		code, body = runCurl("-X", "POST", "--data-binary", pingBody, base+"/mcpv2/peers/"+cID)
		if code != http.StatusUnauthorized || !bytes.Contains(body, []byte("-32001")) {
			t.Fatalf("curl without a session: %d %s", code, body)
		}
	})

	t.Run("net-http", func(t *testing.T) {
		c := edgeHTTPClient(t, "", nil)
		ans := edgeDo(t, c, http.MethodGet, base+"/mcpv2/session", nil, nil)
		var s edgeSession
		if ans.status != http.StatusOK || json.Unmarshal(ans.body, &s) != nil {
			t.Fatalf("session: %s", ans)
		}
		hdr := map[string]string{"X-MCPV2-Session": s.SessionID}
		ans = edgeDo(t, c, http.MethodPost, base+"/mcpv2/peers/"+cID, hdr, []byte(pingBody))
		checkPing("net/http", ans.status, ans.body)
		ans = edgeDo(t, c, http.MethodPost, base+"/mcpv2/peers/"+cID, hdr, []byte(askBody))
		checkAsk("net/http", ans.status, ans.body)
		// A edgeBatch for C: results in order, each on its own.
		ans = edgeDo(t, c, http.MethodPost, base+"/mcpv2/peers/"+cID, hdr, []byte(`[`+pingBody+`,{"jsonrpc":"2.0","id":3,"method":"nope"},{"jsonrpc":"2.0","id":4,"method":"agent/card"}]`))
		var out []edgeRPCResp
		if ans.status != http.StatusOK || json.Unmarshal(ans.body, &out) != nil || len(out) != 3 ||
			out[0].Error != nil || out[1].Error == nil || out[1].Error.Code != -32601 || !bytes.Contains(out[2].Result, []byte("carol-mesh-only")) {
			t.Fatalf("batch through the gateway: %s", ans)
		}
		// A PeerID nobody serves: an error, not a hang.
		ghost := peerIDOf(t, t.TempDir())
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcpv2/peers/"+ghost, strings.NewReader(pingBody))
		req.Header.Set("X-MCPV2-Session", s.SessionID)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("gateway to an unknown peer: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 || !bytes.Contains(body, []byte(`"error"`)) {
			t.Fatalf("gateway to an unknown peer: HTTP %d %s", resp.StatusCode, body)
		}
	})
}

// TestGatewaySharedSecret: with the seed's trust model (every node started
// with the same --secret, no policy file), a skill that is not open by
// default (ask, list_files) of a mesh-only peer is reachable through
// another node's edge, as it is with `mcpv2 call --secret` (SPEC §5: "an
// HTTP-only peer reaches the whole mesh"; SPEC §6: a mesh session minted
// with the shared secret grants every skill).
func TestGatewaySharedSecret(t *testing.T) {
	common := []string{"--secret", edgeSecret, "--no-mdns", "--no-nat"}
	cp := startEdgeProc(t, "C", nil, append([]string{"--data-dir", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0"}, common...)...)
	cID := cp.first("MCPV2_PEER_ID")
	// The CLI's own mesh client, with the secret, is granted ask on C.
	if out, errs, code := run(t, "call", cp.tcpAddr(t), "list_files", "--secret", edgeSecret, "--data-dir", t.TempDir()); code != 0 || !strings.Contains(out, `"files"`) {
		t.Fatalf("mcpv2 call --secret list_files on C: %d %q %q", code, out, errs)
	}
	port := edgeFreePort(t, "127.0.0.1")
	startEdgeProc(t, "A", nil, append([]string{"--data-dir", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0",
		"--port", strconv.Itoa(port), "--public-ip", "127.0.0.1", "--bootstrap", cp.tcpAddr(t)}, common...)...)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	c := edgeHTTPClient(t, "", nil)
	ans := edgeDo(t, c, http.MethodGet, base+"/mcpv2/session", nil, nil)
	var s edgeSession
	if ans.status != http.StatusOK || json.Unmarshal(ans.body, &s) != nil {
		t.Fatalf("session: %s", ans)
	}
	edgeWaitGateway(t, c, base, s.SessionID, cID)
	// A secret holder's token (minted with the secret for the caller's
	// address, as the seed's client did) reaches every skill of C.
	holder := protocol.EncodeToken([]byte(edgeSecret), edgeToken(t, s.SessionID))
	for _, q := range []struct {
		skill string
		args  map[string]any
	}{{"list_files", map[string]any{}}, {"ask", map[string]any{"query": "hello"}}} {
		ans = edgeDo(t, c, http.MethodPost, base+"/mcpv2/peers/"+cID, map[string]string{"X-MCPV2-Session": holder}, edgeSlot(1, q.skill, q.args))
		var r edgeRPCResp
		if ans.status != http.StatusOK || json.Unmarshal(ans.body, &r) != nil || r.Error != nil || r.Result == nil {
			t.Errorf("%s on C through A's edge by a secret holder, both nodes with --secret: %s", q.skill, ans)
		}
		// The anonymous session does not borrow A's trust (the confused
		// deputy of issue 7): A refuses it before anything reaches C.
		ans = edgeDo(t, c, http.MethodPost, base+"/mcpv2/peers/"+cID, map[string]string{"X-MCPV2-Session": s.SessionID}, edgeSlot(1, q.skill, q.args))
		if ans.status != http.StatusOK || json.Unmarshal(ans.body, &r) != nil || r.Error == nil || r.Error.Code != -32009 {
			t.Errorf("%s on C through A's edge with an anonymous session: %s, want -32009", q.skill, ans)
		}
	}
}

// --- binding (issue acceptance 3)

// TestBindingPublicIPNotLocal: a --public-ip that is not on this machine
// fails at once, naming the address and offering --bind-host 0.0.0.0.
func TestBindingPublicIPNotLocal(t *testing.T) {
	port := edgeFreePort(t, "127.0.0.1")
	start := time.Now()
	out, errs, code := run(t, "node", "--data-dir", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-nat",
		"--port", strconv.Itoa(port), "--public-ip", "203.0.113.10")
	took := time.Since(start)
	t.Logf("exit %d after %v: %s", code, took.Round(time.Millisecond), strings.TrimSpace(edgeLastLines(errs, 1)))
	if code == 0 || !strings.Contains(errs, "203.0.113.10") || !strings.Contains(errs, "--bind-host 0.0.0.0") || strings.Contains(out, "MCPV2_BOUND_PORT") {
		t.Fatalf("--public-ip 203.0.113.10: exit %d\nstdout %q\nstderr %s", code, out, errs)
	}
	if took > time.Second {
		t.Fatalf("--public-ip 203.0.113.10 took %v to fail, want under a second", took)
	}
}

// TestBindingBusyPort: a busy --port is a clear error, unless --port-fallback.
func TestBindingBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	out, errs, code := run(t, "node", "--data-dir", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mesh",
		"--port", strconv.Itoa(busy), "--public-ip", "127.0.0.1")
	if code == 0 || !strings.Contains(errs, strconv.Itoa(busy)) || !strings.Contains(errs, "already in use") || !strings.Contains(errs, "--port-fallback") ||
		strings.Contains(out, "MCPV2_BOUND_PORT") {
		t.Fatalf("busy port %d: exit %d\nstdout %q\nstderr %s", busy, code, out, errs)
	}

	t.Run("port-fallback", func(t *testing.T) {
		portFile := filepath.Join(t.TempDir(), "edge.port")
		p := startEdgeProc(t, "fallback", nil, "--data-dir", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mesh",
			"--port", strconv.Itoa(busy), "--public-ip", "127.0.0.1", "--port-fallback", "--port-file", portFile)
		bound, err := strconv.Atoi(p.first("MCPV2_BOUND_PORT"))
		if err != nil || bound <= busy || bound > busy+100 {
			t.Fatalf("MCPV2_BOUND_PORT %q with port %d busy", p.first("MCPV2_BOUND_PORT"), busy)
		}
		if got, err := os.ReadFile(portFile); err != nil || string(got) != strconv.Itoa(bound)+"\n" {
			t.Fatalf("--port-file: %q %v, want %d", got, err, bound)
		}
		if want := fmt.Sprintf("mcpv2://127.0.0.1:%d/mcpv2", bound); p.first("MCPV2_PEER_ADDRESS") != want {
			t.Fatalf("MCPV2_PEER_ADDRESS %q, want %q", p.first("MCPV2_PEER_ADDRESS"), want)
		}
		c := edgeHTTPClient(t, "", nil)
		ans := edgeDo(t, c, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/mcpv2/health", bound), nil, nil)
		if ans.status != http.StatusOK || !bytes.Contains(ans.body, []byte(p.first("MCPV2_PEER_ID"))) {
			t.Fatalf("health on the fallback port: %s", ans)
		}
		if !strings.Contains(p.stderr(), "port busy") {
			t.Errorf("no log line says the port moved:\n%s", p.stderr())
		}
	})
}

// TestBindingNotEveryInterface: by default the edge listens on --public-ip
// only; --bind-host 0.0.0.0 listens everywhere and still advertises
// --public-ip.
func TestBindingNotEveryInterface(t *testing.T) {
	c := edgeHTTPClient(t, "", nil)
	port := edgeFreePort(t, "0.0.0.0")
	p := startEdgeProc(t, "strict", nil, "--data-dir", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mesh",
		"--port", strconv.Itoa(port), "--public-ip", "127.0.0.1")
	if ans, err := edgeTryDo(c, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/health", port), nil, nil); err != nil || ans.status != http.StatusOK {
		t.Fatalf("health on 127.0.0.1: %v %v", ans, err)
	}
	if _, err := edgeTryDo(c, http.MethodGet, fmt.Sprintf("http://127.0.0.2:%d/health", port), nil, nil); err == nil {
		t.Fatalf("the edge of --public-ip 127.0.0.1 answers on 127.0.0.2: it is not bound to --public-ip alone")
	}
	_ = p.Cmd.Process.Kill()
	<-p.Exited

	port = edgeFreePort(t, "0.0.0.0")
	p = startEdgeProc(t, "everywhere", nil, "--data-dir", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mesh",
		"--port", strconv.Itoa(port), "--public-ip", "203.0.113.10", "--bind-host", "0.0.0.0")
	if want := fmt.Sprintf("mcpv2://203.0.113.10:%d/mcpv2", port); p.first("MCPV2_PEER_ADDRESS") != want {
		t.Fatalf("MCPV2_PEER_ADDRESS %q, want %q", p.first("MCPV2_PEER_ADDRESS"), want)
	}
	for _, ip := range []string{"127.0.0.1", "127.0.0.2"} {
		if ans, err := edgeTryDo(c, http.MethodGet, fmt.Sprintf("http://%s:%d/mcpv2/health", ip, port), nil, nil); err != nil || ans.status != http.StatusOK {
			t.Fatalf("--bind-host 0.0.0.0: health on %s: %v %v", ip, ans, err)
		}
	}
}
