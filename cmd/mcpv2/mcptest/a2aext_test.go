package mcptest

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/internal/netscope"
	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/node/a2aclient"
)

// TestA2AExternalCLI: mcpv2 card, call and ping against external A2A
// agents (@a2a-js/sdk 1.3.0's server, not mcpv2) in v1.0 and v0.3, by
// their base URL and by their card's URL.
func TestA2AExternalCLI(t *testing.T) {
	v1 := testenv.StartA2AAgent(t, "--version", "1.0", "--sign")
	v03 := testenv.StartA2AAgent(t, "--version", "0.3", "--no-streaming")

	code, out, errs := mcpv2(t, "card", v1.URL)
	if code != 0 || !strings.Contains(out, `"name": "js-agent"`) || !strings.Contains(errs, "A2A 1.0 agent (card self-signed (key embedded in the card): intact, author unproven") {
		t.Fatalf("card v1.0: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = mcpv2(t, "call", v1.URL, "echo", `{"text":"from the CLI"}`)
	var r struct {
		TaskID, State, Text string
		Data                json.RawMessage
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.State != "completed" || r.Text != "from the CLI" {
		t.Fatalf("call echo v1.0: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = mcpv2(t, "call", v03.URL+"/.well-known/agent-card.json", "add", `{"a":20,"b":22}`)
	if code != 0 || !strings.Contains(out, `"data":{"sum":42}`) || !strings.Contains(errs, "A2A 0.3 agent (card unsigned") {
		t.Fatalf("call add v0.3: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = mcpv2(t, "ping", v03.URL, "--count", "2", "--interval", "1ms")
	if code != 0 || strings.Count(out, "card from js-agent (A2A 0.3)") != 2 || !strings.Contains(out, "2 pings") {
		t.Fatalf("ping v0.3: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = mcpv2(t, "call", v1.URL, "nope", `{}`)
	if code == 0 || !strings.Contains(errs, `no skill "nope"`) {
		t.Fatalf("call of an unknown skill: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestA2ASkillThroughNode: a node's "a2a" custom skill forwards to the
// external agent, reached by mcpv2 call through the node's edge; the
// multi-turn skill continues its task; a node without --outbound-allow
// refuses the agent on 127.0.0.1 and says which flag allows it.
func TestA2ASkillThroughNode(t *testing.T) {
	agent := testenv.StartA2AAgent(t, "--version", "1.0")
	skillsFile := filepath.Join(t.TempDir(), "skills.json")
	err := os.WriteFile(skillsFile, []byte(`{"skills": [
		{"name": "remote_echo", "handler": {"type": "a2a", "url": "`+agent.URL+`", "skill": "echo", "timeout_s": 30}},
		{"name": "remote_ask", "handler": {"type": "a2a", "url": "`+agent.URL+`", "skill": "ask"}}]}`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	edgeOf := func(p *proc) string { return "mcpv2://127.0.0.1:" + p.first("MCPV2_BOUND_PORT") + "/mcpv2" }

	open := startNodeWithPolicy(t, grantHTTPAll, "--skills", skillsFile, "--port", "0", "--outbound-allow", "127.0.0.0/8")
	code, out, errs := mcpv2(t, "call", edgeOf(open), "remote_echo", `{"text":"via the mesh"}`)
	if code != 0 || !strings.Contains(out, `"text":"via the mesh"`) || !strings.Contains(out, `"state":"completed"`) {
		t.Fatalf("remote_echo: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = mcpv2(t, "call", edgeOf(open), "remote_ask", `{"text":"hi"}`)
	var r struct {
		TaskID    string `json:"task_id"`
		ContextID string `json:"context_id"`
		State     string `json:"state"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.State != "input-required" {
		t.Fatalf("ask, first turn: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = mcpv2(t, "call", edgeOf(open), "remote_ask", `{"text":"Lin","task_id":"`+r.TaskID+`","context_id":"`+r.ContextID+`"}`)
	if code != 0 || !strings.Contains(out, `"text":"hello Lin"`) {
		t.Fatalf("ask, second turn: exit %d\n%s\n%s", code, out, errs)
	}

	// The client verifies an mcpv2 edge's own card too: its signature's
	// kid is the node's PeerID, whose Ed25519 key verifies it.
	hc := netscope.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}).Client(0)
	defer hc.CloseIdleConnections()
	ac, err := a2aclient.New(a2aclient.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	card, err := ac.Card(ctxT(t), "http://127.0.0.1:"+open.first("MCPV2_BOUND_PORT"))
	if err != nil || !card.Signed || card.ProtocolVersion != "1.0" {
		t.Errorf("the mcpv2 edge's card: %+v, %v; want it signed (PeerID kid) and verified, v1.0", card, err)
	}

	closed := startNodeWithPolicy(t, grantHTTPAll, "--skills", skillsFile, "--port", "0")
	code, out, errs = mcpv2(t, "call", edgeOf(closed), "remote_echo", `{"text":"x"}`)
	if code == 0 || !strings.Contains(errs, "outbound scope") || !strings.Contains(errs, "--outbound-allow") {
		t.Fatalf("without --outbound-allow: exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(closed.Log.String(), "127.0.0.1 is a loopback address") {
		t.Errorf("the node's log does not name the refused address:\n%s", closed.Log.String())
	}
}
