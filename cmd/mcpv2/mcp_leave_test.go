package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPClientLeaves: an MCP HTTP client (the go-sdk's) that leaves, by
// closing its session (DELETE) or by going away (its connections cut, as
// when its process ends), leaves no session behind, and the uploads after
// it log no "list_changed: rejected by transport" (issue 26, item 8: three
// WARN lines per upload, the session kept until shutdown).
func TestMCPClientLeaves(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "policy.json"), `{"grants": {"http": ["upload_file"]}}`)
	port := edgeFreePort(t, "127.0.0.1")
	ap := startEdgeProc(t, "A", nil, "--data-dir", dir, "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mesh", "--no-mdns", "--no-nat",
		"--port", strconv.Itoa(port), "--public-ip", "127.0.0.1", "--metrics", "127.0.0.1:0")
	metricsURL := ap.first("MCPV2_METRICS")
	a := newEdgePeer(t, "A", ap)
	a.client = edgeHTTPClient(t, "", nil)
	tok := a.anonSession(t, a.client).SessionID

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	upload := func(name string) {
		t.Helper()
		var up struct {
			Filename string `json:"filename"`
		}
		a.mustCall(t, tok, "upload_file", map[string]any{"filename": name, "content": "hello\n"}, &up)
	}
	connect := func() (*sdk.ClientSession, *connSet) {
		t.Helper()
		conns := &connSet{}
		tr := &http.Transport{DisableCompression: true, DialContext: conns.dial}
		t.Cleanup(tr.CloseIdleConnections)
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "leaver", Version: "1"}, nil).Connect(ctx,
			&sdk.StreamableClientTransport{Endpoint: a.base + "/mcp", HTTPClient: &http.Client{Transport: bearer{tok: tok, base: tr}}},
			&sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("mcp connect: %v", err)
		}
		if _, err := cs.ListResources(ctx, nil); err != nil {
			t.Fatalf("mcp resources/list: %v", err)
		}
		return cs, conns
	}
	waitSessions := func(want int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			got := scrapeGauge(t, metricsURL, "mcpv2_mcp_sessions")
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("mcpv2_mcp_sessions = %d, want %d", got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// A client that closes its session.
	cs, _ := connect()
	waitSessions(1)
	upload("while-there.txt") // a notification it takes
	if err := cs.Close(); err != nil {
		t.Fatalf("mcp close: %v", err)
	}
	waitSessions(0)
	upload("after-close.txt")

	// A client that goes away without a word: its connections cut.
	gone, conns := connect()
	t.Cleanup(func() { _ = gone.Close() }) // its goroutines; the DELETE cannot leave
	waitSessions(1)
	conns.cut()
	time.Sleep(500 * time.Millisecond)
	upload("while-gone.txt") // its session is still there, with no stream to take the notification
	time.Sleep(500 * time.Millisecond)
	waitSessions(0)
	upload("after-gone-1.txt")
	upload("after-gone-2.txt")
	time.Sleep(2 * time.Second) // the go-sdk sends list_changed after a delay

	if log := ap.stderr(); strings.Contains(log, "rejected by transport") || strings.Contains(log, "list_changed") {
		t.Errorf("node log warns of a gone MCP client:\n%s", log)
	}
}

// connSet dials and keeps the connections of one client, to cut them
// all at once without a DELETE: what the client's process's end does.
type connSet struct {
	mu    sync.Mutex
	conns []net.Conn
	dead  bool // cut: no more dials (the go-sdk client would reconnect)
}

func (s *connSet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return nil, errors.New("the client is gone")
	}
	c, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
	if err == nil {
		s.conns = append(s.conns, c)
	}
	return c, err
}

func (s *connSet) cut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dead = true
	for _, c := range s.conns {
		_ = c.Close()
	}
}

// scrapeGauge reads one unlabelled gauge from the node's /metrics at u.
func scrapeGauge(t *testing.T, u, name string) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %q", name, line)
			}
			return int(n)
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}
