package mcptest

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// TestCustomMCPSkill: node B shares a real MCP server from npm
// (@modelcontextprotocol/server-everything, pinned) as custom skills, every
// tool under the prefix ev_. Another node calls them over the mesh — a
// client process, and node A's MCP face through mesh_call — and the skills
// survive the server being killed: the next calls start it again. An A2A
// client runs them too.
func TestCustomMCPSkill(t *testing.T) {
	needNPM(t, "mcp-server-everything")
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.SkipEnv(t, "node is not installed: %v", err)
	}
	server := filepath.Join(npmDir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	skills, _ := json.Marshal(map[string]any{"skills": []any{map[string]any{
		"name": "everything", "tags": []string{"demo"},
		"handler": map[string]any{"type": "mcp", "command": []string{node, server, "stdio"}, "tools": "*", "prefix": "ev_"},
	}}})
	file := filepath.Join(t.TempDir(), "custom_skills.json")
	if err := os.WriteFile(file, skills, 0o600); err != nil {
		t.Fatal(err)
	}
	b := startNode(t, "--secret", secret, "--skills", file, "--port", "0")
	a := startNode(t, "--port", "0", "--secret", secret, "--bootstrap", b.first("MCPV2_P2P_ADDRESS"))
	bAddr := b.first("MCPV2_P2P_ADDRESS")

	call := func(skill, args string) (string, string, int) {
		t.Helper()
		return testenv.Run(t, binPath, "call", bAddr, skill, args, "--secret", secret, "--data-dir", t.TempDir())
	}
	out, errs, code := call("ev_echo", `{"message":"over the mesh"}`)
	if code != 0 || !strings.Contains(out, "over the mesh") {
		t.Fatalf("mcpv2 call ev_echo: exit %d\n%s\n%s", code, out, errs)
	}
	out, errs, code = call("ev_get-sum", `{"a":2,"b":40}`)
	if code != 0 || !strings.Contains(out, "42") {
		t.Fatalf("mcpv2 call ev_get-sum: exit %d\n%s\n%s", code, out, errs)
	}

	// Through A's MCP face: the tool's schema reached A's client, and
	// mesh_call runs it on B.
	hc := &http.Client{Transport: bearer{tok: secretSession(secret)}}
	cs := connect(t, &sdk.StreamableClientTransport{Endpoint: strings.TrimSuffix(a.mcpURL(), "/mcp") + "/peers/" + b.first("MCPV2_PEER_ID") + "/mcp", HTTPClient: hc, MaxRetries: -1}, "2026-07-28")
	lt, err := cs.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var echoSchema string
	for _, tool := range lt.Tools {
		if tool.Name == "ev_echo" {
			s, _ := json.Marshal(tool.InputSchema)
			echoSchema = string(s)
		}
	}
	if !strings.Contains(echoSchema, `"message"`) {
		t.Fatalf("B's ev_echo through A has not the server's schema: %q", echoSchema)
	}
	res, err := cs.CallTool(ctxT(t), &sdk.CallToolParams{Name: "ev_echo", Arguments: map[string]any{"message": "through A"}})
	if err != nil || res.IsError {
		t.Fatalf("ev_echo through A: %v %+v", err, res)
	}

	// An A2A client (a JSON-RPC SendMessage to B's edge) runs it too.
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER",` +
		`"parts":[{"data":{"skill":"ev_echo","arguments":{"message":"from an A2A client"}}}]}}}`
	req, _ := http.NewRequest(http.MethodPost, strings.TrimSuffix(b.mcpURL(), "/mcp")+"/a2a", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+secretSession(secret))
	req.Header.Set("A2A-Version", "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ab, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(ab), "TASK_STATE_COMPLETED") || !strings.Contains(string(ab), "from an A2A client") {
		t.Fatalf("A2A SendMessage of ev_echo: %s", ab)
	}

	// Kill the server: a later call starts it again.
	pids := childPIDs(t, b.cmd.Process.Pid)
	if len(pids) == 0 {
		t.Fatal("B runs no MCP server after the calls")
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, errs, code = call("ev_echo", `{"message":"after the kill"}`)
		if code == 0 && strings.Contains(out, "after the kill") {
			break
		}
		if time.Now().After(deadline) || !strings.Contains(errs, "-32004") {
			t.Fatalf("after the server was killed: exit %d\n%s\n%s", code, out, errs)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if again := childPIDs(t, b.cmd.Process.Pid); len(again) == 0 || again[0] == pids[0] {
		t.Fatalf("no new server: before %v, after %v", pids, again)
	}
}

// childPIDs lists the children of pid (all its threads').
func childPIDs(t *testing.T, pid int) []int {
	t.Helper()
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if p, err := strconv.Atoi(s); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}
