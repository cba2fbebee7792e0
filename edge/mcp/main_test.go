package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/edge/mcp"
	"github.com/mcpv2/mcpv2/node"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// libp2p and quic-go keep package-level workers alive for the process.
		goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		goleak.IgnoreTopFunction("github.com/libp2p/go-libp2p/p2p/transport/quicreuse.(*reuse).gc"),
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		// The go-sdk's HTTP client keeps idle connections of the default
		// transport; they end with the process.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}

// The two eras of MCP the face serves.
const (
	eraSessions  = "2025-11-25"
	eraStateless = "2026-07-28"
)

var eras = []string{eraSessions, eraStateless}

const secret = "mcp-face-test-secret"

// rig is a real node A with its HTTP edge and the MCP face mounted on it,
// and a second node B that A can reach over libp2p on loopback (it has no
// edge of its own).
type rig struct {
	a, b *node.Node
	face *mcp.Face
	edge *edge.Server
	url  string // http://127.0.0.1:port/mcp
}

func newRig(t *testing.T, mod func(*node.Config)) *rig {
	t.Helper()
	cfg := node.Config{DataDir: t.TempDir(), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Secret: []byte(secret)}
	if mod != nil {
		mod(&cfg)
	}
	a, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	// B shares A's secret, so A's secret holders reach all of B (SPEC §6).
	b, err := node.New(node.Config{DataDir: t.TempDir(), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Name: "bob", Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	a.Host().Peerstore().AddAddrs(b.ID(), b.Host().Addrs(), peerstore.PermanentAddrTTL)
	if err := a.Host().Connect(ctxT(t), peer.AddrInfo{ID: b.ID(), Addrs: b.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	e, err := edge.New(a, edge.Config{BindHost: "127.0.0.1", Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	f, err := mcp.New(a)
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	f.Mount(e, mcp.HTTPOptions{})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		f.Close()
	})
	return &rig{a: a, b: b, face: f, edge: e, url: "http://127.0.0.1:" + strconv.Itoa(e.BoundPort()) + mcp.Path}
}

// secretToken is a secret holder's edge session for a client on loopback.
func (r *rig) secretToken() string {
	tok, _ := r.edge.MintSession("127.0.0.1")
	return tok
}

// anonToken is an anonymous session from GET /mcpv2/session.
func (r *rig) anonToken(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(r.url, mcp.Path) + "/mcpv2/session")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || s.SessionID == "" {
		t.Fatalf("session: %v %+v", err, s)
	}
	return s.SessionID
}

// headerRT adds headers to every request.
type headerRT struct {
	h  http.Header
	rt http.RoundTripper
}

func (t headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return t.rt.RoundTrip(r)
}

// httpClient sends every request with the session token as a bearer token.
func httpClient(token string) *http.Client {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return &http.Client{Transport: headerRT{h: h, rt: http.DefaultTransport}}
}

// connect opens a go-sdk client session to url over streamable HTTP in era,
// and checks that era was negotiated.
func connect(t *testing.T, url, token, era string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "mcp-face-test", Version: "1"}, opts)
	cs, err := c.Connect(ctxT(t), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: httpClient(token), MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatalf("connect (%s): %v", era, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != era {
		t.Fatalf("negotiated %q, want %q", got, era)
	}
	return cs
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// auditLines reads n's audit log.
func auditLines(t *testing.T, n *node.Node) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(n.DataDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}
