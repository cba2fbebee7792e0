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
	name   string
	args   []string
	code   int      // the exit code: 0, or 5 for an isError result
	want   []string // substrings of stdout
	reject []string // what stdout must not hold
}

// inspectorEras are the inspector's --protocol-era values and the MCP
// revisions they negotiate: legacy is the 2025-11-25 initialize handshake,
// modern the sessionless 2026-07-28 era (the inspector pins it; it does not
// fall back).
var inspectorEras = []struct{ name, era string }{{"2025-11-25", "legacy"}, {"2026-07-28", "modern"}}

// inspectorCases are what a user does with the inspector in era ("legacy"
// or "modern"): list the tools, call two, see a bad argument come back as
// an isError result, store a file and find it as a resource, render a
// prompt, and (last) reach peer through mesh_call.
func inspectorCases(peer, era string) []inspectorCase {
	file := "inspected-" + era + ".txt"
	// A result of the 2026-07-28 era names its server in _meta (SEP-2575);
	// a 2025-11-25 one does not: what says which era was spoken.
	var eraMark, notEra []string
	if era == "modern" {
		eraMark = append(eraMark, `"io.modelcontextprotocol/serverInfo"`)
	} else {
		notEra = append(notEra, `"io.modelcontextprotocol/serverInfo"`)
	}
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
		{name: "upload", args: []string{"--method", "tools/call", "--tool-name", "upload_file", "--tool-arg", "filename=" + file, "content=seen by the inspector"},
			want: []string{`"sha256"`}},
		{name: "resources/list", args: []string{"--method", "resources/list"},
			want: []string{`"uri": "mcpv2://files/` + file + `"`, `"uri": "mcpv2://card"`}},
		{name: "resources/read", args: []string{"--method", "resources/read", "--uri", "mcpv2://files/" + file},
			want: append([]string{`"text": "seen by the inspector"`, `"mimeType": "text/plain; charset=utf-8"`}, eraMark...), reject: notEra},
		{name: "prompts/list", args: []string{"--method", "prompts/list"},
			want: []string{`"name": "summarize"`, `"name": "analyze"`}},
		{name: "prompts/get", args: []string{"--method", "prompts/get", "--prompt-name", "summarize", "--prompt-args", "content=The quick brown fox.", "style=brief"},
			want: append([]string{"two or three sentences", "The quick brown fox."}, eraMark...), reject: notEra},
		// Last: over stdio, nine processes of the same identity have come
		// and gone before it, killed by the inspector, and the peer must
		// still admit this one (transport's per-peer connection limit).
		{name: "mesh_call", args: []string{"--method", "tools/call", "--tool-name", "mesh_call",
			"--tool-args-json", `{"peer":"` + peer + `","skill":"ping","arguments":{"payload":"via the mesh"}}`},
			want: []string{`"peer_id": "` + peer + `"`, `"payload": "via the mesh"`}},
	}
}

// runInspectorCases runs cases, each a subtest, with target turning a
// case's arguments into the inspector's whole command line.
func runInspectorCases(t *testing.T, cases []inspectorCase, target func(args []string) []string) {
	t.Helper()
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
			for _, r := range c.reject {
				if strings.Contains(out, r) {
					t.Errorf("stdout holds %q:\n%s", r, out)
				}
			}
		})
	}
}

// TestInspectorStdio runs the MCP Inspector's CLI against `mcpv2 mcp`, as
// an MCP host starts it, in both eras: each run a new process on the same
// data dir (one per era), in the mesh of node B. Stdio carries no
// credential: the process is the user's own node.
func TestInspectorStdio(t *testing.T) {
	needNPM(t, "mcp-inspector")
	b := startNode(t, "--secret", secret)
	for _, e := range inspectorEras {
		t.Run(e.name, func(t *testing.T) {
			dir := t.TempDir()
			runInspectorCases(t, inspectorCases(b.first("MCPV2_PEER_ID"), e.era), func(args []string) []string {
				return append(append([]string{"--protocol-era", e.era}, args...), "--", binPath, "mcp", "--data-dir", dir, "--secret", secret, "--bootstrap", b.first("MCPV2_P2P_ADDRESS"))
			})
		})
	}
}

// TestInspectorHTTP runs the MCP Inspector's CLI as a user configures it
// with only a URL (no header, no token), in both eras, against a node's
// /mcp and against /peers/{PeerID}/mcp of a second node that has no edge;
// both nodes' policy grants "http" (callers without a credential) every
// skill.
func TestInspectorHTTP(t *testing.T) {
	needNPM(t, "mcp-inspector")
	b := startNodeWithPolicy(t, grantHTTPAll, "--secret", secret)
	a := startNodeWithPolicy(t, grantHTTPAll, "--port", "0", "--secret", secret, "--bootstrap", b.first("MCPV2_P2P_ADDRESS"))
	bID := b.first("MCPV2_PEER_ID")
	// B has no edge: A's /peers/{B}/mcp serves it, over libp2p.
	peerURL := strings.TrimSuffix(a.mcpURL(), "/mcp") + "/peers/" + bID + "/mcp"
	for _, e := range inspectorEras {
		t.Run(e.name, func(t *testing.T) {
			runInspectorCases(t, inspectorCases(bID, e.era), func(args []string) []string {
				return append([]string{a.mcpURL(), "--transport", "http", "--protocol-era", e.era}, args...)
			})
			t.Run("peer", func(t *testing.T) {
				runInspectorCases(t, []inspectorCase{
					{name: "tools/list", args: []string{"--method", "tools/list"}, want: []string{`"name": "translate_history"`, `"inputSchema"`}},
					{name: "ping", args: []string{"--method", "tools/call", "--tool-name", "ping"}, want: []string{`"peer_id": "` + bID + `"`}},
					{name: "bad argument", args: []string{"--method", "tools/call", "--tool-name", "upload_file", "--tool-args-json", `{"filename":"x.txt","content":5}`},
						code: 5, want: []string{`"isError": true`, "-32602"}},
					{name: "card", args: []string{"--method", "resources/read", "--uri", "mcpv2://card"}, want: []string{bID}},
					{name: "prompts/list", args: []string{"--method", "prompts/list"}, want: []string{`"name": "summarize"`}},
				}, func(args []string) []string {
					return append([]string{peerURL, "--transport", "http", "--protocol-era", e.era}, args...)
				})
			})
		})
	}
}

