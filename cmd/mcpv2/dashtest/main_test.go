package dashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// binPath is the mcpv2 binary the tests run (built without the race
// detector: the processes are the product, not the test).
var binPath string

func TestMain(m *testing.M) {
	os.Exit(testenv.MainWithMCPV2(m, "mcpv2-dashtest-bin-", false, &binPath, func() error {
		return goleak.Find(goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
	}))
}

// secret is the --secret of the nodes that share one: they are each
// other's secret holders, so the calls between them are granted.
const secret = "dashtest-shared-secret"

// cookiePrefix starts the dashboard's session cookie, mcpv2_ui_<PORT>.
const cookiePrefix = "mcpv2_ui_"

// proc is a running `mcpv2 node` (testenv.Proc) with this package's
// helpers.
type proc struct {
	*testenv.Proc
	dataDir string
}

// peerID is the node's PeerID.
func (p *proc) peerID() string { return p.First("MCPV2_PEER_ID") }

// p2pAddr is the node's loopback TCP multiaddr with /p2p/.
func (p *proc) p2pAddr(t *testing.T) string {
	t.Helper()
	for _, a := range p.Banner["MCPV2_P2P_ADDRESS"] {
		if strings.HasPrefix(a, "/ip4/127.0.0.1/tcp/") {
			return a
		}
	}
	t.Fatalf("no loopback TCP P2P address in %v", p.Banner["MCPV2_P2P_ADDRESS"])
	return ""
}

// link is the login link of the node's banner (MCPV2_UI).
func (p *proc) link(t *testing.T) string {
	t.Helper()
	l := p.First("MCPV2_UI")
	if l == "" {
		t.Fatalf("the banner has no MCPV2_UI line: %v", p.Banner)
	}
	return l
}

// ui is the dashboard's origin, "http://127.0.0.1:PORT", from the login
// link.
func (p *proc) ui(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(p.link(t))
	if err != nil || u.Scheme != "http" || u.Host == "" || u.Path != "/login" || u.Query().Get("token") == "" {
		t.Fatalf("MCPV2_UI=%s: want http://HOST:PORT/login?token=TOKEN (%v)", p.link(t), err)
	}
	return u.Scheme + "://" + u.Host
}

// host is the dashboard's host:port.
func (p *proc) host(t *testing.T) string { return strings.TrimPrefix(p.ui(t), "http://") }

// startNode runs `mcpv2 node` as a user starts it, with a fresh data dir,
// the shared --secret, loopback P2P only (no mDNS, no NAT traversal:
// several run on one machine), its dashboard on by default, and args; it
// waits for the banner. It is stopped when the test ends.
func startNode(t *testing.T, args ...string) *proc {
	t.Helper()
	p := testenv.StartProc(t, append([]string{binPath, "node", "--data-dir", t.TempDir(), "--p2p-port", "0",
		"--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-nat", "--secret", secret}, args...)...)
	return &proc{Proc: p, dataDir: p.First("MCPV2_DATA_DIR")}
}

// mcpv2 runs the mcpv2 CLI with args (a command that ends) and returns its
// stdout, stderr and exit code.
func mcpv2(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return testenv.Run(t, binPath, args...)
}

// noRedirect is a client that shows redirects instead of following them
// and keeps no cookies: each request carries exactly what the test gives.
var noRedirect = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// reply is one HTTP answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// send sends one request (body: nil, a string, or a value to encode as
// JSON) with the headers hdr ("Host" sets the Host header, "Cookie" the
// cookie as given) and returns the answer; a transport error fails t.
func send(t *testing.T, method, u string, hdr map[string]string, body any) reply {
	t.Helper()
	var r io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		t.Fatal(err)
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
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, u, err)
	}
	return reply{resp.StatusCode, resp.Header, b}
}

// login opens the login link as a browser would and returns the session
// cookie it sets, after checking the answer: 303 to /, and the cookie
// HttpOnly, SameSite=Strict, Path=/.
func login(t *testing.T, link string) *http.Cookie {
	t.Helper()
	r := send(t, http.MethodGet, link, nil, nil)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/" {
		t.Fatalf("GET the login link: %d Location=%q, want 303 to /\n%s", r.status, r.header.Get("Location"), r.body)
	}
	resp := http.Response{Header: r.header}
	for _, c := range resp.Cookies() {
		if !strings.HasPrefix(c.Name, cookiePrefix) {
			continue
		}
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Value == "" {
			t.Errorf("session cookie %q: want HttpOnly, SameSite=Strict, Path=/ and a value", r.header.Values("Set-Cookie"))
		}
		return c
	}
	t.Fatalf("the login link set no %s… cookie: %q", cookiePrefix, r.header.Values("Set-Cookie"))
	return nil
}

// withCookie is hdr (a new map) with the session cookie c.
func withCookie(c *http.Cookie, hdr map[string]string) map[string]string {
	out := map[string]string{"Cookie": c.Name + "=" + c.Value}
	for k, v := range hdr {
		out[k] = v
	}
	return out
}

// keyStatus maps the API keys of the node's data dir to their status
// ("active", "revoked", …) as its owner's CLI lists them (`mcpv2 key list
// --json`), so that a test sees what an attack changed without going
// through the dashboard it attacks.
func keyStatus(t *testing.T, p *proc) map[string]string {
	t.Helper()
	out, errOut, code := mcpv2(t, "key", "list", "--json", "--data-dir", p.dataDir)
	if code != 0 {
		t.Fatalf("mcpv2 key list: exit %d\n%s", code, errOut)
	}
	var keys []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &keys); err != nil {
		t.Fatalf("mcpv2 key list --json: %v\n%s", err, out)
	}
	m := map[string]string{}
	for _, k := range keys {
		m[k.Name] = k.Status
	}
	return m
}

// addKey adds an API key NAME to the node's data dir with the owner's CLI.
func addKey(t *testing.T, p *proc, name string) {
	t.Helper()
	if out, errOut, code := mcpv2(t, "key", "add", name, "--data-dir", p.dataDir); code != 0 {
		t.Fatalf("mcpv2 key add %s: exit %d\n%s\n%s", name, code, out, errOut)
	}
}

// waitFor polls cond every 50 ms until it holds or d passes (then t fails
// with what). It is for state another process changes, which no event of
// the test tells.
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
