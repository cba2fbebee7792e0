package attacktest

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// TestAttackCostFaces is issue 18, item 6, the peer faces and orchestrate:
//
//   - An anonymous attacker sends 200 requests in about two seconds to
//     /peers/{made-up PeerID}/mcp and /a2a on T's edge, to cycle T's cache of
//     peer faces. A secret holder's MCP session on /peers/U/mcp must still
//     answer (not 404), and its running A2A task on /peers/U/a2a must end
//     completed (not canceled); the made-up peers are refused (they do not
//     answer), and no face is made for them.
//   - The attacker, whom T's policy grants only orchestrate, calls it with a
//     plan of 32 subtasks of skills it may not run, 8 tags each (288 finds
//     on the landed build): each is refused -32009 before any find, and T's
//     audit log shows no find for them. Its finds of a skill it may run
//     count against its find budget of 2 per second: past it they are
//     refused -32005.
func TestAttackCostFaces(t *testing.T) {
	dir := t.TempDir()
	skills := filepath.Join(dir, "skills.json")
	facesWrite(t, skills, `{"skills":[{"name":"slow","description":"sleeps, then answers",
		"input_schema":{"type":"object"},"handler":{"type":"command","command":["/bin/sh","-c","sleep 8; echo '{\"slept\":8}'"],"timeout_s":60}}]}`)
	policy := filepath.Join(dir, "policy.json")
	facesWrite(t, policy, `{"grants":{"http":["orchestrate"]}}`)
	u := startNode(t, "--secret", secret, "--skills", skills)
	tn := startNode(t, "--port", "0", "--public-ip", "127.0.0.1", "--secret", secret, "--policy", policy, "--bootstrap", u.p2pAddr(t))
	uID := u.peerID()
	victim := secretSession()
	attacker := tn.anonSession(t)

	// The victim's MCP session on U's face (the 2025-11-25 era: a session
	// with state), and a task on U's A2A face that runs for 8 s.
	mcpURL := tn.base() + "/peers/" + uID + "/mcp"
	var sid string
	waitFor(t, 60*time.Second, "T's face of U to answer an MCP initialize", func() bool {
		st, hdr, _ := postFace(t, mcpURL, victim, facesInitialize, nil)
		sid = hdr.Get("Mcp-Session-Id")
		return st == http.StatusOK && sid != ""
	})
	if st, _, b := postFace(t, mcpURL, victim, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"Mcp-Session-Id": sid}); st/100 != 2 {
		t.Fatalf("notifications/initialized: %d %s", st, b)
	}
	a2aURL := tn.base() + "/peers/" + uID + "/a2a"
	st, _, b := postFace(t, a2aURL, victim, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"victim-1","role":"ROLE_USER",
		"parts":[{"data":{"skill":"slow","arguments":{}}}]},"configuration":{"returnImmediately":true}}}`, map[string]string{"A2A-Version": "1.0"})
	var sent struct {
		Result struct {
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		} `json:"result"`
	}
	if st != http.StatusOK || json.Unmarshal(b, &sent) != nil || sent.Result.Task.ID == "" {
		t.Fatalf("the victim's A2A task: %d %s", st, b)
	}
	taskID := sent.Result.Task.ID

	// The attack: made-up PeerIDs that decode (fresh keys) and some that
	// only look like one.
	var fakes []string
	for i := range 200 {
		if i%20 == 19 {
			fakes = append(fakes, "12D3KooW"+strings.Repeat("x", 43)) // shaped, but no multihash
			continue
		}
		_, pub, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := peer.IDFromPublicKey(pub)
		fakes = append(fakes, id.String())
	}
	type answer struct {
		status int
		body   string
	}
	answers := make([]answer, len(fakes))
	var wg sync.WaitGroup
	slots := make(chan struct{}, 16)
	start := time.Now()
	for i, f := range fakes {
		wg.Add(1)
		slots <- struct{}{}
		time.Sleep(10 * time.Millisecond) // 200 in about 2 s
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			var st int
			var b []byte
			if i%2 == 0 {
				st, _, b = postFace(t, tn.base()+"/peers/"+f+"/mcp", attacker, facesInitialize, nil)
			} else {
				st, _, b = postFace(t, tn.base()+"/peers/"+f+"/a2a", attacker, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m`+fmt.Sprint(i)+`","role":"ROLE_USER",
					"parts":[{"data":{"skill":"ping","arguments":{}}}]},"configuration":{"returnImmediately":true}}}`, map[string]string{"A2A-Version": "1.0"})
			}
			answers[i] = answer{st, string(b)}
		}()
	}
	wg.Wait()
	t.Logf("the attack: %d requests in %v", len(fakes), time.Since(start).Round(time.Millisecond))
	time.Sleep(1500 * time.Millisecond) // the gateway bucket of 127.0.0.1 refills

	// The victim's session and task are intact.
	st, _, b = facesRetry429(t, func() (int, http.Header, []byte) {
		return postFace(t, mcpURL, victim, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"})
	})
	if st != http.StatusOK || !strings.Contains(string(b), `"slow"`) {
		t.Errorf("the victim's MCP session on /peers/U/mcp after the attack: HTTP %d %s (want 200 with U's tools)", st, facesClip(b))
	}
	state := ""
	waitFor(t, 60*time.Second, "the victim's A2A task to end", func() bool {
		_, _, b := facesRetry429(t, func() (int, http.Header, []byte) {
			return postFace(t, a2aURL, victim, `{"jsonrpc":"2.0","id":3,"method":"GetTask","params":{"id":"`+taskID+`"}}`, map[string]string{"A2A-Version": "1.0"})
		})
		var got struct {
			Result struct {
				Status struct {
					State string `json:"state"`
				} `json:"status"`
			} `json:"result"`
		}
		_ = json.Unmarshal(b, &got)
		state = got.Result.Status.State
		return state != "" && state != "TASK_STATE_SUBMITTED" && state != "TASK_STATE_WORKING"
	})
	if state != "TASK_STATE_COMPLETED" {
		t.Errorf("the victim's A2A task on /peers/U/a2a ended %s, want TASK_STATE_COMPLETED", state)
	}
	// The made-up peers were refused, none served by a face of its own.
	counts := map[int]int{}
	unreachable, served := 0, 0
	for i, a := range answers {
		counts[a.status]++
		if a.status/100 == 2 {
			if served++; served == 1 {
				t.Errorf("made-up peer %s got a face: HTTP %d %s", fakes[i], a.status, facesClip([]byte(a.body)))
			}
		}
		if a.status == http.StatusBadGateway && strings.Contains(a.body, "could not reach peer") && strings.Contains(a.body, `"reason":"unreachable"`) {
			unreachable++
		}
	}
	t.Logf("the attacker's answers by HTTP status: %v", counts)
	if served > 0 {
		t.Errorf("%d of %d made-up peers were served by a face of their own", served, len(fakes))
	}
	if unreachable == 0 {
		t.Errorf("no made-up peer was refused as one that does not answer (502 \"could not reach peer\", reason unreachable)")
	}

	// Orchestrate: 32 subtasks the attacker may not run, 8 tags each.
	var subtasks []map[string]any
	refusedKeys := map[string]bool{}
	for i := range 32 {
		skill := []string{"slow", "upload_file", "ask", "command"}[i%4]
		if i >= 4 {
			skill = fmt.Sprintf("made_up_skill_%d", i)
		}
		var tags []string
		for j := range 8 {
			tags = append(tags, fmt.Sprintf("tag-%d-%d", i, j))
		}
		refusedKeys[skill] = true
		for _, tg := range tags {
			refusedKeys[tg] = true
		}
		subtasks = append(subtasks, map[string]any{"id": fmt.Sprint("s", i), "text": "x", "skill": skill, "tags": tags, "arguments": map[string]any{}})
	}
	start = time.Now()
	res := facesOrchestrate(t, tn, attacker, subtasks)
	took := time.Since(start)
	refused := 0
	for _, s := range res.Subtasks {
		if s.Status == "failed" && strings.Contains(s.Error, "-32009") {
			refused++
		} else if refused == 0 {
			t.Errorf("subtask %s (%s): %s %q, want refused -32009", s.ID, s.Skill, s.Status, facesClip([]byte(s.Error)))
		}
	}
	if refused != len(subtasks) {
		t.Errorf("%d of %d subtasks the attacker may not run were refused -32009", refused, len(subtasks))
	}
	assigned, found := 0, 0
	for _, l := range auditLines(t, tn.dataDir) {
		skill, _ := l["skill"].(string)
		code, _ := l["code"].(float64)
		switch {
		case l["method"] == "orchestrate assign" && int(code) == -32009:
			assigned++
		case l["method"] == "orchestrate find" && refusedKeys[skill]:
			found++
		}
	}
	t.Logf("orchestrate of 32 refused subtasks: %d refused -32009 in %v; T's audit: %d refusals before assignment, %d finds for them",
		refused, took.Round(time.Millisecond), assigned, found)
	if assigned != 32 || found != 0 {
		t.Errorf("T's audit log: %d subtasks refused before assignment (want 32), %d finds for them (want 0)", assigned, found)
	}

	// The find budget: ping is open, so its subtask is assigned; its 9 finds
	// (the skill and 8 tags) at once go past 2 per second.
	var tags []string
	for j := range 8 {
		tags = append(tags, fmt.Sprintf("budget-%d", j))
	}
	start = time.Now()
	facesOrchestrate(t, tn, attacker, []map[string]any{{"id": "p", "text": "ping", "skill": "ping", "tags": tags, "arguments": map[string]any{}}})
	took = time.Since(start)
	made, limited := 0, 0
	for _, l := range auditLines(t, tn.dataDir) {
		skill, _ := l["skill"].(string)
		if l["method"] != "orchestrate find" || (skill != "ping" && !strings.HasPrefix(skill, "budget-")) {
			continue
		}
		if code, _ := l["code"].(float64); int(code) == -32005 {
			limited++
		} else {
			made++
		}
	}
	t.Logf("orchestrate of 9 finds: %d made, %d refused -32005, in %v", made, limited, took.Round(time.Millisecond))
	if limited == 0 || float64(made) > 2+2*took.Seconds()+1 {
		t.Errorf("finds past the caller's budget of 2/s: %d made and %d refused -32005 in %v, want some refused and at most 2/s made",
			made, limited, took)
	}
}

