package discovery

import (
	"fmt"
	"testing"

	"github.com/mcpv2/mcpv2/protocol"
)

func TestScoreTask(t *testing.T) {
	card := protocol.AgentCard{
		Description: "Crunches spreadsheets.",
		Skills: []protocol.SkillDescriptor{
			{Name: "sales_report", Description: "Builds a report", Tags: []string{"analytics"}},
		},
		Capabilities: protocol.Capabilities{Providers: []string{"claude"}},
	}
	tests := []struct {
		task string
		want float64
	}{
		{"Analyze sales data and identify trends", 0},
		{"a sales report please", 2.0 + 0.5},         // every word of the skill's name; "report" is a description word
		{"run analytics on the numbers", 1.5},        // a tag
		{"ask claude", 2.0},                          // a capability name
		{"claude: sales report with analytics", 6.0}, // all four
		{"the and of", 0},                            // stop words only
	}
	for _, tc := range tests {
		if got := ScoreTask(card, TaskWords(tc.task)); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.task, got, tc.want)
		}
	}
}

// TestResultsBridged: a card that bridges an agent gives a result for the
// agent itself and one for each bridged agent that matches, the bridged
// one reachable only when the bridge found it healthy.
func TestResultsBridged(t *testing.T) {
	card := protocol.AgentCard{
		Name: "bridge", PeerID: "12D3KooWbridge", Description: "an mcpv2 agent",
		Skills: []protocol.SkillDescriptor{
			{Name: "ping", Description: "answers pong", Tags: []string{"util"}},
			{Name: "forecast", Description: "weather forecast", Tags: []string{"weather"}},
			{Name: "ext.ping", Description: "the external echo", Tags: []string{"util"}},
		},
		Bridged: []protocol.BridgedAgent{{Name: "Ext", URL: "http://ext.example", Skills: []string{"forecast", "ext.ping"}, Healthy: false}},
	}
	res := Results(card, "forecast", true)
	if len(res) != 1 || res[0].Bridged == nil || res[0].Bridged.URL != "http://ext.example" || res[0].Reachable || res[0].Score != 2.0+1.5*0+0.5 {
		t.Fatalf("forecast: %+v", res)
	}
	res = Results(card, "util", true)
	if len(res) != 2 || res[0].Bridged != nil || !res[0].Reachable || res[1].Bridged == nil || res[1].Reachable {
		t.Fatalf("util: %+v", res)
	}
	card.Bridged[0].Healthy = true
	if res = Results(card, "forecast", true); len(res) != 1 || !res[0].Reachable || res[0].Score != 3.5 {
		t.Fatalf("healthy: %+v", res)
	}
	if res = Results(card, "ping", false); len(res) != 1 || res[0].Bridged != nil {
		t.Fatalf("ping is the agent's own: %+v", res)
	}
}

// TestResultsBridgedCapped: one card cannot fill a find with its bridged
// entries: at most MaxBridgedResults of them count, each URL once (review
// item 6).
func TestResultsBridgedCapped(t *testing.T) {
	card := protocol.AgentCard{Name: "m", PeerID: "12D3KooWxxx", Skills: []protocol.SkillDescriptor{{Name: "translate", Tags: []string{}}}}
	for i := range 150 {
		card.Bridged = append(card.Bridged, protocol.BridgedAgent{Name: "t", URL: fmt.Sprintf("https://%d.example", i%20), Skills: []string{"translate"}, Healthy: true})
	}
	res := Results(card, "translate", true)
	if len(res) != MaxBridgedResults {
		t.Fatalf("one card gave %d results, want %d", len(res), MaxBridgedResults)
	}
	seen := map[string]bool{}
	for _, r := range res {
		if r.Bridged == nil || seen[r.Bridged.URL] {
			t.Fatalf("results: %+v", res)
		}
		seen[r.Bridged.URL] = true
	}
}
