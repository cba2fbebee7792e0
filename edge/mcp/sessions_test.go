package mcp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/edge/mcp"
	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
)

// TestSessionsListAndClose: Sessions lists a stateful session with its
// owner, the one used last first; CloseSession ends it, and its client's
// next call fails; an unknown id is ErrNoSession.
func TestSessionsListAndClose(t *testing.T) {
	n, err := node.New(node.Config{DataDir: t.TempDir(), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	e, err := edge.New(n, edge.Config{BindHost: "127.0.0.1", Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	f, err := mcp.New(n)
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	if got := f.Sessions(); len(got) != 0 {
		t.Fatalf("sessions before Mount: %v", got)
	}
	f.Mount(e, mcp.HTTPOptions{})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); f.Close() })
	url := "http://127.0.0.1:" + strconv.Itoa(e.BoundPort()) + mcp.Path
	tok, _ := e.MintSession("127.0.0.1")

	one := connect(t, url, tok, eraSessions, nil)
	two := connect(t, url, tok, eraSessions, nil)
	if _, err := one.CallTool(ctxT(t), &sdk.CallToolParams{Name: "ping", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	got := f.Sessions() // (each client's standing event stream is a request too: either may be the last used)
	ids := map[string]bool{}
	for _, s := range got {
		ids[s.ID] = true
		if s.Owner != "secret" || !s.Privileged || s.Started.IsZero() || s.LastUsed.Before(s.Started) {
			t.Errorf("session %+v: want the secret holder's, used at or after its start", s)
		}
	}
	if len(got) != 2 || !ids[one.ID()] || !ids[two.ID()] || got[0].LastUsed.Before(got[1].LastUsed) {
		t.Fatalf("sessions %+v, want %s and %s, the one used last first", got, one.ID(), two.ID())
	}
	if err := f.CloseSession(one.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := one.CallTool(ctxT(t), &sdk.CallToolParams{Name: "ping", Arguments: map[string]any{}}); err == nil {
		t.Fatal("a call on an ended session succeeded")
	}
	if got := f.Sessions(); len(got) != 1 || got[0].ID != two.ID() {
		t.Fatalf("sessions after closing one: %+v", got)
	}
	if err := f.CloseSession("nope"); !errors.Is(err, mcp.ErrNoSession) {
		t.Fatalf("CloseSession(unknown): %v", err)
	}
}

// sessionsRig is a node with its edge and a face mounted with o.
func sessionsRig(t *testing.T, o mcp.HTTPOptions) (f *mcp.Face, e *edge.Server, url string) {
	t.Helper()
	n, err := node.New(node.Config{DataDir: t.TempDir(), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	e, err = edge.New(n, edge.Config{BindHost: "127.0.0.1", Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	f, err = mcp.New(n)
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	f.Mount(e, o)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); f.Close() })
	return f, e, "http://127.0.0.1:" + strconv.Itoa(e.BoundPort()) + mcp.Path
}

// waitSessionCount waits until f holds want sessions.
func waitSessionCount(t *testing.T, f *mcp.Face, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(f.Sessions()) != want {
		if time.Now().After(deadline) {
			t.Fatalf("sessions %+v, want %d", f.Sessions(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSessionClientGone: the session of a client whose connections are
// cut (its standing stream with them) is closed HTTPOptions.ClientGone
// later; one whose client stays is kept.
func TestSessionClientGone(t *testing.T) {
	f, e, url := sessionsRig(t, mcp.HTTPOptions{ClientGone: 100 * time.Millisecond})
	tok, _ := e.MintSession("127.0.0.1")
	stays := connect(t, url, tok, eraSessions, nil)

	conns := &testenv.CutDialer{}
	tr := &http.Transport{DialContext: conns.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	h := http.Header{"Authorization": {"Bearer " + tok}}
	leaver, err := sdk.NewClient(&sdk.Implementation{Name: "leaver", Version: "1"}, nil).Connect(ctxT(t),
		&sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: headerRT{h: h, rt: tr}}, MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: eraSessions})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = leaver.Close() })
	waitSessionCount(t, f, 2)
	conns.Cut()
	waitSessionCount(t, f, 1)
	if got := f.Sessions(); got[0].ID != stays.ID() {
		t.Fatalf("sessions %+v, want only %s", got, stays.ID())
	}
	if _, err := stays.CallTool(ctxT(t), &sdk.CallToolParams{Name: "ping", Arguments: map[string]any{}}); err != nil {
		t.Fatalf("the session that stayed: %v", err)
	}
}

// TestSessionForeignStreamCut: a GET naming another holder's session,
// whose client is gone by the time it is answered, is refused (403) and
// neither marks the session used nor closes it ClientGone later (review
// 26 §3: it armed the close of the victim's session).
func TestSessionForeignStreamCut(t *testing.T) {
	const gone = 50 * time.Millisecond
	f, e, url := sessionsRig(t, mcp.HTTPOptions{ClientGone: gone})
	tok, _ := e.MintSession("127.0.0.1")
	// The victim: a session with no standing stream, idle.
	post := func(sid, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", eraSessions)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+eraSessions+`","capabilities":{},"clientInfo":{"name":"victim","version":"1"}}}`)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %s, session %q", resp.Status, id)
	}
	if resp := post(id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %s", resp.Status)
	}
	before := f.Sessions()
	if len(before) != 1 || before[0].ID != id {
		t.Fatalf("sessions %+v, want %s", before, id)
	}

	// Another holder's GET, its connection already cut.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, mcp.Path, nil)
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", eraSessions)
	req.Header.Set("Accept", "text/event-stream")
	other := protocol.Caller{ID: "ip:127.0.0.1", Via: "mcp", Kind: protocol.CallerAnonymous, Owner: "session:other"}
	if status := f.ServeStateful(httptest.NewRecorder(), req, other); status != http.StatusForbidden {
		t.Fatalf("another holder's GET: %d, want 403", status)
	}

	time.Sleep(10 * gone) // past ClientGone: nothing may happen
	after := f.Sessions()
	if len(after) != 1 || after[0].ID != id {
		t.Fatalf("another holder's cut GET closed the session: %+v", after)
	}
	if !after[0].LastUsed.Equal(before[0].LastUsed) || after[0].InFlight != 0 {
		t.Fatalf("another holder's GET marked the session used: %+v, was %+v", after[0], before[0])
	}
	if resp := post(id, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("the victim's next request: %s", resp.Status)
	}
}
