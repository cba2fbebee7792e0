package orchestrate

import (
	"slices"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// card builds a card offering skill with tags, described by desc.
func card(name, skill, desc string, tags ...string) protocol.AgentCard {
	return protocol.AgentCard{
		Name: name, PeerID: peerID(name), Description: desc, Seq: 1,
		Skills: []protocol.SkillDescriptor{{Name: skill, Description: "a service", Tags: tags}},
	}
}

func TestScore(t *testing.T) {
	st := Subtask{Text: "ask Claude about the weather in Tokyo", Skill: "weather", Tags: []string{"forecast"}}
	withProvider := card("p", "weather", "plain")
	withProvider.Capabilities.Providers = []string{"claude"}
	cases := []struct {
		name      string
		card      protocol.AgentCard
		reachable bool
		want      float64
	}{
		{"skill name only", card("a", "weather", "plain"), false, 2.0},
		{"reachable", card("a", "weather", "plain"), true, 3.0},
		{"tag equals a subtask tag", card("a", "weather", "plain", "forecast"), false, 3.5},
		{"tag is a word of the text", card("a", "weather", "plain", "tokyo"), false, 3.5},
		{"tag counts once", card("a", "weather", "plain", "tokyo", "forecast"), false, 3.5},
		{"description word", card("a", "weather", "Tokyo station"), false, 2.5},
		{"stop words do not count", card("a", "weather", "the about in"), false, 2.0},
		{"capability name", withProvider, false, 4.0},
		{"all", func() protocol.AgentCard {
			c := card("a", "weather", "Tokyo station", "forecast")
			c.Capabilities.Providers = []string{"openai", "Claude"}
			return c
		}(), true, 2 + 2 + 1.5 + 0.5 + 1},
		{"skill not offered", card("a", "calculator", "Tokyo", "forecast"), true, 0.5 + 1},
	}
	for _, c := range cases {
		if got := score(c.card, st, c.reachable); got != c.want {
			t.Errorf("%s: score %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRank: score first, then measured latency, then PeerID; agents that
// do not offer the skill are dropped; duplicates merge.
func TestRank(t *testing.T) {
	st := Subtask{Text: "weather in Tokyo", Skill: "weather", Tags: []string{"weather"}}
	a := card("a", "weather", "Tokyo weather station", "weather") // 2 + 1.5 + 0.5 + 1 = 5
	b := card("b", "weather", "generic")                          // 2 + 1 = 3
	c := card("c", "weather", "Tokyo")                            // 2 + 0.5 = 2.5, unreachable
	e := card("e", "other", "Tokyo", "weather")                   // does not offer weather
	f := card("f", "weather", "generic")                          // 3, 50 ms
	g := card("g", "weather", "generic")                          // 3, 10 ms
	h := card("h", "weather", "generic")                          // 3, unmeasured
	bad := card("bad", "weather", "generic")
	bad.PeerID = "not-a-peer-id"
	found := []protocol.FindResult{
		{Card: c}, {Card: b, Reachable: true}, {Card: e, Reachable: true}, {Card: f, Reachable: true},
		{Card: a, Reachable: false}, {Card: g, Reachable: true}, {Card: h, Reachable: true}, {Card: bad, Reachable: true},
		// a again, reachable this time (a find by the tag).
		{Card: a, Reachable: true},
	}
	lat := map[string]time.Duration{f.PeerID: 50 * time.Millisecond, g.PeerID: 10 * time.Millisecond}
	latency := func(id string) (time.Duration, bool) { d, ok := lat[id]; return d, ok }

	ids := func(cs []candidate) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.card.Name)
		}
		return out
	}
	got := rank(found, st, latency)
	// b and h tie on everything but PeerID.
	bh := []string{"b", "h"}
	if peerID("h") < peerID("b") {
		bh = []string{"h", "b"}
	}
	want := append([]string{"a", "g", "f"}, append(bh, "c")...)
	if !slices.Equal(ids(got), want) {
		t.Fatalf("order %v, want %v", ids(got), want)
	}
	if got[0].score != 5 || !got[0].reachable {
		t.Errorf("a: score %v reachable %v", got[0].score, got[0].reachable)
	}
	if got[0].addr.Kind != protocol.AddrMesh || got[0].addr.PeerID != a.PeerID {
		t.Errorf("a's address %+v", got[0].addr)
	}

	// Without latency, equal scores go by PeerID.
	got = rank(found, st, nil)
	var threes []string
	for _, c := range got {
		if c.score == 3 {
			threes = append(threes, c.card.PeerID)
		}
	}
	if len(threes) != 4 || !slices.IsSorted(threes) {
		t.Errorf("score-3 candidates without latency: %v", threes)
	}

	// A newer card that dropped the skill removes the agent.
	newer := b
	newer.Seq = 2
	newer.Skills = nil
	if got := rank([]protocol.FindResult{{Card: b}, {Card: newer}}, st, nil); len(got) != 0 {
		t.Errorf("kept %v", ids(got))
	}
}

// TestRankUnhealthyBridged: an agent that bridges the subtask's skill for
// an external agent it found unhealthy loses the reachable bonus, so a
// provider of its own goes first (and failover has somewhere to go).
func TestRankUnhealthyBridged(t *testing.T) {
	st := Subtask{Text: "echo it", Skill: "echo"}
	bridging := card("a", "echo", "generic")
	bridging.Bridged = []protocol.BridgedAgent{{Name: "ext", URL: "http://ext.example", Skills: []string{"echo"}, Healthy: false}}
	other := card("b", "echo", "generic")
	got := rank([]protocol.FindResult{{Card: bridging, Reachable: true}, {Card: other, Reachable: true}}, st, nil)
	if len(got) != 2 || got[0].card.Name != "b" || got[1].reachable {
		t.Fatalf("ranked %+v", got)
	}
	bridging.Bridged[0].Healthy = true
	got = rank([]protocol.FindResult{{Card: bridging, Reachable: true}, {Card: other, Reachable: true}}, st, nil)
	if len(got) != 2 || !got[0].reachable || !got[1].reachable || got[0].score != got[1].score {
		t.Fatalf("healthy: ranked %+v", got)
	}
}
