package node

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/node/orchestrate"
	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

// TestOrchestrateSkillUsesCallersGrants: the orchestrate skill of node O
// runs its subtasks on the mesh with its caller's grants, never O's own
// (the gateway's rule, SPEC §6). A secret holder's orchestration reaches
// agent P's granted skill; an anonymous caller that O lets run orchestrate
// but not "weather" gets a subtask refused -32009 by O, and P never sees
// the call; nor can an orchestration run orchestrate again.
func TestOrchestrateSkillUsesCallersGrants(t *testing.T) {
	secret := []byte("orch-secret")
	mesh := func(boot ...string) func(*Config) {
		return func(c *Config) {
			c.Secret = secret
			c.Mesh = &MeshConfig{Bootstrap: boot, NoMDNS: true, NoNAT: true}
			c.ListenAddrs = []string{"/ip4/127.0.0.1/tcp/0"}
		}
	}
	root := newTestNode(t, mesh())
	boot := root.P2PAddrs()[0]
	p := newTestNode(t, mesh(boot))
	skills.Add(p.Registry(), "weather", "Weather for a city", []string{"weather"}, func(_ context.Context, in struct {
		City string `json:"city"`
	}) (map[string]any, error) {
		return map[string]any{"city": in.City, "temperature_c": 24}, nil
	})
	p.CardChanged()
	o := newTestNode(t, func(c *Config) {
		mesh(boot)(c)
		pol := filepath.Join(t.TempDir(), "policy.json")
		if err := os.WriteFile(pol, []byte(`{"grants": {"http": ["orchestrate"], "*": ["orchestrate"]}, "limits": {"weather": "1/h"}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		c.PolicyFile = pol
	})
	waitFound(t, o, "weather")
	call := func(c Caller, args string) (orchestrate.Result, *protocol.Error) {
		t.Helper()
		msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"orchestrate","arguments":` + args + `}}`
		out, refused := o.Handle(ctxT(t), c, []byte(msg))
		if refused != nil {
			t.Fatalf("refused: %v", refused)
		}
		var r protocol.Response
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		var res orchestrate.Result
		if r.Error == nil {
			if err := json.Unmarshal(r.Result, &res); err != nil {
				t.Fatal(err)
			}
		}
		return res, r.Error
	}
	req := `{"request":"what is the weather in Tokyo"}`
	holder := Caller{ID: "ip:10.0.0.1", Via: "http", Kind: protocol.CallerSecretHolder}
	res, perr := call(holder, req)
	if perr != nil || res.Status != orchestrate.StatusCompleted || len(res.Subtasks) != 1 || res.Subtasks[0].Agent != p.PeerID() ||
		!strings.Contains(string(res.Subtasks[0].Result), "Tokyo") {
		t.Fatalf("secret holder's orchestration: %+v %v", res, perr)
	}
	// O's audit log names the subtask, its agent and the caller.
	lines := readAudit(t, o)
	var traced bool
	for _, l := range lines {
		traced = traced || (l["method"] == "orchestrate tools/call "+p.PeerID() && l["skill"] == "weather" && l["caller"] == holder.ID && l["outcome"] == "ok")
	}
	if !traced {
		t.Errorf("no audit line on O for the forwarded subtask: %v", lines[len(lines)-3:])
	}
	// One trace: the orchestration on O, its subtask's line there, and the
	// subtask's run on P.
	traces := map[string]bool{}
	for _, l := range lines {
		if l["skill"] == "orchestrate" || l["method"] == "orchestrate tools/call "+p.PeerID() {
			traces[l["trace"].(string)] = true
		}
	}
	if pt, _ := lastTrace(t, p); len(traces) != 1 || !traces[pt] {
		t.Errorf("the orchestration's traces on O %v, the subtask's on P %s: want one", traces, pt)
	}
	// The policy's per-skill limit binds the caller's subtasks as its own calls.
	if res, perr = call(holder, req); perr != nil || res.Status != orchestrate.StatusFailed || !strings.Contains(res.Subtasks[0].Error, "rate limited") {
		t.Fatalf("a second weather subtask within the caller's 1/h: %+v %v", res, perr)
	}

	pBefore := len(readAudit(t, p))
	anon := Caller{ID: "ip:10.0.0.2", Via: "http", Kind: protocol.CallerAnonymous}
	res, perr = call(anon, req)
	if perr != nil || res.Status != orchestrate.StatusFailed || len(res.Subtasks) != 1 || !strings.Contains(res.Subtasks[0].Error, "not permitted") {
		t.Fatalf("anonymous orchestration of an ungranted skill: want the subtask refused, got %+v %v", res, perr)
	}
	for _, l := range readAudit(t, p)[pBefore:] {
		if l["skill"] == "weather" {
			t.Fatalf("the refused subtask reached P: %v", l)
		}
	}
	// A mesh peer without a session, whose subtask runs on O itself: O's
	// own dispatch refuses what O's policy does not grant that PeerID.
	skills.Add(o.Registry(), "secrets", "Operator-only", []string{"weather"}, func(context.Context, struct{}) (string, error) { return "s3cr3t", nil })
	o.CardChanged()
	waitFound(t, o, "secrets")
	peerCaller := Caller{ID: p.PeerID(), Via: "mesh", Kind: protocol.CallerPeer}
	own := `{"request":"x","plan":{"subtasks":[{"id":"a","text":"the secrets","skill":"secrets","arguments":{}}]}}`
	res, perr = call(peerCaller, own)
	if perr != nil || res.Status != orchestrate.StatusFailed || !strings.Contains(res.Subtasks[0].Error, "not permitted") || strings.Contains(string(res.Subtasks[0].Result), "s3cr3t") {
		t.Fatalf("a mesh peer's subtask on O itself: %+v %v", res, perr)
	}
	// Not even for a secret holder: an orchestration inside an orchestration.
	plan := `{"request":"loop","plan":{"subtasks":[{"id":"a","text":"again","skill":"orchestrate","arguments":{"request":"x"}}]}}`
	res, perr = call(holder, plan)
	if perr != nil || res.Status != orchestrate.StatusFailed || !strings.Contains(res.Subtasks[0].Error, "another orchestration") {
		t.Fatalf("nested orchestration: %+v %v", res, perr)
	}
	// A bad plan is the caller's error.
	if _, perr = call(holder, `{"request":"x","plan":{"subtasks":[{"id":"a","skill":"weather","arguments":{},"depends_on":["a"]}]}}`); perr == nil || perr.Code != protocol.CodeInvalidParams {
		t.Fatalf("a plan that depends on itself: %v, want -32602", perr)
	}
}

// waitFound waits until n finds an agent offering skill.
func waitFound(t *testing.T, n *Node, skill string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := n.Find(ctxT(t), skill, 5)
		if err == nil && len(res) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never found the %s skill", skill)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestFitResult(t *testing.T) {
	res := orchestrate.Result{Subtasks: []orchestrate.SubtaskResult{
		{ID: "a", Result: json.RawMessage(`"` + strings.Repeat("a", 600) + `"`)},
		{ID: "b", Result: json.RawMessage(`"` + strings.Repeat("b", 100) + `"`)},
		{ID: "c", Result: json.RawMessage(`"` + strings.Repeat("c", 500) + `"`)},
	}}
	fitResult(&res, 700)
	if res.Subtasks[0].Result != nil || !strings.Contains(res.Subtasks[0].Error, "602 bytes was dropped") ||
		res.Subtasks[1].Result == nil || res.Subtasks[2].Result == nil {
		t.Fatalf("fitResult: %+v", res.Subtasks)
	}
}
