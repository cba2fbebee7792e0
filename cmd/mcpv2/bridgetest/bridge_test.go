package bridgetest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/protocol"
)

// request is the two-step plan of the acceptance: the heuristic planner
// routes "7 times 6" to calculator and "the weather in Tokyo" to weather.
const request = "what is 7 times 6 and what is the weather in Tokyo"

// waitFor is how long a wait on a state of the mesh (a published card, a
// health check) may take before the test fails; the waits poll, and
// return as soon as the state is there.
const waitFor = 45 * time.Second

// TestBridgeAcceptance is issue 23's acceptance 2, for each A2A version of
// the external agent (v1.0 with a signed card, streamed; v0.3 unsigned,
// polled), each in a mesh of its own:
//
//   - math: a mesh agent with examples/orchestrate's calculator
//     (demotools), an edge, the mesh's bootstrap;
//   - bridge: a node with an a2a skill (js_echo → the agent's echo) and
//     --outbound-allow 127.0.0.1/32, which bridges the agent (mcpv2 agents
//     add --bridge) and whose policy lets the callers math forwards run
//     the bridged weather;
//   - weather: a second provider of weather (demotools), started last.
//
// 1. mcpv2 call <bridge> js_echo runs the agent's echo over the mesh.
// 2. After agents add --bridge, mcpv2 find weather names the agent, its
// URL and the bridging peer.
// 3. mcpv2 orchestrate answers the two-step request: calculator on math,
// weather on the bridge (the JS agent's answer).
// 4. The MCP go-sdk client, given math's /mcp and a key made with mcpv2
// key add on math, calls mesh_find then mesh_call, which reaches the agent
// through the bridge.
// 5. The agent is killed: agents list --json shows it unhealthy, the
// bridge's weather fails at once naming that, and orchestrate answers the
// weather from the other provider.
func TestBridgeAcceptance(t *testing.T) {
	for _, v := range []struct {
		version string
		args    []string
		signed  bool
	}{
		{"1.0", []string{"--version", "1.0", "--sign"}, true},
		{"0.3", []string{"--version", "0.3", "--no-streaming"}, false},
	} {
		t.Run("a2a-"+v.version, func(t *testing.T) {
			t.Parallel()
			name := "js-weather-" + v.version
			agent := testenv.StartA2AAgent(t, append(v.args, "--weather", "--name", name)...)
			bridgeScenario(t, agent, name, v.version, v.signed)
		})
	}
}

