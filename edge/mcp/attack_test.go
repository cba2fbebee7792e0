package mcp_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/edge/mcp"
)

// post sends one raw JSON-RPC body to the face and returns the status and
// the body (an SSE answer's data line, or JSON).
func post(t *testing.T, url string, hdr map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, string(b)
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"attacker","version":"1"}}}`

// TestFaceWhoMayCall is written from the attacker's side: no session, an
// anonymous session reaching for what only grants allow, a session ID
// taken from another caller, a page rebinding its DNS name, and bodies too
// large or malformed. Each is refused with a clear error and the node goes
// on serving.
func TestFaceWhoMayCall(t *testing.T) {
	r := newRig(t, nil)

	t.Run("no credential is an anonymous caller", func(t *testing.T) {
		status, _, body := post(t, r.url, nil, initBody)
		if status != http.StatusOK || !strings.Contains(body, `"serverInfo"`) {
			t.Fatalf("status %d body %s", status, body)
		}
	})

	t.Run("a bad credential", func(t *testing.T) {
		status, hdr, body := post(t, r.url, map[string]string{"Authorization": "Bearer not-a-token"}, initBody)
		if status != http.StatusUnauthorized || !strings.Contains(body, "-32001") || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer ") ||
			!strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Fatalf("status %d WWW-Authenticate %q body %s", status, hdr.Get("WWW-Authenticate"), body)
		}
	})

	t.Run("anonymous session gets only the open skills", func(t *testing.T) {
		cs := connect(t, r.url, r.anonToken(t), eraSessions, nil)
		if res, sc := callTool(t, cs, "ping", map[string]any{}); res.IsError {
			t.Fatalf("ping is open: %v", sc)
		}
		res, sc := callTool(t, cs, "upload_file", map[string]any{"filename": "x.txt", "content": "x"})
		if !res.IsError || errCode(sc) != -32009 {
			t.Fatalf("anonymous upload: %v", sc)
		}
		// A forward carries the caller's grants on this node, never more.
		res, sc = callTool(t, cs, mcp.ToolMeshCall, map[string]any{"peer": r.b.ID().String(), "skill": "upload_file",
			"arguments": map[string]any{"filename": "x.txt", "content": "x"}})
		if !res.IsError || errCode(sc) != -32009 {
			t.Fatalf("anonymous mesh_call upload_file: %v", sc)
		}
		if _, err := r.a.Store().Files().Write("secret.txt", strings.NewReader("s3cr3t")); err != nil {
			t.Fatal(err)
		}
		lr, err := cs.ListResources(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range lr.Resources {
			if strings.Contains(res.URI, "secret.txt") {
				t.Fatalf("an anonymous session sees the files: %+v", res)
			}
		}
		if _, err := cs.ReadResource(ctxT(t), &sdk.ReadResourceParams{URI: mcp.FilesURI + "/secret.txt"}); err == nil || !strings.Contains(err.Error(), "-32009") && !strings.Contains(err.Error(), "not permitted") {
			t.Fatalf("anonymous read of a file: %v", err)
		}
	})

	t.Run("another caller's session ID", func(t *testing.T) {
		status, hdr, body := post(t, r.url, map[string]string{"Authorization": "Bearer " + r.secretToken()}, initBody)
		sid := hdr.Get("Mcp-Session-Id")
		if status != http.StatusOK || sid == "" {
			t.Fatalf("secret holder's initialize: %d %s", status, body)
		}
		status, _, body = post(t, r.url, map[string]string{"Authorization": "Bearer " + r.anonToken(t), "Mcp-Session-Id": sid},
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"upload_file","arguments":{"filename":"pwn.txt","content":"x"}}}`)
		if status != http.StatusForbidden {
			t.Fatalf("an anonymous caller used the secret holder's session: %d %s", status, body)
		}
	})

	t.Run("DNS rebinding", func(t *testing.T) {
		tok := "Bearer " + r.secretToken()
		for _, h := range []map[string]string{
			{"Authorization": tok, "Host": "evil.example.com"},
			{"Authorization": tok, "Origin": "http://evil.example.com"},
			{"Host": "evil.example.com:80", "Origin": "http://evil.example.com"},
		} {
			status, _, body := post(t, r.url, h, initBody)
			if status != http.StatusForbidden || !strings.Contains(body, "DNS rebinding") {
				t.Fatalf("%v: status %d body %s", h, status, body)
			}
		}
		if status, _, body := post(t, r.url, map[string]string{"Authorization": tok, "Origin": strings.TrimSuffix(r.url, mcp.Path)}, initBody); status != http.StatusOK {
			t.Fatalf("the edge's own origin: %d %s", status, body)
		}
	})

	t.Run("bad bodies", func(t *testing.T) {
		tok := map[string]string{"Authorization": "Bearer " + r.secretToken()}
		status, _, body := post(t, r.url, tok, `{"jsonrpc":"2.0","id":1,"method":`)
		if status != http.StatusBadRequest {
			t.Fatalf("malformed JSON: %d %s", status, body)
		}
		big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 9<<20) + `"}}`
		status, _, body = post(t, r.url, tok, big)
		if status != http.StatusRequestEntityTooLarge {
			t.Fatalf("9 MiB body: %d %.200s", status, body)
		}
		// A 2026-07-28 request to an unknown method: a JSON-RPC error.
		req, _ := http.NewRequest(http.MethodPost, r.url, bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/frobnicate","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", eraStateless)
		req.Header.Set("Mcp-Method", "tools/frobnicate")
		req.Header.Set("Authorization", "Bearer "+r.secretToken())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "-32601") {
			t.Fatalf("unknown method: %d %s", resp.StatusCode, b)
		}
	})

	// The node serves on: a secret holder's session works after all that.
	cs := connect(t, r.url, r.secretToken(), eraStateless, nil)
	if res, sc := callTool(t, cs, "ping", map[string]any{}); res.IsError {
		t.Fatalf("after the attacks: %v", sc)
	}
	// Every refusal was audited.
	var refused int
	for _, l := range auditLines(t, r.a) {
		if l["outcome"] == "error" && strings.HasPrefix(l["method"].(string), "http ") {
			refused++
		}
	}
	if refused < 5 {
		t.Errorf("%d edge refusals audited, want each of them", refused)
	}
}
