package mcptest

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// inspector runs the MCP Inspector's CLI (@modelcontextprotocol/inspector,
// pinned) with args and returns its exit code, stdout and stderr. Its
// catalog and storage go to a temporary home, not the user's.
func inspector(t *testing.T, home string, args ...string) (int, string, string) {
	t.Helper()
	bin := needNPM(t, "mcp-inspector")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--cli"}, args...)...)
	cmd.Env = append(testenv.CleanEnv(), "HOME="+home, "MCP_CATALOG_PATH="+filepath.Join(home, "mcp.json"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("mcp-inspector %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// inspectorCase is one run of the inspector and what it must print.
type inspectorCase struct {
	name string
	args []string
	code int      // the exit code: 0, or 5 for an isError result
	want []string // substrings of stdout
}

func inspectorCases(peer string) []inspectorCase {
	return []inspectorCase{
		{name: "tools/list", args: []string{"--method", "tools/list"},
			want: []string{`"name": "ping"`, `"name": "ask"`, `"name": "upload_file"`, `"name": "read_file"`, `"name": "translate_history"`,
				`"name": "mesh_find"`, `"name": "mesh_call"`, `"inputSchema"`, `"base64"`}},
		{name: "ping", args: []string{"--method", "tools/call", "--tool-name", "ping", "--tool-arg", "payload=inspector"},
			want: []string{`"pong": true`, `"payload": "inspector"`}},
		{name: "ask", args: []string{"--method", "tools/call", "--tool-name", "ask", "--tool-arg", "query=What is mcpv2?"},
			want: []string{`"response"`, `"provider": "local"`}},
		{name: "bad argument", args: []string{"--method", "tools/call", "--tool-name", "upload_file", "--tool-args-json", `{"filename":"x.txt","content":5}`},
			code: 5, want: []string{`"isError": true`, "-32602"}},
		{name: "upload", args: []string{"--method", "tools/call", "--tool-name", "upload_file", "--tool-arg", "filename=inspected.txt", "content=seen by the inspector"},
			want: []string{`"sha256"`}},
		{name: "resources/list", args: []string{"--method", "resources/list"},
			want: []string{`"uri": "mcpv2://files/inspected.txt"`, `"uri": "mcpv2://card"`}},
		{name: "resources/read", args: []string{"--method", "resources/read", "--uri", "mcpv2://files/inspected.txt"},
			want: []string{`"text": "seen by the inspector"`, `"mimeType": "text/plain; charset=utf-8"`}},
		{name: "prompts/list", args: []string{"--method", "prompts/list"},
			want: []string{`"name": "summarize"`, `"name": "analyze"`}},
		{name: "prompts/get", args: []string{"--method", "prompts/get", "--prompt-name", "summarize", "--prompt-args", "content=The quick brown fox.", "style=brief"},
			want: []string{"two or three sentences", "The quick brown fox."}},
		// Last: over stdio, nine processes of the same identity have come
		// and gone before it, killed by the inspector, and the peer must
		// still admit this one (transport's per-peer connection limit).
		{name: "mesh_call", args: []string{"--method", "tools/call", "--tool-name", "mesh_call",
			"--tool-args-json", `{"peer":"` + peer + `","skill":"ping","arguments":{"payload":"via the mesh"}}`},
			want: []string{`"peer_id": "` + peer + `"`, `"payload": "via the mesh"`}},
	}
}

func runInspectorCases(t *testing.T, cases []inspectorCase, target func(args []string) []string) {
	home := t.TempDir()
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, "/", "_"), func(t *testing.T) {
			code, out, errs := inspector(t, home, target(c.args)...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, out, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s\nstderr: %s", w, out, errs)
				}
			}
		})
	}
}

// TestInspectorStdio runs the MCP Inspector's CLI against `mcpv2 mcp`, as
// an MCP host starts it: each run a new process on the same data dir, in
// the mesh of node B.
func TestInspectorStdio(t *testing.T) {
	needNPM(t, "mcp-inspector")
	b := startNode(t, "--secret", secret)
	dir := t.TempDir()
	runInspectorCases(t, inspectorCases(b.first("MCPV2_PEER_ID")), func(args []string) []string {
		return append(args, "--", binPath, "mcp", "--data-dir", dir, "--secret", secret, "--bootstrap", b.first("MCPV2_P2P_ADDRESS"))
	})
}

// TestInspectorHTTP runs the MCP Inspector's CLI against a node's /mcp, with
// a secret holder's session as its bearer token, and against
// /peers/{PeerID}/mcp of a second node that has no edge.
func TestInspectorHTTP(t *testing.T) {
	needNPM(t, "mcp-inspector")
	b := startNode(t, "--secret", secret)
	a := startNode(t, "--port", "0", "--secret", secret, "--bootstrap", b.first("MCPV2_P2P_ADDRESS"))
	tok := secretSession(secret)
	runInspectorCases(t, inspectorCases(b.first("MCPV2_PEER_ID")), func(args []string) []string {
		return append([]string{a.mcpURL(), "--transport", "http"}, append(args, "--header", "Authorization: Bearer "+tok)...)
	})
	// B has no edge: A's /peers/{B}/mcp serves it, over libp2p.
	peerURL := strings.TrimSuffix(a.mcpURL(), "/mcp") + "/peers/" + b.first("MCPV2_PEER_ID") + "/mcp"
	for _, c := range []inspectorCase{
		{name: "peer tools/list", args: []string{"--method", "tools/list"}, want: []string{`"name": "translate_history"`, `"inputSchema"`}},
		{name: "peer ping", args: []string{"--method", "tools/call", "--tool-name", "ping"}, want: []string{`"peer_id": "` + b.first("MCPV2_PEER_ID") + `"`}},
		{name: "peer card", args: []string{"--method", "resources/read", "--uri", "mcpv2://card"}, want: []string{b.first("MCPV2_PEER_ID")}},
	} {
		code, out, errs := inspector(t, t.TempDir(), append([]string{peerURL, "--transport", "http"}, append(c.args, "--header", "Authorization: Bearer "+tok)...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", c.name, code, out, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: stdout lacks %q:\n%s", c.name, w, out)
			}
		}
	}
	// Without a session the inspector is told it needs one (exit 3).
	code, out, errs := inspector(t, t.TempDir(), a.mcpURL(), "--transport", "http", "--method", "tools/list")
	if code != 3 {
		t.Fatalf("no session: exit %d\n%s\n%s", code, out, errs)
	}
}
