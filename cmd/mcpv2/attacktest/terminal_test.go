package attacktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// termEvil is what the attacker puts wherever a victim's terminal will show
// it: an OSC that retitles the terminal (ended by BEL), a CSI that clears
// it, a right-to-left override that shows "gnp.exe" as "exe.png", a
// zero-width space, and the one-character CSI U+009B with its "31m".
const termEvil = "\x1b]0;pwned\x07\x1b[2J\u202egnp.exe\u200b\u009b31m"

// termEscaped is termEvil as the victim must see it in text: each of
// those characters as its visible escape.
const termEscaped = `\x1b]0;pwned\a\x1b[2J\u202egnp.exe\u200b\u009b31m`

// termEscapedJSON is termEvil as the victim must see it inside JSON output
// (a card, a result, --json): the same value, every one of them escaped.
const termEscapedJSON = `\u001b]0;pwned\u0007\u001b[2J\u202egnp.exe\u200b\u009b31m`

// termRaw are the characters of termEvil that must never reach the
// victim's terminal raw.
var termRaw = map[rune]string{'\x1b': "ESC", '\x07': "BEL", '\u009b': "CSI (U+009B)", '\u202e': "RLO (U+202E)", '\u200b': "ZWSP (U+200B)"}

// TestAttackTerminal (issue 18, item 7): a peer or a caller puts terminal
// escapes, a bidi override and zero-width characters in every text the
// victim's CLI prints: its agent name (card, find), a skill's error message
// (call), a skill's result (call), a ping's answer and the shell's PingTo,
// PayTo and SentTo (a fake edge: any program may speak the protocol), and a
// skill name that the victim's audit log records (audit). The victim must
// see every one of them escaped, never raw.
func TestAttackTerminal(t *testing.T) {
	// The attacker: a stock node whose name is termEvil, with a skill that
	// fails with termEvil on stderr and one that answers it, open to all.
	dir := t.TempDir()
	skills := termWriteJSON(t, filepath.Join(dir, "skills.json"), map[string]any{"skills": []any{
		map[string]any{"name": "boom", "description": "fails", "tags": []string{"evil"}, "input_schema": map[string]any{"type": "object"},
			"handler": map[string]any{"type": "command", "command": []string{"/bin/sh", "-c", `printf '%s' "$1" >&2; exit 3`, "sh", termEvil}}},
		map[string]any{"name": "gift", "description": "answers", "input_schema": map[string]any{"type": "object"},
			"handler": map[string]any{"type": "template", "template": termEvil}},
	}})
	policy := termWriteJSON(t, filepath.Join(dir, "policy.json"), map[string]any{"grants": map[string]any{"*": []string{"*"}}})
	attacker := startNode(t, "--name", "evil"+termEvil, "--skills", skills, "--policy", policy)
	fake := termFakeEdge(t)
	victimDir := t.TempDir()
	client := func(args ...string) []string {
		return append(args, "--data-dir", victimDir, "--no-nat")
	}

	t.Run("card", func(t *testing.T) {
		out := termRun(t, "", client("card", attacker.p2pAddr(t))...)
		termCheck(t, out, `"name": "evil`+termEscapedJSON+`"`)
	})
	t.Run("call error", func(t *testing.T) {
		out := termRun(t, "", client("call", attacker.p2pAddr(t), "boom")...)
		termCheck(t, out, "stderr: "+termEscaped)
	})
	t.Run("call result", func(t *testing.T) {
		out := termRun(t, "", client("call", attacker.p2pAddr(t), "gift")...)
		termCheck(t, out, `{"result":"`+termEscapedJSON+`"}`)
	})
	t.Run("find", func(t *testing.T) {
		var out string
		waitFor(t, 60*time.Second, "find to list the attacker", func() bool {
			out = termRun(t, "", client("find", "boom", "--bootstrap", attacker.p2pAddr(t), "--timeout", "20s")...)
			return strings.Contains(out, attacker.peerID())
		})
		termCheck(t, out, "evil"+termEscaped)
		out = termRun(t, "", client("find", "boom", "--json", "--bootstrap", attacker.p2pAddr(t), "--timeout", "20s")...)
		termCheck(t, out, "evil"+termEscapedJSON)
	})
	t.Run("ping", func(t *testing.T) {
		out := termRun(t, "", "ping", fake, "--count", "1")
		termCheck(t, out, "pong from "+termEscaped+": seq=1")
	})
	t.Run("shell", func(t *testing.T) {
		in := "PingTo " + fake + "\nPayTo 1 " + fake + "\nSentTo hello " + fake + "\nSentTo fail " + fake + "\nexit\n"
		out := termRun(t, in, "shell", "--data-dir", victimDir, "--no-nat")
		termCheck(t, out, "pong from "+termEscaped+" in ", ": "+termEscaped+", transaction tx",
			termEscaped+"\n  (local)", "error -32004: "+termEscaped)
	})
	t.Run("audit", func(t *testing.T) {
		// The attacker calls a skill named termEvil on the victim's edge,
		// anonymously: the victim's audit log records the name.
		victim := startNode(t, "--port", "0", "--public-ip", "127.0.0.1")
		call(t, victim.base()+"/mcpv2", victim.anonSession(t), termEvil, map[string]any{}, "")
		waitFor(t, 10*time.Second, "the audit line of the attacker's call", func() bool {
			for _, l := range auditLines(t, victim.dataDir) {
				if l["skill"] == termEvil {
					return true
				}
			}
			return false
		})
		termCheck(t, termRun(t, "", "audit", "--data-dir", victim.dataDir), termEscaped)
		termCheck(t, termRun(t, "", "audit", "--json", "--data-dir", victim.dataDir), `"skill":"`+termEscapedJSON+`"`)
	})
}

