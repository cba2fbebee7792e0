package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
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

// TestOrchestrateRefusalNotRetried (issue 26 item 8): an agent's -32009
// ends the subtask; it is not tried on the other agents that offer the
// skill (it was tried on three). Three agents of one mesh offer ask and
// grant it to nobody; the client's subtask is tried once.
func TestOrchestrateRefusalNotRetried(t *testing.T) {
	boot := startNode(t, "", "--no-mdns", "--no-nat", "--name", "boot")
	b := boot.tcpAddr(t)
	startNode(t, "", "--no-mdns", "--no-nat", "--name", "agent-1", "--bootstrap", b)
	startNode(t, "", "--no-mdns", "--no-nat", "--name", "agent-2", "--bootstrap", b)
	caller := t.TempDir()
	// The cards reach the DHT as each node publishes: ask mcpv2 find, as a
	// user would, until it lists all three (bounded).
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _, _ := run(t, "find", "ask", "--bootstrap", b, "--data-dir", caller, "--no-nat")
		if strings.Contains(out, "agent-1") && strings.Contains(out, "agent-2") && strings.Contains(out, "boot") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("find ask never listed the three agents:\n%s", out)
		}
		time.Sleep(time.Second)
	}
	out, errs, _ := run(t, "orchestrate", "tell me a story about the sea", "--bootstrap", b, "--data-dir", caller, "--no-nat", "--json", "--attempts", "3")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var res struct {
		Type     string `json:"type"`
		Subtasks []struct {
			Skill    string   `json:"skill"`
			Status   string   `json:"status"`
			Attempts int      `json:"attempts"`
			Tried    []string `json:"tried"`
			Error    string   `json:"error"`
		} `json:"subtasks"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil || res.Type != "result" || len(res.Subtasks) != 1 {
		t.Fatalf("last line is not a result of one subtask (%v):\n%s\n%s", err, out, errs)
	}
	st := res.Subtasks[0]
	if st.Skill != "ask" || st.Attempts != 1 || len(st.Tried) != 1 || !strings.Contains(st.Error, "not retried on others") || !strings.Contains(st.Error, "-32009") {
		t.Fatalf("subtask %+v: want ask refused -32009 once, not retried", st)
	}
}
