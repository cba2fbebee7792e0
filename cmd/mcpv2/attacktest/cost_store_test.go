package attacktest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// TestAttackCostStore is issue 18's item 6, its first two costs, from the
// attacker's side: an anonymous edge session subscribes to resources of
// the MCP face with 1 MiB URIs and with many URIs (they were all accepted,
// held after the session ended, and logged whole: 96 of them took the
// node from 41 to 491 MiB), and sends A2A messages of 4 MiB that the node
// refuses (they were stored anyway, twice each, for 7 days: 8 grew
// state.db by 208 MiB). Now a subscription names a resource the caller
// may read, in at most 1 KiB, at most 64 per session, gone with the
// session; a refused message leaves a task that records the refusal, not
// the message; and the tasks' bytes are capped (--max-tasks-bytes), one
// caller's at a sixteenth.
func TestAttackCostStore(t *testing.T) {
	dir := t.TempDir()
	// The node lets anonymous callers read files (so that they pass the
	// read check and meet the caps), and not run ask.
	if err := os.WriteFile(filepath.Join(dir, "policy.json"), []byte(`{"grants":{"http":["read_file","list_files"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startNode(t, "--data-dir", dir, "--port", "0", "--public-ip", "127.0.0.1", "--secret", secret)
	pid := p.Cmd.Process.Pid

	t.Run("subscriptions", func(t *testing.T) {
		tok := p.anonSession(t)
		sid := storeMCPInit(t, p, tok)
		rss0, err := testenv.ProcStatus(pid, "VmRSS")
		if err != nil {
			t.Fatal(err)
		}
		// 96 subscriptions with 1 MiB URIs: each refused, naming the cap.
		accepted := 0
		for i := range 96 {
			uri := fmt.Sprintf("mcpv2://files/%03d-%s", i, strings.Repeat("a", 1<<20))
			a := storeMCPCall(t, p, tok, sid, i+10, "resources/subscribe", map[string]any{"uri": uri})
			switch {
			case a.Error == nil:
				accepted++
			case !strings.Contains(a.Error.Message, "1024 bytes (1 KiB)") || len(a.Error.Message) > 1000:
				t.Errorf("a 1 MiB URI: refused, but not clearly (%d bytes): %.300s", len(a.Error.Message), a.Error.Message)
			}
		}
		if accepted > 0 {
			t.Errorf("%d of 96 subscriptions with a 1 MiB URI were accepted (want each refused: a URI is at most 1 KiB)", accepted)
		}
		// Many URIs: at most 64 per session, the 65th on refused, naming the cap.
		accepted = 0
		for i := range 100 {
			a := storeMCPCall(t, p, tok, sid, i+200, "resources/subscribe", map[string]any{"uri": fmt.Sprintf("mcpv2://files/many-%d.txt", i)})
			switch {
			case a.Error == nil:
				accepted++
			case i < 64:
				t.Errorf("subscription %d of a session refused: %s", i, a.Error.Message)
			case !strings.Contains(a.Error.Message, "64 subscriptions"):
				t.Errorf("the 65th subscription: refused, but not naming the cap: %.300s", a.Error.Message)
			}
		}
		if accepted > 64 {
			t.Errorf("one session holds %d subscriptions (want at most 64)", accepted)
		}
		// A subscription to what the caller may not read: refused.
		if a := storeMCPCall(t, p, tok, sid, 999, "resources/subscribe",
			map[string]any{"uri": "mcpv2://agents/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN"}); a.Error == nil {
			t.Error("a subscription to an agent's card, which sends no updates, was accepted")
		}
		// The session ends; what it cost must not stay.
		if st, _, _ := storeMCPDo(t, http.MethodDelete, p.base()+"/mcp", tok, sid, nil); st >= 300 {
			t.Errorf("DELETE of the MCP session: %d", st)
		}
		time.Sleep(500 * time.Millisecond)
		rss1, err := testenv.ProcStatus(pid, "VmRSS")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("node RSS: %d MiB before, %d MiB after 96 subscriptions with 1 MiB URIs and the session's end", rss0>>20, rss1>>20)
		// The node runs with GOGC=400 (cmd/mcpv2/gc.go): the garbage of
		// 1 MiB requests alone lifts its heap's goal, and RSS, by up to
		// about 100 MiB, which it keeps for a while; URIs held would be 96
		// MiB several times over (the landed build: +450 MiB).
		if rss1-rss0 > 160<<20 {
			t.Errorf("the node's RSS grew by %d MiB (from %d to %d MiB): the URIs are held", (rss1-rss0)>>20, rss0>>20, rss1>>20)
		}
		// No log line quotes a URI whole.
		sc := bufio.NewScanner(strings.NewReader(p.Log.String()))
		sc.Buffer(nil, 64<<20)
		long := 0
		for sc.Scan() {
			if len(sc.Bytes()) > 16<<10 {
				long++
			}
		}
		if long > 0 {
			t.Errorf("the node's log has %d lines longer than 16 KiB (a URI logged whole)", long)
		}
	})

	t.Run("refused A2A messages", func(t *testing.T) {
		tok := p.anonSession(t)
		db := filepath.Join(dir, "state.db")
		size := func() int64 {
			fi, err := os.Stat(db)
			if err != nil {
				t.Fatal(err)
			}
			return fi.Size()
		}
		before := size()
		text := strings.Repeat("x", 4<<20)
		for i := range 8 {
			st, b := do(t, http.MethodPost, p.base()+"/a2a", bearer(tok), map[string]any{"jsonrpc": "2.0", "id": i + 1, "method": "message/send",
				"params": map[string]any{"message": map[string]any{"kind": "message", "messageId": fmt.Sprintf("m-%d", i), "role": "user",
					"parts": []any{map[string]any{"kind": "text", "text": text}}}}})
			var a rpcAnswer
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatalf("message %d: %d %.300s", i, st, b)
			}
			var task struct {
				Status struct{ State string }
			}
			_ = json.Unmarshal(a.Result, &task)
			if a.Error == nil && task.Status.State != "rejected" {
				t.Errorf("message %d, ask by an anonymous caller: not refused: %.300s", i, b)
			}
			if len(b) > 64<<10 {
				t.Errorf("message %d: the refusal is %d bytes: the message is kept and sent back", i, len(b))
			}
		}
		after := size()
		t.Logf("state.db: %d KiB before, %d KiB after 8 refused 4 MiB messages", before>>10, after>>10)
		if after-before > 2<<20 {
			t.Errorf("state.db grew by %d MiB for 8 refused messages (want well under 8 MiB: a refused message is not kept)", (after-before)>>20)
		}
	})

	t.Run("max-tasks-bytes", func(t *testing.T) {
		// A cap of 32 MiB: one anonymous caller may hold 2 MiB of tasks; a
		// 4 MiB message of one who may run ask does not fit. The node's
		// secret holders are held to the total alone: theirs is not
		// refused for the share.
		qdir := t.TempDir()
		if err := os.WriteFile(filepath.Join(qdir, "policy.json"), []byte(`{"grants":{"http":["ask"]}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		q := startNode(t, "--data-dir", qdir, "--port", "0", "--public-ip", "127.0.0.1", "--secret", secret, "--max-tasks-bytes", "33554432")
		send := func(tok string) []byte {
			_, b := do(t, http.MethodPost, q.base()+"/a2a", bearer(tok), map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send",
				"params": map[string]any{"message": map[string]any{"kind": "message", "messageId": "big", "role": "user",
					"parts": []any{map[string]any{"kind": "text", "text": strings.Repeat("y", 4<<20)}}}}})
			return b
		}
		b := send(q.anonSession(t))
		var a rpcAnswer
		if err := json.Unmarshal(b, &a); err != nil || a.Error == nil || a.Error.Code != -32004 || !strings.Contains(a.Error.Message, "max-tasks-bytes") {
			t.Fatalf("a message over one caller's share of --max-tasks-bytes: want -32004 naming the cap, got %.400s", b)
		}
		b = send(secretSession())
		var sa rpcAnswer
		if err := json.Unmarshal(b, &sa); err != nil || (sa.Error != nil && sa.Error.Code == -32004) {
			t.Fatalf("a secret holder's 4 MiB message refused for one owner's share: %.400s", b)
		}
	})
}

