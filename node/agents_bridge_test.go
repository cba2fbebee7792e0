package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/node/a2aclient"
	"github.com/mcpv2/mcpv2/node/orchestrate"
	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

// extAgents stands in for the A2A client in the mesh-side test of the
// bridge: agents by URL, each up or down, recording the calls that reach
// them. (The end-to-end proof against a real @a2a-js/sdk agent is
// cmd/mcpv2's, through the real client.)
type extAgents struct {
	mu    sync.Mutex
	down  map[string]bool
	calls []string
}

func (e *extAgents) Card(_ context.Context, url string) (*a2aclient.Card, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.down[url] {
		return nil, fmt.Errorf("a2a agent %s: card: %w", url, &neturl.Error{Op: "Get", URL: url + "/.well-known/agent-card.json",
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}})
	}
	return &a2aclient.Card{URL: url, Name: "Lingo Agent", Description: "translates text between languages", ProtocolVersion: "1.0",
		Skills: []a2aclient.Skill{
			{ID: "translate", Name: "Translate", Description: "translate text to another language", Tags: []string{"language"}},
			{ID: "ping", Name: "Ping", Description: "the agent's own liveness probe"},
		}, FetchedAt: time.Now()}, nil
}

func (e *extAgents) Call(_ context.Context, card *a2aclient.Card, skill string, args json.RawMessage) (json.RawMessage, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, card.URL+" "+skill)
	return json.RawMessage(`{"translated_by":"` + card.Name + `","args":` + string(args) + `}`), nil
}

func (e *extAgents) setDown(url string, down bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.down[url] = down
}

