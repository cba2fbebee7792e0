package mcp_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/edge/mcp"
)

// TestSubscriptionCaps: a subscription names a resource the caller may
// read, in at most 1 KiB; a session holds at most 64; they go with the
// session.
func TestSubscriptionCaps(t *testing.T) {
	r := newRig(t, nil)
	code := func(err error) int64 {
		var w *jsonrpc.Error
		if errors.As(err, &w) {
			return w.Code
		}
		return 0
	}
	sub := func(cs *sdk.ClientSession, uri string) error {
		return cs.Subscribe(ctxT(t), &sdk.SubscribeParams{URI: uri})
	}
	// An anonymous session may subscribe to the card, not to what it may
	// not read.
	anon := connect(t, r.url, r.anonToken(t), eraSessions, nil)
	if err := sub(anon, mcp.CardURI); err != nil {
		t.Fatalf("the card: %v", err)
	}
	for _, uri := range []string{mcp.FilesURI, mcp.FilesURI + "/a.txt"} {
		if err := sub(anon, uri); code(err) != -32009 {
			t.Fatalf("anonymous subscription to %s: %v", uri, err)
		}
	}
	long := mcp.FilesURI + "/" + strings.Repeat("a", 2000)
	if err := sub(anon, long); code(err) != -32602 || !strings.Contains(err.Error(), "1 KiB") || len(err.Error()) > 1000 {
		t.Fatalf("a 2 KiB URI: %v", err)
	}
	for _, uri := range []string{mcp.AgentsURI + "/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN", "file:///etc/passwd", mcp.FilesURI + "/%61.txt"} {
		if err := sub(anon, uri); err == nil {
			t.Fatalf("subscribed to %s", uri)
		}
	}
	// A secret holder: 64 at most, the same one twice counts once.
	cs := connect(t, r.url, r.secretToken(), eraSessions, nil)
	for i := range mcp.MaxSubscriptions {
		if err := sub(cs, fmt.Sprintf("%s/f%d.txt", mcp.FilesURI, i)); err != nil {
			t.Fatalf("subscription %d: %v", i, err)
		}
	}
	if err := sub(cs, mcp.FilesURI+"/f0.txt"); err != nil {
		t.Fatalf("the same again: %v", err)
	}
	if err := sub(cs, mcp.FilesURI+"/one-more.txt"); code(err) != -32602 || !strings.Contains(err.Error(), "64") {
		t.Fatalf("a 65th: %v", err)
	}
	if err := cs.Unsubscribe(ctxT(t), &sdk.UnsubscribeParams{URI: mcp.FilesURI + "/f0.txt"}); err != nil {
		t.Fatal(err)
	}
	if err := sub(cs, mcp.FilesURI+"/one-more.txt"); err != nil {
		t.Fatalf("after an unsubscribe: %v", err)
	}
	if s, n := r.face.Subscriptions(); s != 2 || n != 65 {
		t.Fatalf("%d sessions hold %d subscriptions, want 2 and 65", s, n)
	}
	// They go with their sessions.
	cs.Close()
	anon.Close()
	deadline := time.Now().Add(10 * time.Second)
	for s, n := r.face.Subscriptions(); s+n > 0; s, n = r.face.Subscriptions() {
		if time.Now().After(deadline) {
			t.Fatalf("%d subscriptions of %d ended sessions are kept", n, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClipLogger: what the go-sdk logs of a client's strings is clipped.
func TestClipLogger(t *testing.T) {
	var buf bytes.Buffer
	l := mcp.ClipLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	big := strings.Repeat("u", 1<<20)
	l.With("k", big).Info("resource subscribed", "uri", big, slog.Group("g", "v", big), "n", 3)
	if buf.Len() > 2000 || !strings.Contains(buf.String(), "n=3") || !strings.Contains(buf.String(), "g.v=") {
		t.Fatalf("%d bytes logged: %.300s", buf.Len(), buf.String())
	}
}

// TestSubscriptionStateless: in MCP 2026-07-28 a subscription is a
// subscriptions/listen stream; it runs as the caller of its request (a
// secret holder may subscribe to a file) and ends with the stream.
func TestSubscriptionStateless(t *testing.T) {
	r := newRig(t, nil)
	cs := connect(t, r.url, r.secretToken(), eraStateless, nil)
	uri := mcp.FilesURI + "/later.txt"
	if err := cs.Subscribe(ctxT(t), &sdk.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	wait := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for _, n := r.face.Subscriptions(); n != want; _, n = r.face.Subscriptions() {
			if time.Now().After(deadline) {
				t.Fatalf("the face holds %d subscriptions, want %d", n, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wait(1)
	if err := cs.Unsubscribe(ctxT(t), &sdk.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	wait(0)
}
