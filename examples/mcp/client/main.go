// Command client is an MCP client of the mcpv2 mesh, on the official go-sdk:
// it starts `mcpv2 mcp` (a node of its own that joins the mesh through
// --bootstrap), lists its tools, finds the agents that offer --skill (a
// skill name, or a tag of a skill) with mesh_find and runs the skill with
// mesh_call on the best of them that is not the bootstrap peer (a relay,
// usually), the next on a failure. For a tag, the skill run is the agent's
// first skill with that tag, read from its card.
//
//	go run ./examples/mcp/client --bootstrap /ip4/…/p2p/12D3KooW… --secret S --skill ping
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	bin := flag.String("mcpv2", "mcpv2", "the mcpv2 command")
	bootstrap := flag.String("bootstrap", "", "a peer of the mesh (an MCPV2_P2P_ADDRESS line)")
	skill := flag.String("skill", "ping", "the skill to find and run: its name, or a tag of it")
	args := flag.String("args", "{}", "the skill's arguments, a JSON object")
	secret := flag.String("secret", os.Getenv("MCPV2_SECRET"), "the mesh's shared secret, so that its agents grant every skill (default $MCPV2_SECRET)")
	flag.Parse()
	if err := run(*bin, *bootstrap, *secret, *skill, json.RawMessage(*args)); err != nil {
		log.Fatal(err)
	}
}

func run(bin, bootstrap, secret, skill string, args json.RawMessage) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "mcpv2-mcp-client-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	argv := []string{"mcp", "--data-dir", dir}
	if bootstrap != "" {
		argv = append(argv, "--bootstrap", bootstrap)
	}
	cmd := exec.Command(bin, argv...)
	cmd.Env = os.Environ()
	if secret != "" {
		cmd.Env = append(cmd.Env, "MCPV2_SECRET="+secret) // not in argv, where ps shows it
	}
	cmd.Stderr = os.Stderr // the node's banner and logs
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpv2-example-client", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return fmt.Errorf("start mcpv2 mcp: %w", err)
	}
	defer cs.Close()
	fmt.Printf("connected: %s %s, MCP %s\n", cs.InitializeResult().ServerInfo.Name, cs.InitializeResult().ServerInfo.Version, cs.InitializeResult().ProtocolVersion)

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return err
	}
	fmt.Printf("%d tools:", len(tools.Tools))
	for _, t := range tools.Tools {
		fmt.Printf(" %s", t.Name)
	}
	fmt.Println()

	// mesh_find may come back empty, or with only the bootstrap peer
	// (every node offers the standard skills), while the node is still
	// joining: ask again for a while, as a model would, for an agent other
	// than the bootstrap that lists the skill.
	boot := peerIDOf(bootstrap)
	self, err := ownPeerID(ctx, cs)
	if err != nil {
		return err
	}
	var order []agent
	waitFrom := time.Now()
	tagged := map[string]string{} // PeerID → its skill tagged with the query ("" none), from its card
	for {
		var found struct {
			Agents []agent `json:"agents"`
		}
		if err := callJSON(ctx, cs, "mesh_find", map[string]any{"skill": skill, "limit": 10}, &found); err != nil {
			return err
		}
		// mesh_find matches tags too: an agent found by a tag runs the
		// skill its card tags so.
		for i, a := range found.Agents {
			if slices.Contains(a.Skills, skill) {
				continue
			}
			run, ok := tagged[a.PeerID]
			if !ok {
				run = taggedSkill(ctx, cs, a.Resource, skill)
				tagged[a.PeerID] = run
			}
			found.Agents[i].Tagged = run
		}
		order = targets(found.Agents, skill, boot, self)
		if len(order) > 0 && ((order[0].PeerID != boot && order[0].PeerID != self) || time.Since(waitFrom) > otherAgentWait) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no agent of the mesh offers %q", skill)
		case <-time.After(2 * time.Second):
		}
	}
	for _, a := range order {
		fmt.Printf("found %s (%s) score %.1f reachable %v\n", a.PeerID, a.Name, a.Score, a.Reachable)
	}
	// Run it on the first that answers: an agent that refuses or fails
	// gives way to the next.
	var last error
	for _, a := range order {
		switch a.PeerID {
		case boot:
			fmt.Printf("running %s on the bootstrap peer %s: no other agent offers it or answered\n", skill, a.PeerID)
		case self:
			fmt.Printf("running %s on this client's own node %s: no other agent offers it or answered\n", skill, a.PeerID)
		}
		run := a.run(skill)
		var result json.RawMessage
		if last = callJSON(ctx, cs, "mesh_call", map[string]any{"peer": a.PeerID, "skill": run, "arguments": args}, &result); last == nil {
			fmt.Printf("%s on %s: %s\n", run, a.PeerID, result)
			return nil
		}
		fmt.Printf("%s on %s failed: %v\n", run, a.PeerID, last)
	}
	return last
}