// TestInspectorNoGrants: a node whose policy grants callers without a
// credential nothing beyond the open methods still serves the inspector
// given only its URL (tools/list, ping), and a tool it does not grant comes
// back as an isError result, -32009, saying how to authenticate.
func TestInspectorNoGrants(t *testing.T) {
	needNPM(t, "mcp-inspector")
	a := startNode(t, "--port", "0")
	home := t.TempDir()
	code, out, errs := inspector(t, home, a.mcpURL(), "--transport", "http", "--method", "tools/call", "--tool-name", "ping")
	if code != 0 || !strings.Contains(out, `"pong": true`) {
		t.Fatalf("ping with only the URL: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = inspector(t, home, a.mcpURL(), "--transport", "http", "--method", "tools/call", "--tool-name", "upload_file",
		"--tool-arg", "filename=a.txt", "content=x")
	if code != 5 {
		t.Fatalf("upload_file, not granted: exit %d, want 5 (isError)\n%s\n%s", code, out, errs)
	}
	for _, w := range []string{`"isError": true`, `"code": -32009`, "authenticate", "mcpv2 key add", "Authorization: Bearer"} {
		if !strings.Contains(out, w) {
			t.Errorf("upload_file, not granted: stdout lacks %q:\n%s", w, out)
		}
	}
}

// TestInspectorKey runs the MCP Inspector's CLI with an API key, as a user
// configures a remote node (--header "Authorization: Bearer KEY"), in both
// eras, against a node whose policy grants callers without a credential
// nothing beyond the open methods, so that the key's grants decide: the
// tool granted to the key (upload_file) runs, one not granted (ask) is an
// isError result with -32009. Once the key is revoked (mcpv2 key revoke,
// while the node runs), the next run is refused with 401.
func TestInspectorKey(t *testing.T) {
	needNPM(t, "mcp-inspector")
	a := startNode(t, "--port", "0")
	key := a.addKey(t, "inspector", "--grant", "upload_file")
	auth := "Authorization: Bearer " + key
	for _, e := range inspectorEras {
		t.Run(e.name, func(t *testing.T) {
			runInspectorCases(t, []inspectorCase{
				{name: "tools/list", args: []string{"--method", "tools/list"}, want: []string{`"name": "upload_file"`, `"name": "ask"`}},
				{name: "ping", args: []string{"--method", "tools/call", "--tool-name", "ping"}, want: []string{`"pong": true`}},
				{name: "granted", args: []string{"--method", "tools/call", "--tool-name", "upload_file", "--tool-arg", "filename=keyed-" + e.era + ".txt", "content=with a key"},
					want: []string{`"sha256"`}},
				{name: "not granted", args: []string{"--method", "tools/call", "--tool-name", "ask", "--tool-arg", "query=hello?"},
					code: 5, want: []string{`"isError": true`, `"code": -32009`, `\"ask\"`}},
			}, func(args []string) []string {
				return append([]string{a.mcpURL(), "--transport", "http", "--protocol-era", e.era, "--header", auth}, args...)
			})
		})
	}
	// The node's audit names the key for what it ran and was refused.
	var ran, denied int
	for _, l := range testenv.AuditLines(t, a.first("MCPV2_DATA_DIR")) {
		if l["caller"] != "key:inspector" || l["auth"] != "key" {
			continue
		}
		switch {
		case l["skill"] == "upload_file" && l["outcome"] == "ok":
			ran++
		case l["skill"] == "ask" && l["code"] == float64(-32009):
			denied++
		}
	}
	if ran != len(inspectorEras) || denied != len(inspectorEras) {
		t.Errorf("audit of key:inspector (auth key): upload_file ok %d times, ask -32009 %d times; want %d of each", ran, denied, len(inspectorEras))
	}
	a.revokeKey(t, "inspector")
	// The node answers the revoked key 401 (-32001, with a WWW-Authenticate
	// challenge); the inspector takes a 401 as a call to log in with OAuth,
	// which a CLI without a TTY does not do: it exits 3, auth_required.
	refused := func() int {
		n := 0
		for _, l := range testenv.AuditLines(t, a.first("MCPV2_DATA_DIR")) {
			if l["code"] == float64(-32001) && l["method"] == "http POST /mcp" {
				n++
			}
		}
		return n
	}
	for _, e := range inspectorEras {
		before := refused()
		code, out, errs := inspector(t, t.TempDir(), a.mcpURL(), "--transport", "http", "--protocol-era", e.era, "--header", auth,
			"--method", "tools/call", "--tool-name", "ping")
		if code != 3 || !strings.Contains(errs, "auth_required") {
			t.Errorf("%s: a revoked key: exit %d, want 3 (auth_required)\nstdout: %s\nstderr: %s", e.name, code, out, errs)
		}
		t.Logf("%s: a revoked key: exit %d: %s", e.name, code, strings.TrimSpace(errs))
		deadline := time.Now().Add(10 * time.Second)
		for refused() == before {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the node audited no 401 (-32001) of POST /mcp for the revoked key", e.name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
