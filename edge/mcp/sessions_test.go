package mcp_test

import (
	"errors"
	"strconv"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/edge/mcp"
	"github.com/mcpv2/mcpv2/node"
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