// facesInitialize is an MCP initialize of the 2025-11-25 era.
const facesInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"attack-test","version":"1"}}}`

// facesRetry429 repeats a request the gateway bucket refused (429), for
// up to 10 s.
func facesRetry429(t *testing.T, f func() (int, http.Header, []byte)) (int, http.Header, []byte) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, h, b := f()
		if st != http.StatusTooManyRequests || time.Now().After(deadline) {
			return st, h, b
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// facesResult is what orchestrate answers.
type facesResult struct {
	Subtasks []struct {
		ID     string `json:"id"`
		Skill  string `json:"skill"`
		Status string `json:"status"`
		Error  string `json:"error"`
	} `json:"subtasks"`
}

// facesOrchestrate calls T's orchestrate with a given plan as the session
// tok, through T's /mcpv2.
func facesOrchestrate(t *testing.T, tn *proc, tok string, subtasks []map[string]any) facesResult {
	t.Helper()
	st, a := call(t, tn.base()+"/mcpv2", tok, "orchestrate", map[string]any{"request": "many things", "plan": map[string]any{"subtasks": subtasks}}, "")
	var res facesResult
	if st != http.StatusOK || a.Error != nil || json.Unmarshal(a.Result, &res) != nil || len(res.Subtasks) != len(subtasks) {
		t.Fatalf("orchestrate: HTTP %d %+v %s", st, a.Error, facesClip(a.Result))
	}
	return res
}

func facesWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func facesClip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}
