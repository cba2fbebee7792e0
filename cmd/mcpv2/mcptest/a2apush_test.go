package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// a2aRPC posts one A2A JSON-RPC request (A2A-Version 1.0) with tok to the
// node's /a2a and returns its result or error.
func a2aRPC(t *testing.T, base, tok, method string, params any) (json.RawMessage, *struct {
	Code    int
	Message string
}) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, base+"/a2a", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Result json.RawMessage
		Error  *struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %d %s", method, resp.StatusCode, b)
	}
	return out.Result, out.Error
}

// pingWithHook is SendMessage of ping whose configuration names webhook
// url ("" none), as a2aRPC answers it.
func pingWithHook(url string) map[string]any {
	p := map[string]any{"message": map[string]any{"messageId": "m-" + time.Now().Format("150405.000000000"), "role": "ROLE_USER",
		"parts": []any{map[string]any{"data": map[string]any{"skill": "ping"}}}}}
	if url != "" {
		p["configuration"] = map[string]any{"taskPushNotificationConfig": map[string]any{"url": url}}
	}
	return p
}

// TestA2APushNotifications: a node started as a user starts it with
// --outbound-allow 127.0.0.0/8 (its webhooks on loopback, as in a test)
// sends every state change of a task to a webhook built on @a2a-js/sdk
// 1.3.0 (its client sets the config with the message, its StreamResponse
// reads each v1.0 body) and jose, which verifies each notification's JWT
// against the JWKS the node's card names, in v1.0 and through the SDK's
// v0.3 layer; the SDK's client runs the four config operations. A webhook
// that is down (503) is tried 4 times per notification, then the
// notification is dropped with one audit line in the node's audit log. A
// node without --outbound-allow refuses a webhook on loopback or a private
// range, naming the address class.
func TestA2APushNotifications(t *testing.T) {
	needNPM(t, "mcp-inspector") // the lock file installs @a2a-js/sdk with it
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		testenv.SkipEnv(t, "node is not installed: %v", err)
	}
	a := startNodeWithPolicy(t, grantHTTPAll, "--port", "0", "--secret", secret, "--outbound-allow", "127.0.0.0/8")
	base := strings.TrimSuffix(a.mcpURL(), "/mcp")
	tok := secretSession(secret)
	for _, mode := range []string{"v1", "v03"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, nodeBin, "a2a-push-receiver.mjs")
			cmd.Dir = npmDir
			cmd.Env = append(testenv.CleanEnv(), "A2A_BASE_URL="+base, "A2A_TOKEN="+tok, "A2A_MODE="+mode)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("a2a-push-receiver.mjs (%s): %v\n%s\n%s", mode, err, out.String(), errb.String())
			}
			want := []string{"ok: card: pushNotifications, JWKS at /.well-known/jwks.json", "ok: every notification's JWT verified against the JWKS",
				"ok: push states: submitted,working,completed\n", "ok: config operations: create, get, list, delete"}
			if mode == "v1" {
				want = append(want, "ok: push kinds: task,statusUpdate,artifactUpdate,statusUpdate\n")
			} else {
				want = append(want, "ok: push kinds: task,task,task,task\n")
			}
			for _, w := range want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("no %q in:\n%s", w, out.String())
				}
			}
		})
	}

	t.Run("down", func(t *testing.T) {
		var mu sync.Mutex
		hits := 0
		down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			mu.Lock()
			hits++
			mu.Unlock()
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		defer down.Close()
		if _, e := a2aRPC(t, base, tok, "SendMessage", pingWithHook(down.URL+"/hook")); e != nil {
			t.Fatal(e.Message)
		}
		// ping's first event (the task) is tried 4 times (the node's
		// default), then dropped: one audit line, whose remote is the
		// webhook's host, and the config's circuit opens: its next three
		// events (working, artifact, completed) are dropped unsent, with
		// no line of their own.
		host := strings.TrimPrefix(down.URL, "http://")
		deadline := time.Now().Add(30 * time.Second)
		for {
			drops := 0
			for _, l := range testenv.AuditLines(t, a.first("MCPV2_DATA_DIR")) {
				if l["method"] == "a2a push" {
					if l["outcome"] != "error" || l["remote"] != host || l["caller"] == "" || l["auth"] != "secret" {
						t.Fatalf("audit line %v", l)
					}
					drops++
				}
			}
			if drops == 1 {
				break
			}
			if drops > 1 || time.Now().After(deadline) {
				t.Fatalf("%d audit lines of dropped notifications, want 1", drops)
			}
			time.Sleep(50 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		if hits != 4 {
			t.Fatalf("the webhook that is down was tried %d times, want 4 for its first notification and none for the next", hits)
		}
	})

	t.Run("refused", func(t *testing.T) {
		b := startNodeWithPolicy(t, grantHTTPAll, "--port", "0", "--secret", secret) // no --outbound-allow
		bbase := strings.TrimSuffix(b.mcpURL(), "/mcp")
		for url, class := range map[string]string{"http://127.0.0.1:9/hook": "loopback", "http://10.0.0.7/hook": "private", "http://[::1]:9/": "loopback",
			"http://192.168.4.4/": "private", "http://169.254.169.254/latest": "link-local"} {
			if _, e := a2aRPC(t, bbase, tok, "SendMessage", pingWithHook(url)); e == nil || e.Code != -32602 || !strings.Contains(e.Message, "a "+class+" address") {
				t.Errorf("a webhook at %s: %+v, want -32602 naming %s", url, e, class)
			}
		}
		res, e := a2aRPC(t, bbase, tok, "SendMessage", pingWithHook(""))
		if e != nil {
			t.Fatal(e.Message)
		}
		var sent struct{ Task struct{ ID string } }
		_ = json.Unmarshal(res, &sent)
		if _, e := a2aRPC(t, bbase, tok, "CreateTaskPushNotificationConfig", map[string]any{"taskId": sent.Task.ID, "url": "http://localhost:9/"}); e == nil || e.Code != -32602 || !strings.Contains(e.Message, "loopback") {
			t.Fatalf("a webhook at localhost: %+v", e)
		}
	})
}
