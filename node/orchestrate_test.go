package node

import (
	"context"
	"encoding/json"
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
		c.PolicyFile = writePolicy(t, map[string][]string{"http": {"orchestrate"}})
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := o.Find(ctxT(t), "weather", 5)
		if err == nil && len(res) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("O never found the weather skill")
		}
		time.Sleep(200 * time.Millisecond)
	}
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
