//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// readmeServer is an MCP server entry of a host's configuration, as the
// README shows it (Cursor and Claude Code: mcpServers; VS Code: servers).
type readmeServer struct {
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// readmeServers returns the remote server entries of README.md's json
// blocks, each with the line it starts on.
func readmeServers(t *testing.T) map[int]readmeServer {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]readmeServer{}
	block := regexp.MustCompile("(?s)```json\n(.*?)```")
	for _, m := range block.FindAllSubmatchIndex(src, -1) {
		var cfg struct {
			MCPServers map[string]readmeServer `json:"mcpServers"`
			Servers    map[string]readmeServer `json:"servers"`
		}
		if json.Unmarshal(src[m[2]:m[3]], &cfg) != nil {
			continue
		}
		line := 1 + strings.Count(string(src[:m[0]]), "\n")
		for _, s := range cfg.MCPServers {
			if s.URL != "" {
				out[line] = s
			}
		}
		for _, s := range cfg.Servers {
			if s.URL != "" {
				out[line] = s
			}
		}
	}
	return out
}

// headerTransport adds an entry's headers to every request, as an MCP host
// sends them.
type headerTransport struct {
	h  map[string]string
	rt http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header.Set(k, v)
	}
	return t.rt.RoundTrip(r)
}

// TestREADMEMCPServers runs the README's remote MCP server entries (Cursor,
// Claude Code, VS Code) as those hosts read them: the URL pointed at a
// running node, ${MCPV2_KEY} and ${input:…} filled in with a key that
// `mcpv2 key add` made, and the headers sent on every request by the
// go-sdk's streamable client. A key entry runs the key's granted skill;
// the OAuth entry, with only the URL, gets the node's 401 challenge
// naming its protected-resource metadata (cmd/mcpv2/oauthtest logs in
// with it).
func TestREADMEMCPServers(t *testing.T) {
	servers := readmeServers(t)
	if len(servers) < 3 {
		t.Fatalf("README.md shows %d remote MCP server entries, want the key ones (Cursor/Claude Code, VS Code) and the OAuth one", len(servers))
	}
	port := testenv.FreePort(t)
	dir := t.TempDir()
	startNode(t, dir, "--port", fmt.Sprint(port), "--public-ip", "127.0.0.1", "--no-mesh",
		"--oidc-issuer", "http://127.0.0.1:1/unused") // an issuer, and no "http" grants: tokenless is 401
	key, errs, code := run(t, "key", "add", "readme", "--grant", "translate_history", "--data-dir", dir)
	if code != 0 {
		t.Fatalf("key add: %d %s", code, errs)
	}
	key = strings.TrimSpace(key)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	expand := strings.NewReplacer("${MCPV2_KEY}", key, "${input:mcpv2-key}", key)
	for line, s := range servers {
		t.Run(fmt.Sprintf("README.md:%d", line), func(t *testing.T) {
			u, err := url.Parse(s.URL)
			if err != nil || u.Path != "/mcp" || (s.Type != "" && s.Type != "http") {
				t.Fatalf("entry %+v: want an http server whose URL ends in /mcp", s)
			}
			endpoint := base + u.Path
			h := map[string]string{}
			for k, v := range s.Headers {
				h[k] = expand.Replace(v)
			}
			if len(h) == 0 { // the OAuth entry: the 401 tells the client where to log in
				resp, err := http.Post(endpoint, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				want := `resource_metadata="` + base + `/.well-known/oauth-protected-resource/mcp"`
				if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), want) {
					t.Fatalf("URL only: %d %q, want 401 naming %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want)
				}
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			hc := &http.Client{Transport: headerTransport{h: h, rt: http.DefaultTransport}}
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "readme", Version: "1"}, nil).
				Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
			if err != nil {
				t.Fatalf("connect with the entry's headers: %v", err)
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "translate_history", Arguments: map[string]any{
				"from": "openai", "to": "claude", "history": []any{map[string]any{"role": "user", "content": "hi"}}}})
			if err != nil || res.IsError {
				t.Fatalf("the key's granted skill: %v %+v", err, res)
			}
			res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "upload_file", Arguments: map[string]any{"filename": "x.txt", "content": "x"}})
			if err != nil || !res.IsError {
				t.Fatalf("a skill the key is not granted: %v %+v", err, res)
			}
		})
	}
}
