package main

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestTargets: the bootstrap peer (the relay) and the client's own node
// are tried last, an agent that
// does not list the skill never, a reachable agent before one that is not
// (issue 26, item 8: the client ran the skill on the relay and stopped).
func TestTargets(t *testing.T) {
	const boot, self = "12D3KooWRelay", "12D3KooWSelf"
	agents := []agent{
		{PeerID: boot, Score: 9, Reachable: true, Skills: []string{"ping", "weather"}},
		{PeerID: "12D3KooWFar", Score: 8, Reachable: false, Skills: []string{"weather"}},
		{PeerID: "12D3KooWTagOnly", Score: 7, Reachable: true, Skills: []string{"forecast"}},
		{PeerID: self, Score: 9, Reachable: true, Skills: []string{"weather"}},
		{PeerID: "12D3KooWNear", Score: 5, Reachable: true, Skills: []string{"weather"}},
	}
	var got []string
	for _, a := range targets(agents, "weather", boot, self) {
		got = append(got, a.PeerID)
	}
	if want := []string{"12D3KooWNear", "12D3KooWFar", boot, self}; !slices.Equal(got, want) {
		t.Errorf("targets: %v, want %v", got, want)
	}
	if got := targets(agents[:1], "weather", boot, self); len(got) != 1 || got[0].PeerID != boot {
		t.Errorf("only the bootstrap offers it: %v", got)
	}
	if id := peerIDOf("/ip4/127.0.0.1/tcp/4001/p2p/" + boot); id != boot {
		t.Errorf("peerIDOf: %q", id)
	}
	if id := peerIDOf("/ip4/127.0.0.1/tcp/4001"); id != "" {
		t.Errorf("peerIDOf without /p2p/: %q", id)
	}
}

// TestTargetsByTag: mesh_find matches tags too (review 26 §8): an agent
// found by a tag, whose card tags one of its skills so, is kept and runs
// that skill; one with no such skill is not; an agent that lists the query
// as a skill runs it by name.
func TestTargetsByTag(t *testing.T) {
	const boot, self = "12D3KooWRelay", "12D3KooWSelf"
	var c card
	if err := json.Unmarshal([]byte(`{"peer_id":"12D3KooWTag","skills":[{"name":"ping","tags":["core"]},{"name":"forecast","tags":["weather","demo"]},{"name":"radar","tags":["weather"]}]}`), &c); err != nil {
		t.Fatal(err)
	}
	if got := c.skillTagged("weather"); got != "forecast" {
		t.Fatalf("skillTagged(weather) = %q, want forecast (the first)", got)
	}
	if got := c.skillTagged("nope"); got != "" {
		t.Fatalf("skillTagged(nope) = %q", got)
	}
	agents := []agent{
		{PeerID: "12D3KooWTag", Score: 7, Reachable: true, Skills: []string{"ping", "forecast", "radar"}, Tagged: c.skillTagged("weather")},
		{PeerID: "12D3KooWUntagged", Score: 6, Reachable: true, Skills: []string{"ping"}},
		{PeerID: "12D3KooWNamed", Score: 5, Reachable: false, Skills: []string{"weather"}},
	}
	var got []string
	for _, a := range targets(agents, "weather", boot, self) {
		got = append(got, a.PeerID+":"+a.run("weather"))
	}
	if want := []string{"12D3KooWTag:forecast", "12D3KooWNamed:weather"}; !slices.Equal(got, want) {
		t.Errorf("targets by tag: %v, want %v", got, want)
	}
}
