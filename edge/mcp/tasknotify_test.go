package mcp_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// legacyStream is a 2025-11-25 session of token's caller with its
// standing stream (the GET the client keeps open): the session's wire, and
// the JSON-RPC messages the stream carries, in order.
func legacyStream(t *testing.T, url, token string) (wire, <-chan map[string]any) {
	t.Helper()
	hdr := map[string]string{"Authorization": "Bearer " + token, "MCP-Protocol-Version": eraSessions}
	status, h, body := post(t, url, hdr, initBody)
	if status != http.StatusOK || h.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %s", status, body)
	}
	hdr["Mcp-Session-Id"] = h.Get("Mcp-Session-Id")
	if status, _, body := post(t, url, hdr, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", status, body)
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		t.Fatalf("standing stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	msgs := make(chan map[string]any, 64)
	done := make(chan struct{})
	ended := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		resp.Body.Close()
		<-ended
	})
	go func() {
		defer close(ended)
		defer close(msgs)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				m = map[string]any{"undecodable": data}
			}
			select {
			case msgs <- m:
			case <-done:
				return
			}
		}
	}()
	wire := func(t *testing.T, id int, method, name string, params map[string]any) rpcAnswer {
		t.Helper()
		h := map[string]string{"Mcp-Method": method}
		for k, v := range hdr {
			h[k] = v
		}
		status, _, body := post(t, url, h, rpcBody(id, method, eraParams(eraSessions, params)))
		a := decodeAnswer(t, body)
		if status != http.StatusOK && a.Error == nil {
			t.Fatalf("%s: HTTP %d %s", method, status, body)
		}
		return a
	}
	return wire, msgs
}

// awaitStatus reads msgs until the notifications/tasks/status of task id
// in status want, and returns its params; a message that names a task in
// notOurs fails the test. The deadline only keeps a broken face from
// hanging the test.
func awaitStatus(t *testing.T, who string, msgs <-chan map[string]any, id, want string, notOurs ...string) map[string]any {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatalf("%s: the standing stream ended before task %s was %s", who, id, want)
			}
			b, _ := json.Marshal(m)
			for _, other := range notOurs {
				if strings.Contains(string(b), other) {
					t.Fatalf("%s: the standing stream carries another caller's task %s: %s", who, other, b)
				}
			}
			p, _ := m["params"].(map[string]any)
			if m["method"] == "notifications/tasks/status" && p["taskId"] == id && p["status"] == want {
				return p
			}
		case <-deadline:
			t.Fatalf("%s: no notifications/tasks/status of task %s as %s", who, id, want)
		}
	}
}

// TestTasksLegacyStatusNotes: in the 2025-11-25 form, a task's status
// changes reach its owner's standing stream as notifications/tasks/status
// (the Task); another caller who names the task (tasks/result, tasks/get,
// both refused) hears nothing of it on its own stream, only of its own
// tasks.
func TestTasksLegacyStatusNotes(t *testing.T) {
	r := newTaskRig(t)
	owner, ownerNotes := legacyStream(t, r.url, r.secretToken())
	other, otherNotes := legacyStream(t, r.url, r.anonToken(t))

	nap := obj(t, owner(t, 1, "tools/call", "", asTask(eraSessions, "nap")))["task"].(map[string]any)["taskId"].(string)
	wantCode(t, "another caller's tasks/result", other(t, 2, "tasks/result", "", map[string]any{"taskId": nap}), -32602)
	wantCode(t, "another caller's tasks/get", other(t, 3, "tasks/get", "", map[string]any{"taskId": nap}), -32602)
	mine := obj(t, other(t, 4, "tools/call", "", asTask(eraSessions, "nap")))["task"].(map[string]any)["taskId"].(string)

	obj(t, owner(t, 5, "tasks/cancel", "", map[string]any{"taskId": nap}))
	p := awaitStatus(t, "owner", ownerNotes, nap, "cancelled")
	if p["ttl"] != float64(time.Hour.Milliseconds()) || p["pollInterval"] == nil || p["createdAt"] == nil || p["lastUpdatedAt"] == nil || p["ttlMs"] != nil {
		t.Fatalf("notifications/tasks/status is not the 2025-11-25 Task: %v", p)
	}

	// The other caller's own task ends after the owner's did: its stream
	// carries that, and nothing of the owner's task before it.
	obj(t, other(t, 6, "tasks/cancel", "", map[string]any{"taskId": mine}))
	awaitStatus(t, "other caller", otherNotes, mine, "cancelled", nap)
}
