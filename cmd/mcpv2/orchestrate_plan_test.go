package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestOrchestrateHelpExamplePlansBoth: the request of orchestrate --help's
// own example is planned as two subtasks, the product and the weather
// (issue 26, item 8: it planned one and dropped the weather). Run against
// a mesh of one node, where no agent offers either skill: the plan is in
// the result all the same.
func TestOrchestrateHelpExamplePlansBoth(t *testing.T) {
	const request = "what is 7 times 6, and the weather in Tokyo"
	if out, errs, _ := run(t, "orchestrate", "--help"); !strings.Contains(out+errs, `mcpv2 orchestrate "`+request+`"`) {
		t.Fatalf("orchestrate --help does not show the example %q:\n%s%s", request, out, errs)
	}
	p := startNode(t, "", "--no-mdns", "--no-nat")
	out, errs, _ := run(t, "orchestrate", request, "--bootstrap", p.tcpAddr(t), "--json", "--attempts", "1", "--subtask-timeout", "2s")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var res struct {
		Type string `json:"type"`
		Plan struct {
			Subtasks []struct {
				Skill     string          `json:"skill"`
				Text      string          `json:"text"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"subtasks"`
		} `json:"plan"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil || res.Type != "result" {
		t.Fatalf("last line is not the result (%v):\n%s\n%s", err, out, errs)
	}
	got := res.Plan.Subtasks
	if len(got) != 2 || got[0].Skill != "calculator" || got[1].Skill != "weather" || got[1].Text != "the weather in Tokyo" ||
		string(got[1].Arguments) != `{"city":"Tokyo"}` {
		t.Errorf("plan %+v: want calculator (7 times 6) and weather (Tokyo)", got)
	}
}
