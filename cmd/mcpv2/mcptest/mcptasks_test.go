package mcptest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// TestMCPTasksExtTasks runs an MCP client that already speaks the tasks
// extension, @modelcontextprotocol/ext-tasks 0.2.2 over the MCP
// TypeScript SDK's Client 2.3.1 (both from the lock file; testdata/npm/
// mcp-tasks.mjs), against a node with a slow skill (nap, 1.5 s), with an
// API key as a user has it, in both forms ext-tasks speaks: the 2025-11-25
// experimental tasks (its Client's default handshake) and the 2026-07-28
// extension io.modelcontextprotocol/tasks (the Client pinned to that
// revision, with the rawDispatch and v2RequestFraming adapter options
// ext-tasks requires for it). In each, the client calls nap as a task
// (and, in 2025-11-25, finds it in tasks/list), hands it off and drops its
// connection while it runs; another key's caller does not find the task;
// then a new client resumes it by its reference and gets nap's result,
// which the node ran as an A2A task of the same store.
func TestMCPTasksExtTasks(t *testing.T) {
	needNPM(t, "mcp-inspector") // the lock file installs ext-tasks and the client with it
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		testenv.SkipEnv(t, "node is not installed: %v", err)
	}
	a := startNode(t, "--port", "0", "--skills", napSkills(t))
	key := a.addKey(t, "tasker", "--grant", "nap")
	other := a.addKey(t, "stranger", "--grant", "nap")

	for _, era := range []struct{ name, env, caps string }{
		{"2025-11-25", "legacy", `ok: capabilities {"inventory":"server-list","execution":true,"cancellation":true`},
		{"2026-07-28", "modern", `ok: capabilities {"inventory":"known-handles","execution":true,"cancellation":true`},
	} {
		t.Run(era.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, nodeBin, "mcp-tasks.mjs")
			cmd.Dir = npmDir
			cmd.Env = append(testenv.CleanEnv(), "MCP_URL="+a.mcpURL(), "MCP_TOKEN="+key, "MCP_OTHER_TOKEN="+other, "MCP_TOOL=nap", "MCP_ERA="+era.env)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("mcp-tasks.mjs: %v\n%s\n%s", err, out.String(), errb.String())
			}
			t.Logf("%s", out.String())
			want := []string{era.caps, "ok: task started ", "ok: dropped the connection", `ok: another caller: invalid params: task not found`,
				"ok: statuses working,", `ok: result {"slept":true}`}
			if era.env == "legacy" {
				want = append(want, "ok: tasks/list has it")
			} else {
				// The listen was opened on the task (running or ended): the
				// acknowledgement, then at least its status as it is then.
				want = append(want, "ok: listening ")
				if regexp.MustCompile(`ok: status notifications 0 `).MatchString(out.String()) {
					t.Errorf("no notifications/tasks on the listen stream:\n%s", out.String())
				}
			}
			for _, w := range want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("no %q in:\n%s\n%s", w, out.String(), errb.String())
				}
			}
		})
	}
}