// termCheck fails the test when out (what a victim's command printed)
// holds a character of termRaw, or invalid UTF-8, or lacks one of want.
func termCheck(t *testing.T, out string, want ...string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("the output is not valid UTF-8: %q", out)
	}
	for i, r := range out {
		if name, ok := termRaw[r]; ok {
			t.Errorf("a raw %s reached the terminal at byte %d: …%q…", name, i, out[max(0, i-40):min(len(out), i+40)])
			break
		}
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("the output lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("the victim saw (quoted): %q", out)
	}
}

// termRun runs the victim's `mcpv2 args…` with stdin in and returns what
// it printed, stdout then stderr. An exit status other than 0 is expected
// of the calls that fail.
func termRun(t *testing.T, in string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = testenv.CleanEnv()
	cmd.Stdin = strings.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && (!errors.As(err, &ee) || ctx.Err() != nil) {
		t.Fatalf("mcpv2 %q: %v\n%s%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String() + stderr.String()
}

// termWriteJSON writes v as JSON at path and returns path.
func termWriteJSON(t *testing.T, path string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// termFakeEdge is the attacker's own HTTP edge, which answers what it
// likes: ping, pay and ask answers made of termEvil, and an error whose
// message is termEvil. It returns its address.
func termFakeEdge(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet && r.URL.Path == "/mcpv2/session" {
			_ = json.NewEncoder(w).Encode(map[string]any{"sessionId": "attacker", "ttl": 3600})
			return
		}
		// An edge answers /mcpv2/health (SPEC §7); the CLI asks it to tell
		// an edge from an A2A agent at a bare URL.
		if r.Method == http.MethodGet && r.URL.Path == "/mcpv2/health" {
			_ = json.NewEncoder(w).Encode(map[string]any{"status": "ok"})
			return
		}
		var slot struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Name      string `json:"name"`
				Arguments struct {
					Query string `json:"query"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if r.Method != http.MethodPost || r.URL.Path != "/mcpv2" || json.NewDecoder(r.Body).Decode(&slot) != nil {
			http.NotFound(w, r)
			return
		}
		answer := map[string]any{"jsonrpc": "2.0", "id": slot.ID}
		switch p := slot.Params; {
		case p.Name == "ping":
			answer["result"] = map[string]any{"peer_id": termEvil}
		case p.Name == "pay":
			answer["result"] = map[string]any{"status": termEvil, "transaction_id": "tx", "stub": true, "amount": 1, "currency": "EUR"}
		case p.Name == "ask" && p.Arguments.Query != "fail":
			answer["result"] = map[string]any{"response": termEvil, "provider": "local"}
		default:
			answer["error"] = map[string]any{"code": -32004, "message": termEvil}
		}
		_ = json.NewEncoder(w).Encode(answer)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
