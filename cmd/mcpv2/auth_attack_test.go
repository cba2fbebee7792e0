package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/protocol"
)

// The attacks of issue 7 (defects 1 and 2), against real `mcpv2 node`
// processes started as an operator would: `--port --secret`, a policy file
// and a custom command skill.

// auditLines reads a node's audit log.
func auditLines(t *testing.T, dataDir string) []map[string]any { return testenv.AuditLines(t, dataDir) }

// TestAttackAnonymousEdgeCaller is defect 1: a stranger who knows no secret
// takes a session from GET /mcpv2/session and tries every costly or
// dangerous skill. Each is refused with -32009 and exactly one audit line
// (auth "anonymous"), nothing is written, the command never runs, and the
// operator's LLM is never asked. The same calls by a secret holder, and a
// skill the policy grants to "http", go through: the refusals are the
// policy's, not a broken edge's.
func TestAttackAnonymousEdgeCaller(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(t.TempDir(), "the-command-ran")
	skills := writeFile(t, filepath.Join(dir, "skills.json"), fmt.Sprintf(`{"skills":[{"name":"sh","description":"runs a shell",
		"input_schema":{"type":"object"},"handler":{"type":"command","command":["/bin/sh","-c","echo ran > %s; echo '{}'"]}}]}`, marker))
	writeFile(t, filepath.Join(dir, "policy.json"), `{"grants":{"http":["translate_history"]}}`)
	port := edgeFreePort(t, "127.0.0.1")
	p := startEdgeProc(t, "edge", nil, "--data-dir", dir, "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-nat",
		"--port", strconv.Itoa(port), "--public-ip", "127.0.0.1", "--secret", edgeSecret, "--skills", skills)
	ep := newEdgePeer(t, "edge", p)
	c := edgeHTTPClient(t, "", nil)
	ep.client = c
	anon := ep.anonSession(t, c).SessionID
	holder := ep.session(t, c).SessionID
	if err := os.WriteFile(filepath.Join(dir, "files", "keep.txt"), []byte("operator's file"), 0o644); err != nil {
		t.Fatal(err)
	}

	attacks := []struct {
		skill string
		args  map[string]any
	}{
		{"upload_file", map[string]any{"filename": "pwned.txt", "content": "x"}},
		{"ask", map[string]any{"query": "spend the operator's key"}},
		{"sh", map[string]any{}},
		{"list_files", map[string]any{}},
		{"process_instructions", map[string]any{"filename": "keep.txt", "instructions": "summarize"}},
		{"delete_file", map[string]any{"filename": "keep.txt"}}, // last: the secret holder's run deletes it
	}
	for _, a := range attacks {
		before := len(auditLines(t, dir))
		_, rerr := ep.callVia(t, c, "/mcpv2", anon, a.skill, a.args)
		if rerr == nil || rerr.Code != -32009 || !strings.Contains(rerr.Message, `"http"`) {
			t.Errorf("anonymous %s: %+v, want -32009 that says how to grant", a.skill, rerr)
		}
		lines := auditLines(t, dir)[before:]
		if len(lines) != 1 || lines[0]["skill"] != a.skill || lines[0]["code"] != float64(-32009) || lines[0]["auth"] != "anonymous" || lines[0]["via"] != "http" {
			t.Errorf("anonymous %s: audit lines %v, want exactly one -32009 line", a.skill, lines)
		}
	}
	// The provider-native AI endpoint is ask too.
	ans := edgeDo(t, c, http.MethodPost, ep.base+"/mcpv2/ai/claude", map[string]string{"X-MCPV2-Session": anon},
		map[string]any{"model": "x", "max_tokens": 10, "messages": []map[string]any{{"role": "user", "content": "hi"}}})
	if ans.status != http.StatusForbidden || !bytes.Contains(ans.body, []byte("-32009")) {
		t.Errorf("anonymous /mcpv2/ai/claude: %s, want 403 -32009", ans)
	}
	// A batch mixing open and refused slots: each slot on its own.
	resps := edgeBatch(t, ep, anon, []any{edgeSlot(1, "ping", nil), edgeSlot(2, "upload_file", map[string]any{"filename": "b.txt", "content": "x"})}, 2)
	if resps[0].Error != nil || resps[1].Error == nil || resps[1].Error.Code != -32009 {
		t.Errorf("anonymous batch: %+v %+v", resps[0], resps[1])
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command skill ran for an anonymous caller")
	}
	for _, f := range []string{"pwned.txt", "b.txt"} {
		if _, err := os.Stat(filepath.Join(dir, "files", f)); err == nil {
			t.Errorf("%s was written by an anonymous caller", f)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "files", "keep.txt")); err != nil || string(b) != "operator's file" {
		t.Errorf("keep.txt after the attack: %q %v", b, err)
	}
	// What the policy grants "http" works anonymously.
	if _, rerr := ep.callVia(t, c, "/mcpv2", anon, "translate_history", map[string]any{"history": []any{}, "from": "openai", "to": "claude"}); rerr != nil {
		t.Errorf("translate_history granted to http: %+v", rerr)
	}
	// A secret holder gets everything.
	for _, a := range attacks {
		if _, rerr := ep.callVia(t, c, "/mcpv2", holder, a.skill, a.args); rerr != nil {
			t.Errorf("secret holder %s: %+v", a.skill, rerr)
		}
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the command skill did not run for the secret holder: %v", err)
	}
	last := auditLines(t, dir)
	if a := last[len(last)-1]; a["auth"] != "secret" || a["outcome"] != "ok" {
		t.Errorf("secret holder's audit line %v", a)
	}
}

