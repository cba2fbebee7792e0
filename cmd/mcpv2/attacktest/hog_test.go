package attacktest

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// hogInit opens a 2025-11-25 MCP session at url for tok and returns its id
// and the HTTP status.
func hogInit(t *testing.T, url, tok string) (int, string) {
	t.Helper()
	st, sid, _ := idMCP(t, http.MethodPost, url, tok, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "hog", "version": "1"}}})
	if st == http.StatusOK && sid != "" {
		idMCP(t, http.MethodPost, url, tok, sid, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	}
	return st, sid
}

// hogStream opens the standing event stream (GET) of session sid and
// leaves it open until the test ends; it returns the status.
func hogStream(t *testing.T, url, tok, sid string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return resp.StatusCode
}

// TestAttackSessionAndStreamHog is item 6's session and stream caps: one
// anonymous client, minting as many anonymous sessions as the edge issues,
// took every standing event stream and every MCP session, and the node's
// secret holder got 503. Now a credential and an IP without the secret
// have caps of their own, a share stays for secret holders, and a
// credential at its cap gives up its own oldest idle session.
func TestAttackSessionAndStreamHog(t *testing.T) {
	tn := startNode(t, "--port", "0", "--public-ip", "127.0.0.1", "--secret", secret)
	url := tn.base() + "/mcp"

	// Standing streams: each anonymous token opens sessions and their
	// streams until the edge says no.
	opened, refusedAt := 0, 0
	for i := 0; i < 12 && refusedAt == 0; i++ {
		tok := tn.anonSession(t)
		for j := 0; j < 4; j++ {
			st, sid := hogInit(t, url, tok)
			if st != http.StatusOK {
				refusedAt = opened
				break
			}
			if hogStream(t, url, tok, sid) != http.StatusOK {
				refusedAt = opened
				break
			}
			opened++
		}
	}
	t.Logf("anonymous standing streams opened before a refusal: %d", opened)
	st, sid := hogInit(t, url, secretSession())
	if st != http.StatusOK {
		t.Fatalf("the secret holder's initialize after the anonymous streams: %d", st)
	}
	if st := hogStream(t, url, secretSession(), sid); st != http.StatusOK {
		t.Errorf("the secret holder's event stream after an anonymous client took %d: HTTP %d", opened, st)
	}

	// Sessions: anonymous initializes until refused, many tokens.
	made := 0
	deadline := time.Now().Add(60 * time.Second)
	for made < 1100 && time.Now().Before(deadline) {
		tok := tn.anonSession(t)
		refused := false
		for j := 0; j < 16; j++ {
			if st, _ := hogInit(t, url, tok); st != http.StatusOK {
				refused = true
				break
			}
			made++
		}
		if refused {
			break
		}
	}
	t.Logf("anonymous MCP sessions made before a refusal: %d", made)
	if st, _ := hogInit(t, url, secretSession()); st != http.StatusOK {
		t.Errorf("the secret holder's initialize after %d anonymous sessions: HTTP %d", made, st)
	}

	// A credential at its cap gives up its own oldest idle session (the
	// landed binary had no such cap: its 17 sessions all stay).
	tn2 := startNode(t, "--port", "0", "--public-ip", "127.0.0.1", "--secret", secret)
	url2 := tn2.base() + "/mcp"
	tok := tn2.anonSession(t)
	var first string
	for i := 0; i < 17; i++ {
		st, sid := hogInit(t, url2, tok)
		if st != http.StatusOK {
			t.Fatalf("session %d of one credential: HTTP %d", i+1, st)
		}
		if i == 0 {
			first = sid
		}
	}
	if st, _, _ := idMCP(t, http.MethodPost, url2, tok, first, map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/list"}); st != http.StatusNotFound {
		t.Errorf("the credential's oldest idle session after its 17th: HTTP %d, want 404 (closed)", st)
	}
}