// TestBridgeAgentIntoMesh: node B bridges an external agent: its skills
// become B's (ping, taken by B's own, as "lingo-agent.ping"), B's signed
// card lists it, a finder F finds it as its own result naming B, and a
// call through B reaches the agent. Only the operator registers. When the
// agent goes down, B's entry says unhealthy, the skill answers a clear
// error at once, and F's orchestrator prefers another provider. Removing
// it takes its skills off B.
func TestBridgeAgentIntoMesh(t *testing.T) {
	secret := []byte("bridge-secret")
	ext := &extAgents{down: map[string]bool{}}
	const url = "http://lingo.example"
	mesh := func(boot ...string) func(*Config) {
		return func(c *Config) {
			c.Secret = secret
			c.Mesh = &MeshConfig{Bootstrap: boot, NoMDNS: true, NoNAT: true}
			c.ListenAddrs = []string{"/ip4/127.0.0.1/tcp/0"}
		}
	}
	root := newTestNode(t, mesh())
	boot := root.P2PAddrs()[0]
	b := newTestNode(t, func(c *Config) {
		mesh(boot)(c)
		c.Agents = AgentsConfig{Resolver: ext, Interval: time.Hour}
	})
	p := newTestNode(t, mesh(boot))
	skills.Add(p.Registry(), "translate", "translate text, the mesh's own way", []string{"language"}, func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return "p:" + in.Text, nil
	})
	p.CardChanged()
	f := newTestNode(t, mesh(boot))

	anon := Caller{ID: "ip:10.0.0.9", Via: "http", Kind: protocol.CallerAnonymous}
	if _, err := b.AddAgents(ctxT(t), anon, []string{url}, true); codeOf(err) != protocol.CodeNotPermitted {
		t.Fatalf("an anonymous caller registered an agent: %v", err)
	}
	if _, err := b.Agents(ctxT(t), anon); codeOf(err) != protocol.CodeNotPermitted {
		t.Fatalf("an anonymous caller listed agents: %v", err)
	}
	operator := Caller{ID: "local", Via: "local", Kind: protocol.CallerSecretHolder, Owner: protocol.OwnerSecret}
	added, err := b.AddAgents(ctxT(t), operator, []string{url + "/"}, true)
	if err != nil || len(added) != 1 || !added[0].Healthy || !added[0].Bridged || added[0].BridgedBy != b.PeerID() {
		t.Fatalf("add: %+v %v", added, err)
	}
	card := b.Card()
	if len(card.Bridged) != 1 || card.Bridged[0].URL != url || !slices.Equal(card.Bridged[0].Skills, []string{"translate", "lingo-agent.ping"}) {
		t.Fatalf("B's card lists %+v", card.Bridged)
	}
	if _, ok := b.Registry().Lookup("lingo-agent.ping"); !ok {
		t.Fatal("the clashing skill was not bridged qualified")
	}

	// F finds the bridged agent as a result of its own, naming B.
	var found protocol.FindResult
	deadline := time.Now().Add(60 * time.Second)
	for found.Bridged == nil {
		res, _ := f.Find(ctxT(t), "translate", 10)
		for _, r := range res {
			if r.Bridged != nil {
				found = r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("F never found the bridged agent: %+v", res)
		}
		if found.Bridged == nil {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if found.Card.PeerID != b.PeerID() || found.Bridged.URL != url || found.Bridged.Name != "Lingo Agent" || !found.Reachable {
		t.Fatalf("found %+v (bridged %+v)", found, found.Bridged)
	}

	// A call through B reaches the external agent.
	out, err := f.Client().CallSkill(ctxT(t), addrOf(t, b), "translate", json.RawMessage(`{"text":"hola"}`), protocol.CallOptions{})
	if err != nil || !strings.Contains(string(out), `"translated_by":"Lingo Agent"`) || !strings.Contains(string(out), "hola") {
		t.Fatalf("call through the bridge: %s %v", out, err)
	}
	ext.mu.Lock()
	calls := slices.Clone(ext.calls)
	ext.mu.Unlock()
	if !slices.Equal(calls, []string{url + " translate"}) {
		t.Fatalf("the agent saw %v", calls)
	}

	// F ranks the agents for a free-text task: the bridged agent is one.
	matches, err := f.FindAgentsForTask(ctxT(t), "translate this letter to French", 10)
	if err != nil || !slices.ContainsFunc(matches, func(m protocol.TaskMatch) bool {
		return m.Kind == "bridged" && m.URL == url && m.PeerID == b.PeerID() && m.Healthy && m.Score == 2+0.5+1
	}) {
		t.Fatalf("find for a task: %+v %v", matches, err)
	}

	// The agent goes down: B's next check marks it, its skill fails fast
	// and clearly, and F's orchestrator goes to P.
	ext.setDown(url, true)
	b.AgentRegistry().CheckAll(ctxT(t))
	list, err := b.Agents(ctxT(t), operator)
	if err != nil || len(list) != 1 || list[0].Healthy || !strings.Contains(list[0].LastError, "connection refused") {
		t.Fatalf("after the agent went down: %+v %v", list, err)
	}
	_, err = f.Client().CallSkill(ctxT(t), addrOf(t, b), "translate", json.RawMessage(`{"text":"hola"}`), protocol.CallOptions{})
	// A mesh caller reads the URL and a category, not the dial error.
	if codeOf(err) != protocol.CodeToolExecution || !strings.Contains(err.Error(), "unhealthy") ||
		!strings.Contains(err.Error(), url+": unreachable") || strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("a call of the unhealthy agent: %v", err)
	}
	deadline = time.Now().Add(60 * time.Second)
	for {
		res, _ := f.Find(ctxT(t), "translate", 10)
		if slices.ContainsFunc(res, func(r protocol.FindResult) bool { return r.Bridged != nil && !r.Reachable && !r.Bridged.Healthy }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("F never saw the bridged agent unhealthy: %+v", res)
		}
		time.Sleep(200 * time.Millisecond)
	}
	holder := Caller{ID: "ip:10.0.0.1", Via: "http", Kind: protocol.CallerSecretHolder}
	plan := `{"request":"x","plan":{"subtasks":[{"id":"a","text":"translate hola","skill":"translate","arguments":{"text":"hola"}}]}}`
	msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"orchestrate","arguments":` + plan + `}}`
	raw, refused := f.Handle(ctxT(t), holder, []byte(msg))
	if refused != nil {
		t.Fatal(refused)
	}
	var resp protocol.Response
	var res orchestrate.Result
	if err := json.Unmarshal(raw, &resp); err != nil || resp.Error != nil || json.Unmarshal(resp.Result, &res) != nil {
		t.Fatalf("orchestrate: %s", raw)
	}
	if res.Status != orchestrate.StatusCompleted || res.Subtasks[0].Agent != p.PeerID() || !strings.Contains(string(res.Subtasks[0].Result), "p:hola") {
		t.Fatalf("the orchestrator did not go to P: %+v", res)
	}

	// Back up, then removed: the skills leave B.
	ext.setDown(url, false)
	b.AgentRegistry().CheckAll(ctxT(t))
	if list, _ := b.Agents(ctxT(t), operator); !list[0].Healthy {
		t.Fatalf("not healthy again: %+v", list)
	}
	if err := b.RemoveAgent(ctxT(t), operator, url); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Registry().Lookup("translate"); ok {
		t.Fatal("a removed agent's skill is still served")
	}
	if c := b.Card(); len(c.Bridged) != 0 {
		t.Fatalf("a removed agent is still in the card: %+v", c.Bridged)
	}
	var audited bool
	for _, l := range readAudit(t, b) {
		audited = audited || (l["method"] == "agents add" && l["outcome"] == "ok")
	}
	if !audited {
		t.Error("no audit line for the agent's registration")
	}
}

// TestAgentsGrants: the policy knows the agents' pseudo-skills (no
// warning), grants them like skills, and never lets a grantee register.
func TestAgentsGrants(t *testing.T) {
	dir := t.TempDir()
	pol := writePolicy(t, map[string][]string{"http": {DiscoverAgentsGrant, ListAgentsGrant, "no_such_skill"}})
	warns, err := PolicyWarnings(dir, pol, "", false)
	if err != nil || len(warns) != 1 || warns[0].Skill != "no_such_skill" {
		t.Fatalf("warnings: %+v %v", warns, err)
	}
	ext := &extAgents{down: map[string]bool{}}
	n := newTestNode(t, func(c *Config) {
		c.PolicyFile = pol
		c.Agents = AgentsConfig{Resolver: ext, Interval: time.Hour}
	})
	anon := Caller{ID: "ip:10.0.0.3", Via: "http", Kind: protocol.CallerAnonymous}
	got, err := n.DiscoverAgents(ctxT(t), anon, []string{"http://x.example"})
	if err != nil || len(got) != 1 || !got[0].Healthy || got[0].Bridged {
		t.Fatalf("discover by a grantee: %+v %v", got, err)
	}
	if list, err := n.Agents(ctxT(t), anon); err != nil || len(list) != 1 {
		t.Fatalf("list by a grantee: %+v %v", list, err)
	}
	if _, err := n.AddAgents(ctxT(t), anon, []string{"http://x.example"}, true); codeOf(err) != protocol.CodeNotPermitted {
		t.Fatalf("a grantee bridged: %v", err)
	}
	peer := Caller{ID: n.PeerID(), Via: "mesh", Kind: protocol.CallerPeer}
	if _, err := n.DiscoverAgents(ctxT(t), peer, []string{"http://y.example"}); codeOf(err) != protocol.CodeNotPermitted {
		t.Fatalf("discover by a peer without the grant: %v", err)
	}
}

// bigAgents answers cards of 32 skills with long descriptions and tags.
type bigAgents struct{}

func (bigAgents) Card(_ context.Context, url string) (*a2aclient.Card, error) {
	c := &a2aclient.Card{URL: url, Name: "Big " + url, Description: strings.Repeat("d", 1000), FetchedAt: time.Now()}
	for i := range 32 {
		c.Skills = append(c.Skills, a2aclient.Skill{ID: fmt.Sprintf("skill_%d_%s", i, strings.Repeat("x", 40)),
			Description: strings.Repeat("words ", 100), Tags: []string{strings.Repeat("t", 80), "a", "b", "c", "d", "e", "f", "g", "h", "i"}})
	}
	return c, nil
}

func (bigAgents) Call(context.Context, *a2aclient.Card, string, json.RawMessage) (json.RawMessage, error) {
	return nil, nil
}

// TestBridgeCardFits: however many and however large the bridged agents,
// the node's signed card stays publishable, also beside a large set of
// custom skills of the node's own (review item 5: a fixed budget did not
// count them).
func TestBridgeCardFits(t *testing.T) {
	var sk []string
	for i := range 20 {
		sk = append(sk, fmt.Sprintf(`{"name":"custom_%02d","description":"%s","handler":{"type":"template","template":"x"}}`, i, strings.Repeat("c", 150)))
	}
	file := filepath.Join(t.TempDir(), "skills.json")
	if err := os.WriteFile(file, []byte(`{"skills":[`+strings.Join(sk, ",")+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	n := newTestNode(t, func(c *Config) {
		c.SkillsFile = file
		c.Mesh = &MeshConfig{NoMDNS: true, NoNAT: true}
		c.ListenAddrs = []string{"/ip4/127.0.0.1/tcp/0"}
		c.Agents = AgentsConfig{Resolver: bigAgents{}, Interval: time.Hour}
	})
	op := Caller{ID: "local", Kind: protocol.CallerSecretHolder}
	var urls []string
	for i := range 12 {
		urls = append(urls, fmt.Sprintf("http://big%d.example", i))
	}
	if _, err := n.AddAgents(ctxT(t), op, urls, true); err != nil {
		t.Fatal(err)
	}
	card := n.Card()
	if len(card.Bridged) == 0 || len(card.Bridged[0].Skills) == 0 {
		t.Fatalf("nothing bridged: %+v", card.Bridged)
	}
	if _, ok := n.Registry().Lookup("custom_19"); !ok {
		t.Fatal("the custom skills were not loaded")
	}
	if err := n.Discovery().Publish(ctxT(t), card); err != nil {
		t.Fatalf("publish the card with %d bridged agents: %v", len(card.Bridged), err)
	}
}

// oddAgents answers cards whose skill ids are no skill names, or names the
// node reserves, and a skill "translate" for every agent.
type oddAgents struct{ extAgents }

func (o *oddAgents) Card(_ context.Context, url string) (*a2aclient.Card, error) {
	return &a2aclient.Card{URL: url, Name: "Agent " + strings.TrimPrefix(url, "https://"), ProtocolVersion: "1.0", FetchedAt: time.Now(),
		Skills: []a2aclient.Skill{{ID: "evil name\x1b[31m with spaces"}, {ID: SecurityAuditSkill}, {ID: ReadResourceSkill},
			{ID: DiscoverAgentsGrant}, {ID: ListAgentsGrant}, {ID: "mesh_call"}, {ID: "mesh_find"}, {ID: OrchestrateSkill},
			{ID: "scan"}, {ID: "pay"}, {ID: "\x00\x01"}, {ID: "translate"}}}, nil
}

// TestBridgedNamesChecked: a bridged skill's name follows the custom-skill
// rule and takes no pseudo-skill, standard skill, scan, orchestrate or MCP
// face tool name (review item 4).
func TestBridgedNamesChecked(t *testing.T) {
	n := newTestNode(t, func(c *Config) { c.Agents = AgentsConfig{Resolver: &oddAgents{}, Interval: time.Hour} })
	before := map[string]bool{}
	for _, name := range n.Registry().Names() {
		before[name] = true
	}
	op := Caller{ID: "local", Kind: protocol.CallerSecretHolder}
	if _, err := n.AddAgents(ctxT(t), op, []string{"https://odd.example"}, true); err != nil {
		t.Fatal(err)
	}
	rule := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	reserved := reservedNames()
	var bridged []string
	for _, name := range n.Registry().Names() {
		if before[name] {
			continue
		}
		bridged = append(bridged, name)
		if !rule.MatchString(name) || reserved[name] {
			t.Errorf("bridged skill registered as %q", name)
		}
	}
	slices.Sort(bridged)
	want := []string{"agent-odd-example.discover_agents", "agent-odd-example.list_agents", "agent-odd-example.mesh_call",
		"agent-odd-example.mesh_find", "agent-odd-example.orchestrate", "agent-odd-example.pay", "agent-odd-example.read_resource",
		"agent-odd-example.scan", "agent-odd-example.security_audit", "evil-name-31m-with-spaces", "translate"}
	if !slices.Equal(bridged, want) {
		t.Fatalf("bridged %q\nwant %q", bridged, want)
	}
}

// TestBridgedNamesStable: a bridged skill's name comes from its agent
// alone: adding an agent whose skill has the same name never hands the
// name (and its grants) to the new agent, and the names do not depend on
// the order the agents came in (review item 7).
func TestBridgedNamesStable(t *testing.T) {
	targets := func(order []string) map[string]string {
		n := newTestNode(t, func(c *Config) { c.Agents = AgentsConfig{Resolver: &oddAgents{}, Interval: time.Hour} })
		op := Caller{ID: "local", Kind: protocol.CallerSecretHolder}
		for _, u := range order {
			if _, err := n.AddAgents(ctxT(t), op, []string{u}, true); err != nil {
				t.Fatal(err)
			}
			n.bridge.mu.Lock()
			if tr, ok := n.bridge.skills["translate"]; ok && tr.url != order[0] {
				t.Errorf("after adding %s, translate goes to %s, not to %s", u, tr.url, order[0])
			}
			n.bridge.mu.Unlock()
		}
		n.bridge.mu.Lock()
		defer n.bridge.mu.Unlock()
		out := map[string]string{}
		for name, tr := range n.bridge.skills {
			out[name] = tr.url + " " + tr.skill
		}
		return out
	}
	ab := targets([]string{"https://b.example", "https://a.example"})
	ba := targets([]string{"https://a.example", "https://b.example"})
	if fmt.Sprint(ab) != fmt.Sprint(ba) {
		t.Fatalf("names depend on the order:\n%v\n%v", ab, ba)
	}
	if ab["agent-a-example.translate"] != "https://a.example translate" || ab["agent-b-example.translate"] != "https://b.example translate" {
		t.Fatalf("translate of two agents: %v", ab)
	}
	// Two agents of one name are told apart by their URL.
	same := &sameName{}
	n := newTestNode(t, func(c *Config) { c.Agents = AgentsConfig{Resolver: same, Interval: time.Hour} })
	if _, err := n.AddAgents(ctxT(t), Caller{ID: "local", Kind: protocol.CallerSecretHolder}, []string{"https://x.example", "https://y.example"}, true); err != nil {
		t.Fatal(err)
	}
	n.bridge.mu.Lock()
	got := len(n.bridge.skills)
	n.bridge.mu.Unlock()
	if got != 2 {
		t.Fatalf("two agents of one name bridged %d skills, want 2", got)
	}
}

// sameName answers one card name and one skill for every URL.
type sameName struct{ extAgents }

func (*sameName) Card(_ context.Context, url string) (*a2aclient.Card, error) {
	return &a2aclient.Card{URL: url, Name: "Twin", ProtocolVersion: "1.0", FetchedAt: time.Now(), Skills: []a2aclient.Skill{{ID: "echo"}}}, nil
}

// TestDiscoverDoesNotRegister: an anonymous discover_agents grantee cannot
// fill the operator's registry or its file (review item 2); the list shows
// what it found as discovered, with coarse errors.
func TestDiscoverDoesNotRegister(t *testing.T) {
	pol := writePolicy(t, map[string][]string{"http": {DiscoverAgentsGrant, ListAgentsGrant}})
	ext := &extAgents{down: map[string]bool{"https://down.example": true}}
	n := newTestNode(t, func(c *Config) {
		c.PolicyFile = pol
		c.Agents = AgentsConfig{Resolver: ext, Max: 2, Interval: time.Hour}
	})
	anon := Caller{ID: "ip:1.2.3.4", Via: "http", Kind: protocol.CallerAnonymous}
	urls := []string{"https://down.example"}
	for i := range 4 {
		urls = append(urls, fmt.Sprintf("https://attacker%d.example", i))
	}
	got, err := n.DiscoverAgents(ctxT(t), anon, urls)
	if err != nil || got[0].LastError != "https://down.example: unreachable" || !got[1].Discovered {
		t.Fatalf("discover: %+v %v", got, err)
	}
	op := Caller{ID: "local", Via: "local", Kind: protocol.CallerSecretHolder, Owner: protocol.OwnerSecret}
	out, err := n.AddAgents(ctxT(t), op, []string{"https://real.example", "https://real2.example"}, true)
	if err != nil || out[0].LastError != "" || out[1].LastError != "" {
		t.Fatalf("the operator's add after discovers: %+v %v", out, err)
	}
	if b, err := os.ReadFile(filepath.Join(n.cfg.DataDir, "agents.json")); err != nil || strings.Contains(string(b), "attacker") {
		t.Fatalf("agents.json: %s %v", b, err)
	}
	list, err := n.Agents(ctxT(t), anon)
	if err != nil || len(list) != 6 || list[0].Discovered || !list[2].Discovered {
		t.Fatalf("list: %+v %v", list, err)
	}
}

// TestRankTaskWordOrder: the words searched for a task are its first
// words, in the task's order, not the alphabetically first (review item
// 26).
func TestRankTaskWordOrder(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	find := func(_ context.Context, q string, _ int) ([]protocol.FindResult, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, q)
		return nil, nil
	}
	task := "weather forecast zurich tomorrow morning before noon hiking alpine banana apple cherry"
	if _, err := RankAgentsForTask(ctxT(t), find, "self", nil, task, 5); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(asked, "weather") || !slices.Contains(asked, "zurich") || slices.Contains(asked, "apple") {
		t.Fatalf("searched %q for %q", asked, task)
	}
}