// TestMCPTaskOrchestrateProgress runs orchestrate as an MCP task (the
// 2026-07-28 extension, on the real HTTP face) on node A of a two-node
// mesh, with a plan of two subtasks on node B's skills: gate, which
// answers only once the test opens its gate (a file), and after, which
// depends on it. The client follows the task on a subscriptions/listen
// stream: after the acknowledgement (and only then is the gate opened),
// notifications/tasks carry the subtasks' progress, "subtask s2: running"
// among them, before the one that says the task completed, with
// orchestrate's answer inline.
func TestMCPTaskOrchestrateProgress(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	skills, _ := json.Marshal(map[string]any{"skills": []any{
		map[string]any{"name": "gate", "description": "answers once its gate file exists", "tags": []string{"demo"},
			"handler": map[string]any{"type": "command", "command": []string{"sh", "-c", `while [ ! -e "$0" ]; do sleep 0.05; done; echo '{"gate":"open"}'`, gate}}},
		map[string]any{"name": "after", "description": "answers at once", "tags": []string{"demo"},
			"handler": map[string]any{"type": "command", "command": []string{"sh", "-c", `echo '{"after":true}'`}}},
	}})
	file := filepath.Join(t.TempDir(), "custom_skills.json")
	if err := os.WriteFile(file, skills, 0o600); err != nil {
		t.Fatal(err)
	}
	b := startNode(t, "--secret", secret, "--skills", file)
	a := startNode(t, "--port", "0", "--secret", secret, "--bootstrap", b.first("MCPV2_P2P_ADDRESS"))
	bPeer := b.first("MCPV2_PEER_ID")
	mc := &taskWire{t: t, url: a.mcpURL(), tok: secretSession(secret)}

	// A finds B's skills in the DHT (what the orchestrator asks).
	for _, skill := range []string{"gate", "after"} {
		for try := 0; ; try++ {
			res := mc.post("tools/call", "mesh_find", map[string]any{"name": "mesh_find", "arguments": map[string]any{"skill": skill}}, false)
			if strings.Contains(string(res), bPeer) {
				break
			}
			if try == 100 {
				t.Fatalf("A's mesh_find %s never listed B (%s): %s", skill, bPeer, res)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	plan := map[string]any{"subtasks": []any{
		map[string]any{"id": "s1", "text": "wait for the gate", "skill": "gate", "arguments": map[string]any{}},
		map[string]any{"id": "s2", "text": "then this", "skill": "after", "arguments": map[string]any{}, "depends_on": []string{"s1"}},
	}}
	res := mc.post("tools/call", "orchestrate", map[string]any{"name": "orchestrate", "arguments": map[string]any{"request": "open the gate, then after", "plan": plan}}, true)
	var created struct {
		Result struct {
			ResultType, TaskID, Status string
		}
	}
	if err := json.Unmarshal(res, &created); err != nil || created.Result.ResultType != "task" || created.Result.TaskID == "" {
		t.Fatalf("orchestrate did not start as a task: %s", res)
	}
	id := created.Result.TaskID

	// Follow it.
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
		"params": map[string]any{"_meta": taskMeta(), "notifications": map[string]any{"taskIds": []string{id}}}})
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, mc.url, bytes.NewReader(body))
	mc.headers(req, "subscriptions/listen", "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("subscriptions/listen: HTTP %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	next := func() map[string]any {
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if err := json.Unmarshal([]byte(data), &m); err != nil {
					t.Fatalf("listen stream: %v: %s", err, data)
				}
				return m
			}
		}
		t.Fatalf("the listen stream ended: %v", sc.Err())
		return nil
	}
	ack := next()
	if ack["method"] != "notifications/subscriptions/acknowledged" || !strings.Contains(fmt.Sprint(ack["params"]), id) {
		t.Fatalf("first on the listen stream: %v", ack)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var progress []string
	for {
		m := next()
		if m["method"] != "notifications/tasks" {
			if _, ok := m["result"]; ok {
				t.Fatalf("the listen ended before the task did; progress: %q", progress)
			}
			continue
		}
		p, _ := m["params"].(map[string]any)
		if p["taskId"] != id {
			t.Fatalf("a notification of another task: %v", m)
		}
		status, _ := p["status"].(string)
		if status == "working" {
			msg, _ := p["statusMessage"].(string)
			progress = append(progress, msg)
			continue
		}
		if status != "completed" {
			t.Fatalf("the task ended %s: %v", status, p)
		}
		out, _ := json.Marshal(p["result"])
		if !strings.Contains(string(out), `\"gate\":\"open\"`) && !strings.Contains(string(out), `"gate":"open"`) {
			t.Errorf("the completed task's result lacks gate's answer: %s", out)
		}
		break
	}
	t.Logf("progress seen before the result: %q", progress)
	if !slices.ContainsFunc(progress, func(s string) bool { return strings.HasPrefix(s, "subtask s2: running (agent "+bPeer) }) {
		t.Errorf("no \"subtask s2: running\" progress before the result: %q", progress)
	}
	// The listen ends with its result once the task has.
	for {
		if m := next(); m["id"] == "listen-1" {
			break
		}
	}
}

// taskMeta is the _meta of a 2026-07-28 request of a client that speaks
// the tasks extension.
func taskMeta() map[string]any {
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "mcptest", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
	}
}

// taskWire posts 2026-07-28 requests to an MCP face, one POST each.
type taskWire struct {
	t        *testing.T
	url, tok string
	n        int
}

func (w *taskWire) headers(req *http.Request, method, name string) {
	req.Header.Set("Authorization", "Bearer "+w.tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
}

// post sends method with params (the tasks extension declared in _meta
// when tasks) and returns the JSON-RPC response.
func (w *taskWire) post(method, name string, params map[string]any, tasks bool) json.RawMessage {
	w.t.Helper()
	w.n++
	meta := taskMeta()
	if !tasks {
		meta["io.modelcontextprotocol/clientCapabilities"] = map[string]any{}
	}
	params["_meta"] = meta
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": w.n, "method": method, "params": params})
	req, _ := http.NewRequestWithContext(ctxT(w.t), http.MethodPost, w.url, bytes.NewReader(body))
	w.headers(req, method, name)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(b), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, `"id":`) {
				return json.RawMessage(data)
			}
		}
	}
	return b
}
