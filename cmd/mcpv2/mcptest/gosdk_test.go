package mcptest

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

var eras = []string{"2025-11-25", "2026-07-28"}

const secret = "mcptest-shared-secret"

// exercise runs what every transport must do for a client: list the tools
// (every standard skill with its schema, and the mesh tools), call ping
// and ask, get an isError result for a bad argument, store a file and read
// it back as a resource, render a prompt, and (when peer is set) call
// ping on that peer of the mesh through mesh_call.
func exercise(t *testing.T, cs *sdk.ClientSession, peer string) {
	t.Helper()
	ctx := ctxT(t)
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"ping", "ask", "upload_file", "list_files", "read_file", "translate_history", "mesh_find", "mesh_call"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools/list lacks %s: %v", want, names)
		}
	}
	call := func(name string, args any) (*sdk.CallToolResult, string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("tools/call %s: %v", name, err)
		}
		b, _ := json.Marshal(res.StructuredContent)
		return res, string(b)
	}
	if res, sc := call("ping", map[string]any{"payload": "p"}); res.IsError || !strings.Contains(sc, `"pong":true`) {
		t.Fatalf("ping: %s", sc)
	}
	if res, sc := call("ask", map[string]any{"query": "hello?"}); res.IsError || !strings.Contains(sc, `"response"`) {
		t.Fatalf("ask: %s", sc)
	}
	if res, sc := call("ping", map[string]any{"nope": 1}); !res.IsError || !strings.Contains(sc, "-32602") {
		t.Fatalf("bad argument: isError=%v %s", res.IsError, sc)
	}
	if res, sc := call("upload_file", map[string]any{"filename": "readme.md", "content": "# Hello\n"}); res.IsError {
		t.Fatalf("upload: %s", sc)
	}
	rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "mcpv2://files/readme.md"})
	if err != nil || rr.Contents[0].Text != "# Hello\n" || !strings.HasPrefix(rr.Contents[0].MIMEType, "text/markdown") {
		t.Fatalf("read resource: %v %+v", err, rr)
	}
	gp, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "analyze", Arguments: map[string]string{"content": "Great day!", "focus": "sentiment"}})
	if err != nil || !strings.Contains(gp.Messages[0].Content.(*sdk.TextContent).Text, "sentiment") {
		t.Fatalf("prompt: %v %+v", err, gp)
	}
	if peer != "" {
		if res, sc := call("mesh_call", map[string]any{"peer": peer, "skill": "ping", "arguments": map[string]any{}}); res.IsError || !strings.Contains(sc, peer) {
			t.Fatalf("mesh_call ping %s: %s", peer, sc)
		}
	}
}

func connect(t *testing.T, tr sdk.Transport, era string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "mcptest", Version: "1"}, nil)
	cs, err := c.Connect(ctxT(t), tr, &sdk.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatalf("connect (%s): %v", era, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != era {
		t.Fatalf("negotiated %s, want %s", got, era)
	}
	return cs
}

// TestGoSDKStdio runs `mcpv2 mcp` as an MCP host runs it, under the go-sdk's
// CommandTransport, in both eras: a full node of its own, with only MCP on
// stdout. The node joins the mesh of a running node B (--bootstrap), and
// mesh_call reaches B.
func TestGoSDKStdio(t *testing.T) {
	b := startNode(t, "--secret", secret)
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			cmd := exec.Command(binPath, "mcp", "--data-dir", t.TempDir(), "--secret", secret, "--bootstrap", b.first("MCPV2_P2P_ADDRESS"))
			cmd.Env = testenv.CleanEnv()
			stderr := &testenv.Buffer{}
			cmd.Stderr = stderr
			cs := connect(t, &sdk.CommandTransport{Command: cmd}, era)
			exercise(t, cs, b.first("MCPV2_PEER_ID"))
			if err := cs.Close(); err != nil {
				t.Logf("close: %v", err)
			}
			if !strings.Contains(stderr.String(), "MCPV2_PEER_ID=") || !strings.Contains(stderr.String(), "serving MCP on stdio") {
				t.Errorf("the banner and logs belong on stderr:\n%s", stderr.String())
			}
		})
	}
}

// TestGoSDKStdioConnect: `mcpv2 mcp --connect` fronts a running node through
// its edge, as a secret holder; the files it stores land in that node.
func TestGoSDKStdioConnect(t *testing.T) {
	b := startNode(t, "--secret", secret)
	a := startNode(t, "--port", "0", "--secret", secret, "--bootstrap", b.first("MCPV2_P2P_ADDRESS"))
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			cmd := exec.Command(binPath, "mcp", "--connect", "mcpv2://127.0.0.1:"+a.first("MCPV2_BOUND_PORT")+"/mcpv2", "--secret", secret)
			cmd.Env = testenv.CleanEnv()
			cmd.Stderr = &testenv.Buffer{}
			cs := connect(t, &sdk.CommandTransport{Command: cmd}, era)
			exercise(t, cs, b.first("MCPV2_PEER_ID"))
		})
	}
}

// TestGoSDKStreamableHTTP drives a node's /mcp with the go-sdk's
// StreamableClientTransport in both eras: as a user configures a client,
// with only the URL (the node's policy grants "http" every skill), and as a
// secret holder.
func TestGoSDKStreamableHTTP(t *testing.T) {
	b := startNode(t, "--secret", secret)
	a := startNodeWithPolicy(t, grantHTTPAll, "--port", "0", "--secret", secret, "--bootstrap", b.first("MCPV2_P2P_ADDRESS"))
	for _, era := range eras {
		for _, c := range []struct {
			name string
			hc   *http.Client
		}{
			{"url-only", nil},
			{"secret-holder", &http.Client{Transport: bearer{tok: secretSession(secret)}}},
		} {
			t.Run(era+"/"+c.name, func(t *testing.T) {
				cs := connect(t, &sdk.StreamableClientTransport{Endpoint: a.mcpURL(), HTTPClient: c.hc, MaxRetries: -1}, era)
				exercise(t, cs, b.first("MCPV2_PEER_ID"))
			})
		}
	}
}

// bearer sends a session token as a bearer token.
type bearer struct{ tok string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}
