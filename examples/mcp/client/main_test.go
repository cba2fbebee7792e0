package main

import (
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
