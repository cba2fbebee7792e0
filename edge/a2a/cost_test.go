package a2a_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/edge/a2a"
	"github.com/mcpv2/mcpv2/node"
)

// noAuthorizer hides the node's Authorize from the face, as a Backend that
// cannot say ahead whether a call will be refused (a peer's face).
type noAuthorizer struct{ a2a.Backend }

// TestRefusedMessageNotKept: a message the node refuses (an anonymous
// caller may not run ask) leaves a rejected task that records the refusal,
// not the message: never written when the node can say ahead
// (Authorizer), dropped at the refusal when it cannot.
func TestRefusedMessageNotKept(t *testing.T) {
	big := strings.Repeat("attack ", 150_000) // about 1 MiB
	for name, b := range map[string]func(*node.Node) a2a.Backend{
		"authorizer":    nil,
		"no authorizer": func(n *node.Node) a2a.Backend { return noAuthorizer{n} },
	} {
		t.Run(name, func(t *testing.T) {
			r := newRigWith(t, nil, b)
			res, e := r.rpc(t, r.anon(t), "", "message/send", map[string]any{"message": msg(map[string]any{"kind": "text", "text": big})})
			if e != nil || !strings.Contains(string(res), `"state":"rejected"`) || !strings.Contains(string(res), "-32009") {
				t.Fatalf("refused ask: %.300s %+v", res, e)
			}
			if len(res) > 16<<10 || !strings.Contains(string(res), "not kept") {
				t.Fatalf("the answer is %d bytes, or does not say the message was not kept: %.500s", len(res), res)
			}
			var task struct{ ID string }
			_ = json.Unmarshal(res, &task)
			st, err := r.n.Store().Task(task.ID)
			if err != nil || len(st.Task) > 4<<10 || st.State != "rejected" {
				t.Fatalf("stored task: %d bytes, %s, %v", len(st.Task), st.State, err)
			}
			evs, _ := r.n.Store().TaskEvents(task.ID, 0, 0)
			for _, ev := range evs {
				if len(ev.Event) > 4<<10 {
					t.Fatalf("event %d is %d bytes", ev.Seq, len(ev.Event))
				}
			}
			if _, all, _ := r.n.Store().TaskBytes(""); all > 16<<10 {
				t.Fatalf("the tasks hold %d bytes", all)
			}
		})
	}
}

// TestEventsReferToTask: the stored events name the task's message and
// artifacts rather than copy them; a replay from the store (Last-Event-ID)
// gives them whole.
func TestEventsReferToTask(t *testing.T) {
	r := newRigWith(t, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	marker := strings.Repeat("m", 10_000)
	resp := r.stream(t, ctx, "SendStreamingMessage", map[string]any{"message": msg(
		map[string]any{"data": map[string]any{"skill": "slow", "arguments": map[string]any{"note": marker}}})}, nil)
	evs := sseEvents(t, resp.Body, 2)
	resp.Body.Close()
	id := evs[0]["result"].(map[string]any)["task"].(map[string]any)["id"].(string)
	stored, _ := r.n.Store().TaskEvents(id, 0, 0)
	if len(stored) != 2 || strings.Contains(string(stored[0].Event), marker) {
		t.Fatalf("the first stored event copies the message (%d events)", len(stored))
	}
	// Replay everything from the store while it runs: the task event
	// comes back with its message.
	resp = r.stream(t, ctx, "SubscribeToTask", map[string]any{"id": id}, map[string]string{"Last-Event-ID": "0"})
	evs = sseEvents(t, resp.Body, 2)
	resp.Body.Close()
	if task, _ := evs[0]["result"].(map[string]any)["task"].(map[string]any); task == nil || !strings.Contains(jsonText(task["history"]), marker) {
		t.Fatalf("the replayed task event lacks its message: %.300v", evs[0])
	}
	close(r.release)
	r.waitCompleted(t, id)
	stored, _ = r.n.Store().TaskEvents(id, 0, 0)
	if len(stored) != 4 || strings.Contains(string(stored[2].Event), "slow done") {
		t.Fatalf("the stored artifact event copies the artifact: %d events", len(stored))
	}
}

// TestTaskBytesCap: a caller's new task that does not fit in its share of
// --max-tasks-bytes is refused with -32004 naming the cap; its finished
// tasks make room for new ones, oldest first.
func TestTaskBytesCap(t *testing.T) {
	// An anonymous caller granted ask and ping has a share of 64 KiB; the
	// node's secret holders are held to the total (1 MiB) alone.
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"grants":{"http":["ask","ping"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRigWith(t, func(c *node.Config) { c.MaxTasksBytes = 1 << 20; c.PolicyFile = policy }, nil)
	tok := r.anon(t)
	big := map[string]any{"message": msg(map[string]any{"text": strings.Repeat("x", 100<<10)})}
	_, e := r.rpc(t, tok, "1.0", "SendMessage", big)
	if e == nil || e.Code != -32004 || !strings.Contains(e.Message, "max-tasks-bytes") {
		t.Fatalf("a message larger than a caller's share: %+v", e)
	}
	var first string
	for i := range 12 {
		res, e := r.rpc(t, tok, "0.3", "message/send", map[string]any{"message": msg(map[string]any{"kind": "data",
			"data": map[string]any{"skill": "ping", "arguments": map[string]any{"payload": strings.Repeat("p", 8<<10)}}})})
		if e != nil || !strings.Contains(string(res), `"state":"completed"`) {
			t.Fatalf("task %d: %.300s %+v", i, res, e)
		}
		if i == 0 {
			var task struct{ ID string }
			_ = json.Unmarshal(res, &task)
			first = task.ID
		}
	}
	if _, e := r.rpc(t, tok, "0.3", "tasks/get", map[string]any{"id": first}); e == nil || e.Code != -32001 {
		t.Fatalf("the caller's oldest finished task was kept past its share: %+v", e)
	}
	if _, all, _ := r.n.Store().TaskBytes(""); all > 64<<10 {
		t.Fatalf("the tasks hold %d bytes, over the share", all)
	}
	if _, e := r.rpc(t, r.token(), "1.0", "SendMessage", big); e != nil && e.Code == -32004 {
		t.Fatalf("a secret holder's message refused for one owner's share: %+v", e)
	}
}

func jsonText(v any) string { b, _ := json.Marshal(v); return string(b) }