// TestAttackGatewayCrossedAnswers is defect 2 through real processes: two
// users of A's gateway call C while floods of notification batches make C
// refuse A (rate limit). Every answer each user gets is its own call's.
func TestAttackGatewayCrossedAnswers(t *testing.T) {
	common := []string{"--secret", edgeSecret, "--no-mdns", "--no-nat"}
	cDir := t.TempDir()
	cp := startEdgeProc(t, "C", nil, append([]string{"--data-dir", cDir, "--listen", "/ip4/127.0.0.1/tcp/0", "--rate-limit", "400"}, common...)...)
	cID := cp.first("MCPV2_PEER_ID")
	port := edgeFreePort(t, "127.0.0.1")
	ap := startEdgeProc(t, "A", nil, append([]string{"--data-dir", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0",
		"--port", strconv.Itoa(port), "--public-ip", "127.0.0.1", "--bootstrap", cp.tcpAddr(t)}, common...)...)
	a := newEdgePeer(t, "A", ap)
	users := []struct {
		name string
		c    *http.Client
		tok  string
	}{{name: "alice", c: edgeHTTPClient(t, "127.0.0.1", nil)}, {name: "bob", c: edgeHTTPClient(t, "127.0.0.3", nil)}}
	for i := range users {
		users[i].tok = a.anonSession(t, users[i].c).SessionID
	}
	edgeWaitGateway(t, users[0].c, a.base, users[0].tok, cID)
	notes := make([]string, 100)
	for i := range notes {
		notes[i] = `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"ping"}}`
	}
	flood := []byte("[" + strings.Join(notes, ",") + "]")
	var mu sync.Mutex
	own, refused, wrong := 0, 0, 0
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hdr := map[string]string{"X-MCPV2-Session": u.tok}
			for i := range 15 {
				if ans, err := edgeTryDo(u.c, http.MethodPost, a.base+"/mcpv2/peers/"+cID, hdr, flood); err != nil || ans.status != http.StatusNoContent {
					t.Errorf("%s flood: %v %s", u.name, err, ans)
				}
				payload := fmt.Sprintf("%s-%d", u.name, i)
				ans, err := edgeTryDo(u.c, http.MethodPost, a.base+"/mcpv2/peers/"+cID, hdr, edgeSlot(payload, "ping", map[string]any{"payload": payload}))
				if err != nil {
					t.Errorf("%s call: %v", u.name, err)
					continue
				}
				var r struct {
					ID     json.RawMessage `json:"id"`
					Result struct {
						Payload string `json:"payload"`
					} `json:"result"`
					Error *edgeRPCError `json:"error"`
				}
				_ = json.Unmarshal(ans.body, &r)
				mu.Lock()
				switch {
				case r.Error != nil && r.Error.Code == protocol.CodeRateLimited:
					refused++
				case r.Error == nil && string(r.ID) == strconv.Quote(payload) && r.Result.Payload == payload:
					own++
				default:
					wrong++
					t.Errorf("%s asked %q and got %s", u.name, payload, ans)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	floods := 0
	for _, l := range auditLines(t, cDir) {
		if l["code"] == float64(protocol.CodeRateLimited) {
			floods++
		}
	}
	t.Logf("30 calls: %d answered with their own payload, %d rate limited by C, %d wrong; C refused %d messages", own, refused, wrong, floods)
	if own == 0 || floods == 0 {
		t.Fatal("the attack needs answered calls and refused floods to prove anything")
	}
}