// otherAgentWait is how long the client waits for an agent other than the
// bootstrap peer before it settles for the bootstrap.
const otherAgentWait = 30 * time.Second

// agent is one agent of mesh_find's answer.
type agent struct {
	PeerID    string   `json:"peer_id"`
	Name      string   `json:"name"`
	Score     float64  `json:"score"`
	Reachable bool     `json:"reachable"`
	Skills    []string `json:"skills"`
	Resource  string   `json:"resource"` // its card, mcpv2://agents/PEERID
	// Tagged is, for an agent whose skills do not include the query, its
	// skill tagged with the query ("" none): mesh_find matches tags too.
	Tagged string `json:"-"`
}

// run is the skill to run on a for query: query itself when a lists it,
// else its skill tagged query ("" none).
func (a agent) run(query string) string {
	if slices.Contains(a.Skills, query) {
		return query
	}
	return a.Tagged
}

// card is what the client reads of an agent's card.
type card struct {
	Skills []struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	} `json:"skills"`
}

// skillTagged is c's first skill tagged tag, or "".
func (c card) skillTagged(tag string) string {
	for _, s := range c.Skills {
		if slices.Contains(s.Tags, tag) {
			return s.Name
		}
	}
	return ""
}

// taggedSkill reads the agent's card (uri, mcpv2://agents/PEERID) and
// returns its first skill tagged tag; "" when it has none or the card
// cannot be read.
func taggedSkill(ctx context.Context, cs *mcp.ClientSession, uri, tag string) string {
	if uri == "" {
		return ""
	}
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	var c card
	if err != nil || len(res.Contents) == 0 || json.Unmarshal([]byte(res.Contents[0].Text), &c) != nil {
		return ""
	}
	return c.skillTagged(tag)
}

// targets orders the agents to try for skill, among those that offer it
// (list it, or a skill tagged with it: agent.run):
// the reachable ones first, best score first as mesh_find ranks them, then
// the others; the bootstrap peer (boot, a relay more often than not: it
// offers the standard skills as every node does) and the client's own
// node (self, which mesh_find lists too) last.
func targets(agents []agent, skill, boot, self string) []agent {
	var reachable, other, bootAgent, selfAgent []agent
	for _, a := range agents {
		switch {
		case a.run(skill) == "":
		case a.PeerID == boot:
			bootAgent = append(bootAgent, a)
		case a.PeerID == self:
			selfAgent = append(selfAgent, a)
		case a.Reachable:
			reachable = append(reachable, a)
		default:
			other = append(other, a)
		}
	}
	return slices.Concat(reachable, other, bootAgent, selfAgent)
}

// ownPeerID reads the PeerID of the client's own node from its card, the
// resource mcpv2://card.
func ownPeerID(ctx context.Context, cs *mcp.ClientSession) (string, error) {
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mcpv2://card"})
	if err != nil {
		return "", fmt.Errorf("read mcpv2://card: %w", err)
	}
	var card struct {
		PeerID string `json:"peer_id"`
	}
	if len(res.Contents) == 0 || json.Unmarshal([]byte(res.Contents[0].Text), &card) != nil || card.PeerID == "" {
		return "", errors.New("read mcpv2://card: no peer_id in it")
	}
	return card.PeerID, nil
}

// peerIDOf is the PeerID at the end of a multiaddr (…/p2p/12D3KooW…), or "".
func peerIDOf(addr string) string {
	if i := strings.LastIndex(addr, "/p2p/"); i >= 0 {
		return addr[i+len("/p2p/"):]
	}
	return ""
}

// callJSON calls a tool and decodes its structured result into v; an isError
// result is returned as an error with its text.
func callJSON(ctx context.Context, cs *mcp.ClientSession, tool string, args any, v any) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	if res.IsError {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			return fmt.Errorf("%s: %s", tool, tc.Text)
		}
		return errors.New(tool + " failed")
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