// storeMCPInit opens an MCP session of the 2025-11-25 era on p's /mcp as
// tok's holder (initialize, then notifications/initialized) and returns its
// Mcp-Session-Id.
func storeMCPInit(t *testing.T, p *proc, tok string) string {
	t.Helper()
	st, h, b := storeMCPDo(t, http.MethodPost, p.base()+"/mcp", tok, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "attacker", "version": "1"}}})
	sid := h.Get("Mcp-Session-Id")
	if st != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %.300s", st, b)
	}
	if st, _, b := storeMCPDo(t, http.MethodPost, p.base()+"/mcp", tok, sid, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); st >= 300 {
		t.Fatalf("notifications/initialized: %d %.300s", st, b)
	}
	return sid
}

// storeMCPCall sends one request of the session sid and returns its answer.
func storeMCPCall(t *testing.T, p *proc, tok, sid string, id int, method string, params any) rpcAnswer {
	t.Helper()
	st, _, b := storeMCPDo(t, http.MethodPost, p.base()+"/mcp", tok, sid, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	var a rpcAnswer
	if err := json.Unmarshal(b, &a); err != nil || st != http.StatusOK {
		t.Fatalf("%s: %d %.300s", method, st, b)
	}
	return a
}

// storeMCPDo sends one HTTP request of MCP's streamable HTTP and returns
// the status, the headers and the body, or the JSON-RPC message of its
// first event when the answer is an event stream. A 429 is retried.
func storeMCPDo(t *testing.T, method, url, tok, sid string, body any) (int, http.Header, []byte) {
	t.Helper()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(raw))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("%s %s: %v", method, url, err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		resp.Body.Close()
		cancel()
		if resp.StatusCode == http.StatusTooManyRequests && try < 50 {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			for line := range strings.Lines(string(b)) {
				if data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok && strings.Contains(data, `"jsonrpc"`) {
					return resp.StatusCode, resp.Header, []byte(data)
				}
			}
		}
		return resp.StatusCode, resp.Header, b
	}
}