func bridgeScenario(t *testing.T, agent *testenv.A2AAgent, agentName, version string, signed bool) {
	math := startNode(t, "math", "--skills", exampleAgent(t, "math"), "--port", "0")
	boot := math.p2pAddr()
	skills := filepath.Join(t.TempDir(), "skills.json")
	writeJSON(t, skills, map[string]any{"skills": []any{map[string]any{
		"name": "js_echo", "description": "the echo of an A2A agent outside the mesh",
		"handler": map[string]any{"type": "a2a", "url": agent.URL, "skill": "echo", "timeout_s": 20},
	}}})
	// The callers that math forwards (its MCP face's mesh_call) may run
	// the bridged weather here: the bridge's operator grants it.
	policy := testenv.PolicyFile(t, map[string][]string{"via:" + math.peerID(): {"weather"}})
	bridge := startNode(t, "bridge", "--skills", skills, "--policy", policy, "--outbound-allow", "127.0.0.1/32",
		"--agents-interval", "1s", "--bootstrap", boot)
	cli := t.TempDir() // the client's data dir: one identity for its calls

	// 1. The agent through the bridge's a2a skill, from another process of
	// the mesh.
	out, errs, code := client(t, cli, boot, "call", bridge.peerID(), "js_echo", `{"text":"from the mesh, A2A `+version+`"}`)
	var echo struct {
		State, Text string
		TaskID      string `json:"task_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &echo) != nil || echo.State != "completed" || echo.Text != "from the mesh, A2A "+version || echo.TaskID == "" {
		t.Fatalf("1. mcpv2 call <bridge> js_echo: exit %d\n%s\n%s", code, out, errs)
	}

	// 2. agents add --bridge, then find.
	out, errs, code = testenv.Run(t, binPath, "agents", "add", agent.URL, "--bridge", "--data-dir", bridge.dataDir())
	if code != 0 || !strings.Contains(out, agentName+" (A2A "+version+"), bridged into the mesh by this node") || !strings.Contains(out, "weather") {
		t.Fatalf("2. mcpv2 agents add --bridge: exit %d\n%s\n%s", code, out, errs)
	}
	// A node without --outbound-allow keeps to the outbound scope: the
	// agent on loopback is refused, and the error says which flag allows it.
	out, errs, code = testenv.Run(t, binPath, "agents", "add", agent.URL, "--bridge", "--data-dir", math.dataDir())
	if code == 0 || !strings.Contains(errs, "outbound scope: 127.0.0.1 is a loopback address") || !strings.Contains(errs, "--outbound-allow") {
		t.Fatalf("2. agents add on a node without --outbound-allow: exit %d\n%s\n%s", code, out, errs)
	}
	listed := agentsList(t, bridge)
	if len(listed) != 1 || listed[0].URL != agent.URL || !listed[0].Healthy || !listed[0].Bridged || listed[0].Signed != signed ||
		listed[0].ProtocolVersion != version || listed[0].BridgedBy != bridge.peerID() {
		t.Fatalf("2. agents list --json after add: %+v", listed)
	}
	waitFind(t, cli, boot, "weather", "the bridged agent", func(res []protocol.FindResult) bool {
		return slices.ContainsFunc(res, func(r protocol.FindResult) bool {
			return r.Bridged != nil && r.Bridged.URL == agent.URL && r.Card.PeerID == bridge.peerID() && r.Reachable
		})
	})
	out, errs, code = client(t, cli, boot, "find", "weather")
	if code != 0 || !strings.Contains(out, agentName+" (A2A agent "+agent.URL+", bridged by bridge)") || !strings.Contains(out, bridge.peerID()) {
		t.Fatalf("2. mcpv2 find weather does not name the agent, its URL and the bridging peer: exit %d\n%s\n%s", code, out, errs)
	}

	// find --task asks the running bridge, which ranks its own agents too.
	if m := findTask(t, bridge, agent.URL); m == nil || m.Kind != "bridged" || m.PeerID != bridge.peerID() || !m.Healthy {
		t.Fatalf("2. find --task on the bridge: the agent at %s is not a healthy bridged match: %+v", agent.URL, m)
	}

	// 3. The two-step plan: calculator on math, weather through the bridge.
	waitFind(t, cli, boot, "calculator", "math", func(res []protocol.FindResult) bool {
		return slices.ContainsFunc(res, func(r protocol.FindResult) bool { return r.Card.PeerID == math.peerID() })
	})
	res, raw := orchestrate(t, cli, boot)
	calc, weather := res.subtask("calculator"), res.subtask("weather")
	if res.Status != "completed" || calc == nil || weather == nil || calc.Agent != math.peerID() || calc.Status != "done" ||
		!strings.Contains(string(calc.Result), `"result":42`) || weather.Agent != bridge.peerID() || weather.Status != "done" {
		t.Fatalf("3. orchestrate: want calculator done on math (%s) and weather done on the bridge (%s):\n%s", math.peerID(), bridge.peerID(), raw)
	}
	var wr struct {
		State string
		Data  struct{ City, Source string }
	}
	if json.Unmarshal(weather.Result, &wr) != nil || wr.State != "completed" || wr.Data.City != "Tokyo" || wr.Data.Source != agentName ||
		!strings.Contains(res.Answer, "42") || !strings.Contains(res.Answer, "Tokyo: 19 °C, light rain ("+agentName+")") {
		t.Fatalf("3. orchestrate: the weather is not the JS agent's answer, or the answer lacks a step:\n%s", raw)
	}

	// 4. An MCP client with math's URL and a key its owner made.
	key := math.addKey(t, "mcp-user", "--grant", "weather")
	cs := connectMCP(t, math.mcpURL(), key)
	found := callTool(t, cs, "mesh_find", map[string]any{"skill": "weather"}, false)
	var ff struct{ Agents []foundAgent }
	if err := json.Unmarshal([]byte(found), &ff); err != nil {
		t.Fatalf("4. mesh_find: %v: %s", err, found)
	}
	i := slices.IndexFunc(ff.Agents, func(a foundAgent) bool { return a.URL == agent.URL })
	if i < 0 || ff.Agents[i].PeerID != bridge.peerID() || ff.Agents[i].BridgedBy != "bridge" || ff.Agents[i].Name != agentName ||
		!slices.Contains(ff.Agents[i].Skills, "weather") {
		t.Fatalf("4. mesh_find weather does not name the bridged agent (peer %s, bridged by bridge): %s", bridge.peerID(), found)
	}
	called := callTool(t, cs, "mesh_call", map[string]any{"peer": ff.Agents[i].PeerID, "skill": "weather", "arguments": map[string]any{"city": "Lisbon"}}, false)
	if !strings.Contains(called, `"state":"completed"`) || !strings.Contains(called, `"city":"Lisbon"`) || !strings.Contains(called, `"source":"`+agentName+`"`) {
		t.Fatalf("4. mesh_call weather through the bridge: %s", called)
	}
	// The key grants weather only: the bridge's echo is refused at math.
	if refused := callTool(t, cs, "mesh_call", map[string]any{"peer": bridge.peerID(), "skill": "js_echo", "arguments": map[string]any{"text": "x"}}, true); !strings.Contains(refused, "-32009") {
		t.Fatalf("4. mesh_call js_echo with a key that grants weather only: %s", refused)
	}

	// 5. A second provider of weather, then the agent killed.
	other := startNode(t, "weather", "--skills", exampleAgent(t, "weather"), "--bootstrap", boot)
	waitFind(t, cli, boot, "weather", "the second provider", func(res []protocol.FindResult) bool {
		return slices.ContainsFunc(res, func(r protocol.FindResult) bool { return r.Card.PeerID == other.peerID() })
	})
	agent.Stop()
	deadline := time.Now().Add(waitFor)
	for {
		listed = agentsList(t, bridge)
		if len(listed) == 1 && !listed[0].Healthy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5. the killed agent is still healthy after %v: %+v", waitFor, listed)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if listed[0].LastError == "" || !listed[0].Bridged {
		t.Fatalf("5. the unhealthy agent has no last error, or is no longer bridged: %+v", listed[0])
	}
	if m := findTask(t, bridge, agent.URL); m == nil || m.Healthy {
		t.Fatalf("5. find --task on the bridge still has the killed agent healthy: %+v", m)
	}
	// The bridge republishes its card: the mesh sees the agent unreachable.
	waitFind(t, cli, boot, "weather", "the bridged agent unreachable", func(res []protocol.FindResult) bool {
		return slices.ContainsFunc(res, func(r protocol.FindResult) bool {
			return r.Bridged != nil && r.Bridged.URL == agent.URL && !r.Bridged.Healthy && !r.Reachable
		})
	})
	out, errs, code = client(t, cli, boot, "call", bridge.peerID(), "weather", `{"city":"Tokyo"}`)
	if code == 0 || !strings.Contains(errs, "unhealthy") || !strings.Contains(errs, agent.URL) {
		t.Fatalf("5. the bridge's weather with its agent down: exit %d\n%s\n%s", code, out, errs)
	}
	res, raw = orchestrate(t, cli, boot)
	calc, weather = res.subtask("calculator"), res.subtask("weather")
	if res.Status != "completed" || calc == nil || weather == nil || calc.Status != "done" || weather.Status != "done" ||
		weather.Agent != other.peerID() || !strings.Contains(string(weather.Result), `"city":"Tokyo"`) || strings.Contains(string(weather.Result), agentName) {
		t.Fatalf("5. orchestrate after the kill: want weather done on the other provider (%s):\n%s", other.peerID(), raw)
	}
	t.Logf("5. weather tried %v (bridge %s, other %s); answer: %s", weather.Tried, bridge.peerID(), other.peerID(), res.Answer)
}

// foundAgent is one agent of a mesh_find answer.
type foundAgent struct {
	PeerID    string `json:"peer_id"`
	Name      string
	URL       string
	BridgedBy string `json:"bridged_by"`
	Skills    []string
}

// agent is one entry of `mcpv2 agents list --json`.
type agent struct {
	URL             string `json:"url"`
	ProtocolVersion string `json:"protocol_version"`
	Healthy         bool   `json:"healthy"`
	Signed          bool   `json:"signed"`
	Bridged         bool   `json:"bridged"`
	BridgedBy       string `json:"bridged_by"`
	LastError       string `json:"last_error"`
}

// agentsList runs `mcpv2 agents list --json` against the node.
func agentsList(t *testing.T, p *proc) []agent {
	t.Helper()
	out, errs, code := testenv.Run(t, binPath, "agents", "list", "--json", "--data-dir", p.dataDir())
	var list []agent
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("mcpv2 agents list --json: exit %d\n%s\n%s", code, out, errs)
	}
	return list
}

// findTask runs `mcpv2 find --task "the weather of a city" --json` against
// the running node p and returns its match of the agent at url, nil
// without one.
func findTask(t *testing.T, p *proc, url string) *protocol.TaskMatch {
	t.Helper()
	out, errs, code := testenv.Run(t, binPath, "find", "--task", "the current weather of a city", "--json", "--data-dir", p.dataDir())
	var matches []protocol.TaskMatch
	if code != 0 || json.Unmarshal([]byte(out), &matches) != nil {
		t.Fatalf("mcpv2 find --task: exit %d\n%s\n%s", code, out, errs)
	}
	for i := range matches {
		if matches[i].URL == url {
			return &matches[i]
		}
	}
	return nil
}

// waitFind runs `mcpv2 find SKILL --json` until ok holds for its results
// (the cards are published in the background), for up to waitFor.
func waitFind(t *testing.T, cli, boot, skill, what string, ok func([]protocol.FindResult) bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		out, errs, code := client(t, cli, boot, "find", skill, "--json")
		var res []protocol.FindResult
		if code == 0 && json.Unmarshal([]byte(out), &res) == nil && ok(res) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mcpv2 find %s does not show %s after %v: exit %d\n%s\n%s", skill, what, waitFor, code, out, errs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// orchResult is the result line of `mcpv2 orchestrate --json`.
type orchResult struct {
	Status   string    `json:"status"`
	Answer   string    `json:"answer"`
	Subtasks []subtask `json:"subtasks"`
}

// subtask is one subtask of an orchestration's result.
type subtask struct {
	ID     string          `json:"id"`
	Skill  string          `json:"skill"`
	Agent  string          `json:"agent"`
	Status string          `json:"status"`
	Tried  []string        `json:"tried"`
	Result json.RawMessage `json:"result"`
}

// subtask returns the subtask of skill, nil without one.
func (r *orchResult) subtask(skill string) *subtask {
	for i := range r.Subtasks {
		if r.Subtasks[i].Skill == skill {
			return &r.Subtasks[i]
		}
	}
	return nil
}

// orchestrate runs `mcpv2 orchestrate REQUEST --json` and returns its
// result line, and everything it printed (for failure messages).
func orchestrate(t *testing.T, cli, boot string) (*orchResult, string) {
	t.Helper()
	out, errs, code := client(t, cli, boot, "orchestrate", request, "--json")
	raw := fmt.Sprintf("exit %d\n%s\nstderr: %s", code, out, errs)
	var res *orchResult
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Type == "result" {
			res = &orchResult{}
			if err := json.Unmarshal(sc.Bytes(), res); err != nil {
				t.Fatalf("orchestrate: the result line does not decode: %v\n%s", err, raw)
			}
		}
	}
	if res == nil {
		t.Fatalf("orchestrate printed no result line:\n%s", raw)
	}
	return res, raw
}

// bearer adds a key to every request, as an MCP client configured with
// one sends it.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

// connectMCP connects the go-sdk's MCP client to url with key as its
// bearer credential; the session is closed when the test ends.
func connectMCP(t *testing.T, url, key string) *sdk.ClientSession {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := sdk.NewClient(&sdk.Implementation{Name: "bridgetest", Version: "1"}, nil)
	cs, err := c.Connect(ctxT(t), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{key: key, next: tr}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("MCP connect %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls an MCP tool and returns its structured content (JSON);
// the result must be an error exactly when wantErr.
func callTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any, wantErr bool) string {
	t.Helper()
	res, err := cs.CallTool(ctxT(t), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if res.IsError != wantErr {
		t.Fatalf("tools/call %s %v: isError %v, want %v: %s", name, args, res.IsError, wantErr, b)
	}
	return string(b)
}

// writeJSON writes v as JSON to path.
func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
