package a2a_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/edge/a2a"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

// TestTextOrchestrate: with WithTextSkill(TextOrchestrate), a plain-text
// A2A task is decomposed by the node's orchestrator into subtasks, run on
// a real mesh agent that has the skills, and answered as one task whose
// artifact holds every part; a data part naming ask still runs ask.
func TestTextOrchestrate(t *testing.T) {
	mesh := func(boot ...string) *node.MeshConfig {
		return &node.MeshConfig{Bootstrap: boot, NoMDNS: true, NoNAT: true}
	}
	root, err := node.New(node.Config{DataDir: t.TempDir(), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Mesh: mesh()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	boot := root.P2PAddrs()[0]
	agent, err := node.New(node.Config{DataDir: t.TempDir(), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Mesh: mesh(boot), Secret: []byte(secret), Name: "tools"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Close() })
	skills.Add(agent.Registry(), "weather", "Weather for a city", []string{"weather", "forecast"}, func(_ context.Context, in struct {
		City string `json:"city"`
	}) (map[string]any, error) {
		return map[string]any{"city": in.City, "temperature_c": 24}, nil
	})
	skills.Add(agent.Registry(), "calculator", "Arithmetic on a and b", []string{"math", "calculator"}, func(_ context.Context, in struct {
		Operation string  `json:"operation"`
		A         float64 `json:"a"`
		B         float64 `json:"b"`
	}) (map[string]any, error) {
		r := in.A + in.B
		if in.Operation == "multiply" {
			r = in.A * in.B
		}
		return map[string]any{"operation": in.Operation, "result": r}, nil
	})
	agent.CardChanged()

	r := newRigOpts(t, func(c *node.Config) { c.Mesh = mesh(boot) }, nil, a2a.WithTextSkill(a2a.TextOrchestrate))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, skill := range []string{"weather", "calculator"} {
		deadline := time.Now().Add(20 * time.Second)
		for {
			found, _ := r.n.Find(ctx, skill, 5)
			if slices.ContainsFunc(found, func(f protocol.FindResult) bool { return f.Card.PeerID == agent.PeerID() }) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the mesh does not list %s's %s", agent.PeerID(), skill)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	res, e := r.rpc(t, r.token(), "1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"text": "what is the weather in Tokyo and what is 7 times 6"})})
	if e != nil {
		t.Fatalf("send: %+v", e)
	}
	var out struct {
		Task struct {
			Status struct {
				State string `json:"state"`
			} `json:"status"`
			Artifacts []struct {
				Name  string `json:"name"`
				Parts []struct {
					Data json.RawMessage `json:"data"`
				} `json:"parts"`
			} `json:"artifacts"`
		} `json:"task"`
	}
	if err := json.Unmarshal(res, &out); err != nil || out.Task.Status.State != "TASK_STATE_COMPLETED" || len(out.Task.Artifacts) != 1 || out.Task.Artifacts[0].Name != "orchestrate" {
		t.Fatalf("text task: %v %s", err, res)
	}
	var result struct {
		Status   string `json:"status"`
		Subtasks []struct {
			Skill  string          `json:"skill"`
			Agent  string          `json:"agent"`
			Result json.RawMessage `json:"result"`
		} `json:"subtasks"`
	}
	parts := out.Task.Artifacts[0].Parts
	if err := json.Unmarshal(parts[len(parts)-1].Data, &result); err != nil {
		t.Fatal(err)
	}
	var ran []string
	for _, s := range result.Subtasks {
		ran = append(ran, s.Skill)
		if s.Agent != agent.PeerID() {
			t.Errorf("subtask %s ran on %s, want the agent %s", s.Skill, s.Agent, agent.PeerID())
		}
	}
	slices.Sort(ran)
	if result.Status != "completed" || strings.Join(ran, ",") != "calculator,weather" || !strings.Contains(string(res), `"result":42`) || !strings.Contains(string(res), "Tokyo") {
		t.Fatalf("the text was not split into weather and calculator: %s", res)
	}

	// A data part naming ask is not rewritten.
	res, e = r.rpc(t, r.token(), "1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "ask", "arguments": map[string]any{"query": "hello"}}})})
	if e != nil || !strings.Contains(string(res), "local responder") {
		t.Fatalf("data part naming ask: %s %+v", res, e)
	}
	if _, err := a2a.New(r.n, a2a.WithTextSkill("summarize")); err == nil || !strings.Contains(err.Error(), "is not ask or orchestrate") {
		t.Errorf("WithTextSkill(summarize): %v", err)
	}
}
