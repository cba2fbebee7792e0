package attacktest

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// The attacks on issue 19's credentials, from the attacker's side, against
// real nodes: T (an edge, an API key made for someone) and P (a peer of
// T's mesh with no edge), which do not share a secret.

// credKey runs `mcpv2 key add NAME args…` on the data dir of the running
// node p, as its owner does, and returns the key.
func credKey(t *testing.T, p *proc, name string, args ...string) string {
	t.Helper()
	out, errs, code := testenv.Run(t, binPath, append([]string{"key", "add", name, "--data-dir", p.dataDir}, args...)...)
	if code != 0 {
		t.Fatalf("key add %s: %d %s", name, code, errs)
	}
	return strings.TrimSpace(out)
}

// TestAttackHandedKey: a key handed to someone else is theirs for what it
// grants and nothing more, on every endpoint and face, including through
// T to a peer (which sees a caller T forwards, never the key's grants);
// once revoked it is refused on every one of them at the next request.
func TestAttackHandedKey(t *testing.T) {
	p := startNode(t)
	tn := startNode(t, "--port", "0", "--public-ip", "127.0.0.1", "--bootstrap", p.p2pAddr(t))
	key := credKey(t, tn, "contractor", "--grant", "ask,upload_file")

	// What the key grants runs; what it does not is -32009, also through
	// the gateway: P grants T's forwarded callers nothing, whatever the key
	// may do on T.
	if st, a := call(t, tn.base()+"/mcpv2", key, "ask", map[string]any{"query": "hi"}, ""); st != 200 || a.Error != nil {
		t.Fatalf("the key's grant on T: %d %+v", st, a.Error)
	}
	if _, a := call(t, tn.base()+"/mcpv2", key, "delete_file", map[string]any{"filename": "x"}, ""); a.Error == nil || a.Error.Code != -32009 {
		t.Fatalf("a skill the key is not granted: %+v", a)
	}
	gw := tn.base() + "/mcpv2/peers/" + p.peerID()
	var a rpcAnswer
	waitFor(t, 30*time.Second, "T to reach P through the gateway", func() bool {
		_, a = call(t, gw, key, "upload_file", map[string]any{"filename": "k.txt", "content": "x"}, "")
		return a.Error == nil || a.Error.Code != -32004
	})
	if a.Error == nil || a.Error.Code != -32009 {
		t.Fatalf("the key's upload_file at P through T: %+v (P grants T's forwarded callers nothing)", a)
	}
	waitFor(t, 10*time.Second, "P's audit line of the forwarded call", func() bool {
		for _, l := range auditLines(t, p.dataDir) {
			if l["skill"] == "upload_file" && l["caller"] == "via:"+tn.peerID() && l["auth"] == "forwarded" {
				return true
			}
		}
		return false
	})
	for _, l := range auditLines(t, tn.dataDir) {
		if l["caller"] == "key:contractor" && l["auth"] != "key" {
			t.Errorf("T audits the key as %v: %v", l["auth"], l)
		}
	}

	// Revoked: refused at the next request on every endpoint and face.
	if _, errs, code := testenv.Run(t, binPath, "key", "revoke", "contractor", "--data-dir", tn.dataDir); code != 0 {
		t.Fatalf("revoke: %s", errs)
	}
	slot := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping"}}`
	for _, ep := range []struct{ method, path, body string }{
		{"POST", "/mcpv2", slot},
		{"POST", "/mcpv2/ai/openai", `{"model":"x","messages":[{"role":"user","content":"hi"}]}`},
		{"POST", "/mcpv2/peers/" + p.peerID(), slot},
		{"GET", "/mcpv2/find?skill=ping", ""},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`},
		{"POST", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`},
		{"POST", "/peers/" + p.peerID() + "/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
	} {
		var body any
		if ep.body != "" {
			body = ep.body
		}
		st, b := do(t, ep.method, tn.base()+ep.path, map[string]string{"Authorization": "Bearer " + key, "Accept": "application/json, text/event-stream"}, body)
		if st != http.StatusUnauthorized || !strings.Contains(string(b), "key revoked") {
			t.Errorf("%s %s with the revoked key: %d %.300s", ep.method, ep.path, st, b)
		}
	}
}

// TestAttackCredentialInput: the worst credentials a caller can send are
// refused with 401 and a reason, quickly, and the node serves on: a
// JWT-shaped token of a megabyte header, a key-shaped string that is no
// key, a JWT where no issuer is named, an Authorization header of 60 KiB,
// a session token with a thousand dots.
func TestAttackCredentialInput(t *testing.T) {
	tn := startNode(t, "--port", "0", "--public-ip", "127.0.0.1", "--oidc-issuer", "http://127.0.0.1:1/down",
		"--policy", testenv.PolicyFile(t, map[string][]string{"http": {"ping"}}))
	enc := base64.RawURLEncoding.EncodeToString
	jwt := func(head string) string { return enc([]byte(head)) + "." + enc([]byte(`{"iss":"x"}`)) + ".c2ln" }
	for name, tok := range map[string]string{
		"a 48 KiB JWT header":         jwt(`{"alg":"RS256","x":"` + strings.Repeat("A", 48<<10) + `"}`),
		"alg none":                    jwt(`{"alg":"none"}`),
		"an issuer not named":         enc([]byte(`{"alg":"RS256","kid":"k"}`)) + "." + enc([]byte(`{"iss":"https://evil.example","sub":"root","aud":"x","exp":9999999999}`)) + ".c2ln",
		"a key-shaped string":         "mcpv2_" + strings.Repeat("A", 43),
		"a key prefix and junk":       "mcpv2_../../etc/passwd",
		"a thousand dots":             strings.Repeat(".", 1000),
		"60 KiB of session-like junk": strings.Repeat("Zm9v", 15<<10),
	} {
		start := time.Now()
		st, b := do(t, http.MethodPost, tn.base()+"/mcp", map[string]string{"Authorization": "Bearer " + tok,
			"Accept": "application/json, text/event-stream"}, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if st != http.StatusUnauthorized && st != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%s: %d %.200s", name, st, b)
		}
		if st == http.StatusUnauthorized && !strings.Contains(string(b), `"reason"`) {
			t.Errorf("%s: a 401 without a reason: %.300s", name, b)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: refused after %s", name, d)
		}
	}
	// The down issuer is asked at most once in 10 s, whatever the tokens:
	// and the node serves on.
	if st, b := do(t, http.MethodGet, tn.base()+"/mcpv2/health", nil, nil); st != 200 || !strings.Contains(string(b), `"oidc_issuers":["http://127.0.0.1:1/down"]`) {
		t.Fatalf("health after the attack: %d %s", st, b)
	}
}
