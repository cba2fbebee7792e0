package mcp_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/edge/a2a"
	"github.com/mcpv2/mcpv2/edge/mcp"
	"github.com/mcpv2/mcpv2/node"
)

// taskRig is a real node with its edge, the A2A face (the task engine)
// and the MCP face with tasks on it; the node has a slow skill, nap (it
// sleeps 30 s unless canceled), which anonymous callers may call too.
type taskRig struct {
	url  string
	edge *edge.Server
}

func newTaskRig(t *testing.T) *taskRig {
	t.Helper()
	skills := filepath.Join(t.TempDir(), "skills.json")
	if err := os.WriteFile(skills, []byte(`{"skills":[{"name":"nap","description":"sleeps","handler":{"type":"command","command":["sleep","30"]}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dataDir, "policy.json"), []byte(`{"grants":{"http":["nap"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := node.New(node.Config{DataDir: dataDir, ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Secret: []byte(secret), SkillsFile: skills})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	af, err := a2a.New(n)
	if err != nil {
		t.Fatal(err)
	}
	e, err := edge.New(n, edge.Config{BindHost: "127.0.0.1", Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	f, err := mcp.New(n, mcp.WithTasks(af, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	f.Mount(e, mcp.HTTPOptions{})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		f.Close()
		af.Close()
	})
	return &taskRig{url: "http://127.0.0.1:" + strconv.Itoa(e.BoundPort()) + mcp.Path, edge: e}
}

// asTask is the params of a tools/call that asks for a task in era's form.
func asTask(era, tool string) map[string]any {
	p := map[string]any{"name": tool, "arguments": map[string]any{}}
	if era < eraStateless {
		p["task"] = map[string]any{}
	}
	return p
}

// modernWire is httpWire of 2026-07-28 whose requests say the client
// speaks the tasks extension.
func modernWire(t *testing.T, url, token string) wire {
	return func(t *testing.T, id int, method, name string, params map[string]any) rpcAnswer {
		t.Helper()
		params = eraParams(eraStateless, params)
		params["_meta"].(map[string]any)["io.modelcontextprotocol/clientCapabilities"] = map[string]any{
			"extensions": map[string]any{mcp.TasksExtension: map[string]any{}}}
		h := map[string]string{"Authorization": "Bearer " + token, "MCP-Protocol-Version": eraStateless, "Mcp-Method": method}
		if name != "" {
			h["Mcp-Name"] = name
		}
		status, _, body := post(t, url, h, rpcBody(id, method, params))
		a := decodeAnswer(t, body)
		if status != http.StatusOK && a.Error == nil {
			t.Fatalf("%s: HTTP %d %s", method, status, body)
		}
		return a
	}
}

func obj(t *testing.T, a rpcAnswer) map[string]any {
	t.Helper()
	if a.Error != nil {
		t.Fatalf("error %d: %s", a.Error.Code, a.Error.Message)
	}
	var m map[string]any
	if err := json.Unmarshal(a.Result, &m); err != nil {
		t.Fatalf("result %s: %v", a.Result, err)
	}
	return m
}

func wantCode(t *testing.T, what string, a rpcAnswer, code int) {
	t.Helper()
	if a.Error == nil || a.Error.Code != code {
		t.Fatalf("%s: want error %d, got %+v %s", what, code, a.Error, a.Result)
	}
}

// TestTasksLegacy: the 2025-11-25 form over a session: the capability and
// each tool's taskSupport, a skill's call as a task and its result by
// tasks/result, tasks/get, tasks/list of the caller's own tasks only,
// cancel, and another caller's or an unknown task not found.
func TestTasksLegacy(t *testing.T) {
	r := newTaskRig(t)
	owner := r.secretToken()
	status, _, body := post(t, r.url, map[string]string{"Authorization": "Bearer " + owner}, initBody)
	if status != http.StatusOK {
		t.Fatalf("initialize: %d %s", status, body)
	}
	caps := obj(t, decodeAnswer(t, body))["capabilities"].(map[string]any)
	tc, _ := caps["tasks"].(map[string]any)
	if tc == nil || tc["list"] == nil || tc["cancel"] == nil || tc["requests"].(map[string]any)["tools"].(map[string]any)["call"] == nil {
		t.Fatalf("capabilities.tasks: %v", caps)
	}
	w := httpWire(t, r.url, owner, "2025-11-25")
	tools := obj(t, w(t, 2, "tools/list", "", nil))["tools"].([]any)
	support := map[string]string{}
	for _, x := range tools {
		tm := x.(map[string]any)
		ex, _ := tm["execution"].(map[string]any)
		support[tm["name"].(string)], _ = ex["taskSupport"].(string)
	}
	if support["list_files"] != "optional" || support["nap"] != "optional" || support[mcp.ToolMeshCall] != "forbidden" {
		t.Fatalf("taskSupport: %v", support)
	}

	// A quick skill as a task, its result by tasks/result.
	created := obj(t, w(t, 3, "tools/call", "", asTask("2025-11-25", "list_files")))
	task, _ := created["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if id == "" || task["status"] != "working" || task["ttl"] != float64(time.Hour.Milliseconds()) || task["pollInterval"] == nil || task["createdAt"] == nil {
		t.Fatalf("CreateTaskResult: %v", created)
	}
	res := obj(t, w(t, 4, "tasks/result", "", map[string]any{"taskId": id}))
	if res["isError"] == true || res["content"] == nil || res["_meta"].(map[string]any)["io.modelcontextprotocol/related-task"].(map[string]any)["taskId"] != id {
		t.Fatalf("tasks/result: %v", res)
	}
	if got := obj(t, w(t, 5, "tasks/get", "", map[string]any{"taskId": id})); got["status"] != "completed" || got["taskId"] != id {
		t.Fatalf("tasks/get: %v", got)
	}
	wantCode(t, "tasks/get of an unknown task", w(t, 6, "tasks/get", "", map[string]any{"taskId": "nosuchtask"}), -32602)
	wantCode(t, "tasks/get without taskId", w(t, 7, "tasks/get", "", map[string]any{}), -32602)

	// Another caller: not found, and not listed.
	other := httpWire(t, r.url, r.anonToken(t), "2025-11-25")
	wantCode(t, "another caller's tasks/get", other(t, 8, "tasks/get", "", map[string]any{"taskId": id}), -32602)
	wantCode(t, "another caller's tasks/result", other(t, 9, "tasks/result", "", map[string]any{"taskId": id}), -32602)
	wantCode(t, "another caller's tasks/cancel", other(t, 10, "tasks/cancel", "", map[string]any{"taskId": id}), -32602)
	if l := obj(t, other(t, 11, "tasks/list", "", nil))["tasks"].([]any); len(l) != 0 {
		t.Fatalf("another caller lists %v", l)
	}
	if l := obj(t, w(t, 12, "tasks/list", "", nil))["tasks"].([]any); len(l) != 1 || l[0].(map[string]any)["taskId"] != id {
		t.Fatalf("tasks/list: %v", l)
	}

	// A slow skill as a task, canceled while it runs.
	nap := obj(t, w(t, 13, "tools/call", "", asTask("2025-11-25", "nap")))["task"].(map[string]any)["taskId"].(string)
	if got := obj(t, w(t, 14, "tasks/cancel", "", map[string]any{"taskId": nap})); got["status"] != "cancelled" || got["taskId"] != nap {
		t.Fatalf("tasks/cancel: %v", got)
	}
	wantCode(t, "tasks/cancel of a cancelled task", w(t, 15, "tasks/cancel", "", map[string]any{"taskId": nap}), -32602)
	if res := obj(t, w(t, 16, "tasks/result", "", map[string]any{"taskId": nap})); res["isError"] != true {
		t.Fatalf("tasks/result of a cancelled task: %v", res)
	}

	// A call without params.task runs at once, as before.
	if res := obj(t, w(t, 17, "tools/call", "", map[string]any{"name": "list_files", "arguments": map[string]any{}})); res["content"] == nil || res["task"] != nil {
		t.Fatalf("plain tools/call: %v", res)
	}
}

// TestTasksModern: the 2026-07-28 extension: server/discover names it; a
// tools/call whose _meta says the client speaks it is a task (resultType
// "task"), tasks/get has the result inline, tasks/cancel and tasks/update,
// another caller's task not found; a client that does not speak it gets
// the result at once.
func TestTasksModern(t *testing.T) {
	r := newTaskRig(t)
	owner := r.secretToken()
	w := modernWire(t, r.url, owner)
	disc := obj(t, w(t, 1, "server/discover", "", nil))
	ext, _ := disc["capabilities"].(map[string]any)["extensions"].(map[string]any)
	if v, ok := ext[mcp.TasksExtension].(map[string]any); !ok || len(v) != 0 {
		t.Fatalf("server/discover extensions: %v", disc["capabilities"])
	}
	created := obj(t, w(t, 2, "tools/call", "list_files", asTask(eraStateless, "list_files")))
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || id == "" || created["status"] != "working" || created["ttlMs"] == nil || created["pollIntervalMs"] == nil {
		t.Fatalf("CreateTaskResult: %v", created)
	}
	deadline := time.Now().Add(30 * time.Second)
	var got map[string]any
	for {
		got = obj(t, w(t, 3, "tasks/get", id, map[string]any{"taskId": id}))
		if got["status"] != "working" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	result, _ := got["result"].(map[string]any)
	if got["resultType"] != "complete" || got["status"] != "completed" || result == nil || result["resultType"] != "complete" || result["content"] == nil {
		t.Fatalf("tasks/get: %v", got)
	}
	wantCode(t, "tasks/update", w(t, 4, "tasks/update", id, map[string]any{"taskId": id, "inputResponses": map[string]any{}}), -32602)
	wantCode(t, "tasks/list in 2026-07-28", w(t, 5, "tasks/list", "", nil), -32601)
	other := modernWire(t, r.url, r.anonToken(t))
	wantCode(t, "another caller's tasks/get", other(t, 6, "tasks/get", id, map[string]any{"taskId": id}), -32602)

	nap := obj(t, w(t, 7, "tools/call", "nap", asTask(eraStateless, "nap")))["taskId"].(string)
	if got := obj(t, w(t, 8, "tasks/cancel", nap, map[string]any{"taskId": nap})); got["resultType"] != "complete" {
		t.Fatalf("tasks/cancel: %v", got)
	}
	if got := obj(t, w(t, 9, "tasks/get", nap, map[string]any{"taskId": nap})); got["status"] != "cancelled" {
		t.Fatalf("tasks/get after cancel: %v", got)
	}

	// Without the extension in its capabilities: the result at once.
	plain := httpWire(t, r.url, owner, eraStateless)
	if res := obj(t, plain(t, 10, "tools/call", "list_files", map[string]any{"name": "list_files", "arguments": map[string]any{}})); res["resultType"] != "complete" {
		t.Fatalf("plain tools/call: %v", res)
	}
}

func (r *taskRig) secretToken() string {
	tok, _ := r.edge.MintSession("127.0.0.1")
	return tok
}

func (r *taskRig) anonToken(t *testing.T) string {
	return (&rig{url: r.url}).anonToken(t)
}
