package localapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/a2aclient"
	"github.com/mcpv2/mcpv2/node/agents"
)

// cardsOf answers the cards of the URLs it lists, and fails for others:
// it stands in for the A2A client behind the local API's agents routes.
type cardsOf map[string]bool

func (c cardsOf) Card(_ context.Context, url string) (*a2aclient.Card, error) {
	if !c[url] {
		return nil, fmt.Errorf("GET %s: connection refused", url)
	}
	return &a2aclient.Card{URL: url, Name: "Agent " + url, ProtocolVersion: "0.3", FetchedAt: time.Now(),
		Skills: []a2aclient.Skill{{ID: "summarize", Description: "summarizes"}}}, nil
}

func (cardsOf) Call(context.Context, *a2aclient.Card, string, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`"ok"`), nil
}

// TestAgents: the operator adds (one URL fails, with its reason), lists
// and removes agents over the control socket; a bridged agent's skill is
// the node's; a restarted node keeps the registry.
func TestAgents(t *testing.T) {
	dir := t.TempDir()
	res := cardsOf{"http://a.example": true}
	mod := func(c *node.Config) { c.Agents = node.AgentsConfig{Resolver: res, Interval: time.Hour} }
	n := newNode(t, dir, mod)
	a, cl := newAPI(t, n)
	got, err := cl.AddAgents(ctxT(t), AddAgentsRequest{URLs: []string{"http://a.example/", "http://down.example"}, Bridge: true})
	if err != nil || len(got.Agents) != 2 {
		t.Fatalf("add: %+v %v", got, err)
	}
	if ag := got.Agents[0]; !ag.Healthy || !ag.Bridged || ag.BridgedBy != n.PeerID() || ag.ProtocolVersion != "0.3" {
		t.Fatalf("added %+v", ag)
	}
	if ag := got.Agents[1]; ag.Healthy || ag.LastError == "" {
		t.Fatalf("the unreachable agent: %+v", ag)
	}
	if _, ok := n.Registry().Lookup("summarize"); !ok {
		t.Fatal("the bridged agent's skill is not the node's")
	}
	if _, err := cl.AddAgents(ctxT(t), AddAgentsRequest{}); err == nil {
		t.Fatal("an add without URLs was taken")
	}
	list, err := cl.Agents(ctxT(t))
	if err != nil || len(list.Agents) != 1 || list.Agents[0].URL != "http://a.example" {
		t.Fatalf("list: %+v %v", list, err)
	}
	task, err := cl.FindTask(ctxT(t), "summarize this report", 50)
	if err != nil || len(task.Matches) != 1 || task.Matches[0].Kind != "bridged" || task.Matches[0].Score != 3 {
		t.Fatalf("find task: %+v %v", task, err)
	}
	// The limit reaches the node (it was fixed at 20).
	if _, err := cl.FindTask(ctxT(t), "summarize this report", 0); err != nil {
		t.Fatalf("find task with the default limit: %v", err)
	}
	for _, bad := range []string{"0", "x", "201"} {
		var out TaskResponse
		if err := cl.do(ctxT(t), "GET", "/v1/find/task?q=summarize&limit="+bad, nil, &out); err == nil {
			t.Errorf("limit=%s was taken", bad)
		}
	}

	// A restart keeps it, bridged.
	a.Close()
	cl.Close()
	n.Close()
	n2 := newNode(t, dir, mod)
	_, cl2 := newAPI(t, n2)
	list, err = cl2.Agents(ctxT(t))
	if err != nil || len(list.Agents) != 1 || !list.Agents[0].Bridged {
		t.Fatalf("after a restart: %+v %v", list, err)
	}
	if _, ok := n2.Registry().Lookup("summarize"); !ok {
		t.Fatal("the restarted node does not bridge the agent's skill")
	}
	if _, err := cl2.RemoveAgent(ctxT(t), "http://a.example"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl2.RemoveAgent(ctxT(t), "http://a.example"); !errors.Is(err, agents.ErrNoAgent) {
		t.Fatalf("removing it twice: %v, want agents.ErrNoAgent", err)
	}
	if _, ok := n2.Registry().Lookup("summarize"); ok {
		t.Fatal("a removed agent's skill is still the node's")
	}
}
