package rest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
)

type comparePoint struct{ Aspect, REST, MCP string }

type compareAnswer struct {
	Runs    int    `json:"runs"`
	RunsWhy string `json:"runs_why"`
	REST    struct {
		Runs int `json:"runs"`
	} `json:"rest"`
	MCP struct {
		Runs int `json:"runs"`
	} `json:"mcp"`
	Points []comparePoint `json:"points"`
	Method string         `json:"method"`
}

func (c compareAnswer) point(aspect string) comparePoint {
	for _, p := range c.Points {
		if p.Aspect == aspect {
			return p
		}
	}
	return comparePoint{}
}

// TestCompareSideEffects checks that compare runs a tool that does not
// declare itself read-only (MCP's readOnlyHint) once per face, not the
// configured number of runs, and says so; a read-only tool (mesh_find)
// gets every run. Its type_safety point is read from what the faces
// listed: no outputSchema for the tool, an untyped result in the document.
func TestCompareSideEffects(t *testing.T) {
	var calls atomic.Int32
	r := newRig(t, func(c *node.Config) { c.PolicyFile = writePolicy(t, `{"grants":{"http":["pay_like","mesh_find"]}}`) })
	if err := r.n.Registry().AddRaw(protocol.SkillDescriptor{Name: "pay_like", Description: "a tool with a side effect",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}}}`)},
		func(context.Context, json.RawMessage) (any, error) {
			calls.Add(1)
			return map[string]any{"paid": true}, nil
		}); err != nil {
		t.Fatal(err)
	}
	a := r.do(t, "POST", "/api/v1/mcp/compare", "", map[string]any{"operation": "pay_like", "arguments": map[string]any{"amount": 1}})
	wantStatus(t, a, 200)
	var c compareAnswer
	if err := json.Unmarshal(a.body, &c); err != nil {
		t.Fatal(err)
	}
	// One run through each face; the validation probe's arguments are
	// refused by the node before the tool runs.
	if n := calls.Load(); n != 2 {
		t.Errorf("the tool ran %d times, want once per face (2): %s", n, a.body)
	}
	if c.Runs != 1 || c.REST.Runs != 1 || c.MCP.Runs != 1 || !strings.Contains(c.RunsWhy, "readOnlyHint") || !strings.Contains(c.Method, "once") {
		t.Errorf("the answer does not say the tool ran once per face and why: runs %d/%d/%d, runs_why %q, method %q", c.Runs, c.REST.Runs, c.MCP.Runs, c.RunsWhy, c.Method)
	}
	ts := c.point("type_safety")
	if !strings.Contains(ts.MCP, "pay_like") || !strings.Contains(ts.MCP, "no outputSchema") || !strings.Contains(ts.REST, "ExecuteResponse") {
		t.Errorf("type_safety is not read from what the faces listed: %+v", ts)
	}

	a = r.do(t, "POST", "/api/v1/mcp/compare", "", map[string]any{"operation": "mesh_find", "arguments": map[string]any{"skill": "x"}})
	wantStatus(t, a, 200)
	c = compareAnswer{}
	if err := json.Unmarshal(a.body, &c); err != nil {
		t.Fatal(err)
	}
	if c.Runs != 3 || c.MCP.Runs != 3 || !strings.Contains(c.RunsWhy, "readOnlyHint") {
		t.Errorf("a read-only tool: runs %d (mcp %d), runs_why %q; want 3", c.Runs, c.MCP.Runs, c.RunsWhy)
	}
}

// TestCompareOnePerCaller checks that a caller runs one compare at a time:
// a second, while the first runs, is 429 with Retry-After; another caller
// is not held by it.
func TestCompareOnePerCaller(t *testing.T) {
	started, release := make(chan struct{}, 4), make(chan struct{})
	r := newRig(t, func(c *node.Config) { c.PolicyFile = writePolicy(t, `{"grants":{"http":["slow","calculator"]}}`) })
	if err := r.n.Registry().AddRaw(protocol.SkillDescriptor{Name: "slow", Description: "waits",
		InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			select {
			case started <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return map[string]any{"ok": true}, nil
		}); err != nil {
		t.Fatal(err)
	}
	first := make(chan int, 1)
	go func() {
		resp, err := http.Post(r.base+"/api/v1/mcp/compare", "application/json", strings.NewReader(`{"operation":"slow"}`))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-started
	a := r.do(t, "POST", "/api/v1/mcp/compare", "", map[string]any{"operation": "calculator", "arguments": map[string]any{"operation": "add", "a": 1}})
	if a.status != 429 || a.header.Get("Retry-After") == "" || errCode(t, a) != protocol.CodeRateLimited || !strings.Contains(string(a.body), "compare") {
		t.Errorf("a second compare of the same caller: %d %q %s", a.status, a.header.Get("Retry-After"), a.body)
	}
	rep := r.do(t, "GET", "/api/v1/mcp/compare/report", "", nil)
	if rep.status != 429 {
		t.Errorf("a report while the caller's compare runs: %d %s", rep.status, rep.body)
	}
	// Another caller (the secret holder) is not held.
	b := r.do(t, "POST", "/api/v1/mcp/compare", r.secretToken(), map[string]any{"operation": "calculator", "arguments": map[string]any{"operation": "add", "a": 1}})
	wantStatus(t, b, 200)
	close(release)
	if st := <-first; st != 200 {
		t.Fatalf("the first compare: %d", st)
	}
	// Done, the caller may compare again.
	a = r.do(t, "POST", "/api/v1/mcp/compare", "", map[string]any{"operation": "calculator", "arguments": map[string]any{"operation": "add", "a": 1}})
	wantStatus(t, a, 200)
}

// TestOrchestrateBodyInDocument checks that the OpenAPI document takes
// the orchestrate bodies the face takes: a request, a plan alone, both;
// and refuses the one it refuses (neither).
func TestOrchestrateBodyInDocument(t *testing.T) {
	schema := loadDoc(t).Components.Schemas["OrchestrateRequest"].Value
	plan := map[string]any{"subtasks": []any{map[string]any{"id": "a", "text": "t", "skill": "ping"}}}
	for _, c := range []struct {
		body map[string]any
		ok   bool
	}{
		{map[string]any{"request": "do it"}, true},
		{map[string]any{"plan": plan}, true},
		{map[string]any{"request": "do it", "plan": plan}, true},
		{map[string]any{}, false},
	} {
		if err := schema.VisitJSON(c.body); (err == nil) != c.ok {
			t.Errorf("%v: the document says %v, the face accepts it: %v", c.body, err, c.ok)
		}
	}
}

// TestCompareDemoReadOnly: the example's calculator (examples/orchestrate,
// its skills file as written, the demotools program swapped for a
// template) declares "read_only": true, so the MCP face lists it with
// readOnlyHint and compare runs it every time through each face.
func TestCompareDemoReadOnly(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", "orchestrate", "agents", "front.json"))
	if err != nil {
		t.Fatal(err)
	}
	var demo struct {
		Skills []map[string]any `json:"skills"`
	}
	if err := json.Unmarshal(raw, &demo); err != nil {
		t.Fatal(err)
	}
	var calc map[string]any
	for _, sk := range demo.Skills {
		if sk["name"] == "calculator" {
			calc = sk
		}
	}
	if calc == nil {
		t.Fatal("front.json has no calculator")
	}
	calc["handler"] = map[string]any{"type": "template", "template": "{{.operation}} {{.a}} {{.b}}"}
	file := filepath.Join(t.TempDir(), "skills.json")
	b, err := json.Marshal(map[string]any{"skills": []any{calc}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, func(c *node.Config) {
		c.SkillsFile = file
		c.PolicyFile = writePolicy(t, `{"grants":{"http":["calculator"]}}`)
	})
	a := r.do(t, "POST", "/api/v1/mcp/compare", "", map[string]any{"operation": "calculator", "arguments": map[string]any{"operation": "add", "a": 2, "b": 3}})
	wantStatus(t, a, 200)
	var c compareAnswer
	if err := json.Unmarshal(a.body, &c); err != nil {
		t.Fatal(err)
	}
	if c.Runs != 3 || c.REST.Runs != 3 || c.MCP.Runs != 3 || !strings.Contains(c.RunsWhy, "declares readOnlyHint") {
		t.Errorf("the demo calculator: runs %d/%d/%d, runs_why %q; want 3 each, for its readOnlyHint: %s", c.Runs, c.REST.Runs, c.MCP.Runs, c.RunsWhy, a.body)
	}
}
