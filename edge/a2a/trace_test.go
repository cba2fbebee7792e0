package a2a_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/edge/a2a"
)

// auditLines returns the node's audit lines.
func auditLines(t *testing.T, r *rig) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(r.n.DataDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			lines = append(lines, l)
		}
	}
	return lines
}

// The open card routes start the edge's span too: the card's audit line is
// in the caller's trace (it was in a random one of its own).
func TestCardRequestInCallersTrace(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := newRig(t, "")
	req, _ := http.NewRequest(http.MethodGet, r.base+a2a.CardPath, nil)
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", a2a.CardPath, resp.StatusCode)
	}
	var card map[string]any
	for _, l := range auditLines(t, r) {
		if l["method"] == "a2a card" {
			card = l
		}
	}
	if card == nil || card["trace"] != traceID || card["span"] == "00f067aa0ba902b7" {
		t.Fatalf("the card's audit line %v, want trace %s and a span of the node's", card, traceID)
	}
}

// An A2A client's traceparent header reaches the node's line of the task's
// skill call: the task runs after the request has been answered (it outlives
// it), in the request's trace.
func TestTraceparentThroughA2AFace(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := newRig(t, "")
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "SendMessage",
		"params": map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "ping", "arguments": map[string]any{}}})}})
	req, _ := http.NewRequest(http.MethodPost, r.base+a2a.Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.token())
	req.Header.Set(a2a.VersionHeader, "1.0")
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	f, err := os.Open(filepath.Join(r.n.DataDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ping map[string]any
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) == nil && l["skill"] == "ping" {
			ping = l
		}
	}
	if ping == nil || ping["trace"] != traceID || !strings.HasPrefix(ping["method"].(string), "tools/call") {
		t.Fatalf("the node's line of the task's ping: %v, want trace %s", ping, traceID)
	}
}
