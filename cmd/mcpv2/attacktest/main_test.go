package attacktest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/protocol"
)

// binPath is the mcpv2 binary the tests attack (built without the race
// detector: the processes are the product, not the test).
var binPath string

func TestMain(m *testing.M) {
	os.Exit(testenv.MainWithMCPV2(m, "mcpv2-attack-bin-", false, &binPath, func() error {
		return goleak.Find(goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
	}))
}

// secret is the --secret of the nodes that share one.
const secret = "attack-test-shared-secret"

// proc is a running `mcpv2 node` (testenv.Proc) with this package's
// helpers; dataDir is its banner's MCPV2_DATA_DIR.
type proc struct {
	*testenv.Proc
	dataDir string
}

// first returns the banner's first value of key.
func (p *proc) first(key string) string { return p.First(key) }

// peerID is the node's PeerID.
func (p *proc) peerID() string { return p.first("MCPV2_PEER_ID") }

// base is the node's edge on loopback, "http://127.0.0.1:PORT".
func (p *proc) base() string { return "http://127.0.0.1:" + p.first("MCPV2_BOUND_PORT") }

// p2pAddr is the node's loopback multiaddr with /p2p/.
func (p *proc) p2pAddr(t *testing.T) string {
	t.Helper()
	for _, a := range p.Banner["MCPV2_P2P_ADDRESS"] {
		if strings.HasPrefix(a, "/ip4/127.0.0.1/") {
			return a
		}
	}
	t.Fatalf("no loopback P2P address in %v", p.Banner["MCPV2_P2P_ADDRESS"])
	return ""
}

// startNode runs `mcpv2 node` as a user starts it, with a fresh data dir
// (unless args name one: pass "--data-dir" first), a free P2P port, no
// mDNS and no NAT traversal (several run on one machine), and args; it
// waits for the banner. It is stopped when the test ends.
func startNode(t *testing.T, args ...string) *proc {
	t.Helper()
	dir := t.TempDir()
	if len(args) >= 2 && args[0] == "--data-dir" {
		dir, args = args[1], args[2:]
	}
	return startExact(t, nil, append([]string{"--data-dir", dir, "--p2p-port", "0", "--listen", "/ip4/127.0.0.1/tcp/0",
		"--no-mdns", "--no-nat"}, args...)...)
}

// startExact runs prefix (a command that runs another, as `ip netns exec
// NS`; none when empty) `mcpv2 node` with exactly args, and waits for its
// banner (testenv.StartProc). It is stopped when the test ends.
func startExact(t *testing.T, prefix []string, args ...string) *proc {
	t.Helper()
	p := testenv.StartProc(t, append(append(append([]string{}, prefix...), binPath, "node"), args...)...)
	return &proc{Proc: p, dataDir: p.First("MCPV2_DATA_DIR")}
}

// stop ends the node (SIGTERM, then SIGKILL after 10 s) and waits for it
// (testenv.Proc.Stop); a failed test gets its log when it ends.
func (p *proc) stop(*testing.T) { p.Stop() }

// anonSession takes an anonymous session from the node, as anyone may
// (waiting out the edge's per-IP issue rate).
func (p *proc) anonSession(t *testing.T) string {
	t.Helper()
	st, b := do(t, http.MethodGet, p.base()+"/mcpv2/session", nil, nil)
	for end := time.Now().Add(10 * time.Second); st == http.StatusTooManyRequests && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond) // the edge issues 20 a second to one IP
		st, b = do(t, http.MethodGet, p.base()+"/mcpv2/session", nil, nil)
	}
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if st != 200 || json.Unmarshal(b, &s) != nil || s.SessionID == "" {
		t.Fatalf("GET /mcpv2/session: %d %s", st, b)
	}
	return s.SessionID
}

// secretSession is a secret holder's session for a client on loopback,
// minted as mcpv2's own client mints it.
func secretSession() string {
	tok, _ := protocol.MintToken([]byte(secret), "127.0.0.1", time.Now(), time.Hour)
	return tok
}

// do sends one HTTP request (body: nil, []byte, string, or a value to
// encode as JSON) with the headers hdr and returns the status and body.
func do(t *testing.T, method, url string, hdr map[string]string, body any) (int, []byte) {
	t.Helper()
	st, b, err := tryDo(method, url, hdr, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return st, b
}

// tryDo is do returning the transport error.
func tryDo(method, url string, hdr map[string]string, body any) (int, []byte, error) {
	var r io.Reader
	switch v := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(v)
	case string:
		r = strings.NewReader(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b, err
}

// postFace POSTs body to url with the session tok as a bearer, as MCP and
// A2A clients do, and returns the status, headers and body (an SSE
// answer's data lines joined). A failure is t.Errorf and a zero status,
// so that the attacks' goroutines may call it.
func postFace(t *testing.T, url, tok, body string, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, nil, nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tok)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", url, err)
		return 0, nil, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var data bytes.Buffer
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				data.WriteString(strings.TrimSpace(d))
			}
		}
		b = data.Bytes()
	}
	return resp.StatusCode, resp.Header, b
}

// bearer is the Authorization header of tok.
func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

// rpcAnswer is one JSON-RPC answer.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// call runs one tools/call of skill with args at url (…/mcpv2 or
// …/mcpv2/peers/P) with the session tok; ctxSession, when set, is the
// slot's context.session. It returns the HTTP status and the answer.
func call(t *testing.T, url, tok, skill string, args any, ctxSession string) (int, rpcAnswer) {
	t.Helper()
	slot := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": skill, "arguments": args}}
	if ctxSession != "" {
		slot["context"] = map[string]any{"session": ctxSession}
	}
	st, b := do(t, http.MethodPost, url, bearer(tok), slot)
	var a rpcAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("POST %s: %d %s", url, st, b)
	}
	return st, a
}

// auditLines reads a node's audit log.
func auditLines(t *testing.T, dataDir string) []map[string]any { return testenv.AuditLines(t, dataDir) }

// waitFor polls cond every 50 ms until it holds or d passes (then the
// test fails with what). It is for state another process changes, which
// no event of this test's tells.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
