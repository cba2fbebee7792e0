package node

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/protocol"
)

// TestLLMModeSurvivesRestart: turn 4 is answered from turn 1; after the node
// restarts on the same data dir, turn 5 still sees turn 1.
func TestLLMModeSurvivesRestart(t *testing.T) {
	a := newTestNode(t, nil)
	dir := t.TempDir()
	policy := writePolicy(t, map[string][]string{a.ID().String(): {"*"}})
	start := func() *Node {
		n, err := New(Config{DataDir: dir, ListenAddrs: loopback, LLMMode: true, PolicyFile: policy})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	b := start()
	ask := func(b *Node, q string) map[string]any {
		raw, err := a.Client().CallSkill(ctxT(t), addrOf(t, b), "ask", json.RawMessage(mustJSON(map[string]any{"query": q, "conversation_id": "c1"})), protocol.CallOptions{})
		if err != nil {
			t.Fatalf("ask %q: %v", q, err)
		}
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return m
	}
	turns := []string{"My name is Ada and my favourite colour is teal.", "I live in Lisbon.", "I like chess."}
	for i, q := range turns {
		if r := ask(b, q); r["turn"] != float64(i+1) || r["conversation_id"] != "c1" {
			t.Fatalf("turn %d: %v", i+1, r)
		}
	}
	r4 := ask(b, "What is my favourite colour?")
	if r4["turn"] != 4.0 || !strings.Contains(r4["response"].(string), "teal") {
		t.Fatalf("turn 4 did not use turn 1: %v", r4)
	}
	b.Close()
	b = start()
	defer b.Close()
	r5 := ask(b, "Remind me: what is my favourite colour?")
	if r5["turn"] != 5.0 || !strings.Contains(r5["response"].(string), "teal") {
		t.Fatalf("turn 5 after restart: %v", r5)
	}
}
