package a2a_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNoCredential: a client with only the URL is an anonymous caller. Its
// task is found by id from its own address, it lists nothing (it owns
// nothing it could list), and no credential's caller finds its task.
func TestNoCredential(t *testing.T) {
	r := newRig(t, "")
	res, e := r.rpc(t, "", "1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "ping"}})})
	if e != nil {
		t.Fatalf("send without a credential: %+v", e)
	}
	var sent struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	if err := json.Unmarshal(res, &sent); err != nil || sent.Task.ID == "" {
		t.Fatalf("send: %s: %v", res, err)
	}
	id := sent.Task.ID
	r.waitCompletedAs(t, "", id)
	if res, e = r.rpc(t, "", "1.0", "GetTask", map[string]any{"id": id}); e != nil || !strings.Contains(string(res), id) {
		t.Fatalf("get without a credential: %s %+v", res, e)
	}
	if res, e = r.rpc(t, "", "1.0", "ListTasks", map[string]any{}); e != nil || strings.Contains(string(res), id) {
		t.Fatalf("list without a credential: %s %+v", res, e)
	}
	for name, tok := range map[string]string{"an anonymous session": r.anon(t), "a secret holder": r.token()} {
		if _, e = r.rpc(t, tok, "1.0", "GetTask", map[string]any{"id": id}); e == nil || !strings.Contains(e.Message, "not found") {
			t.Errorf("%s got the task of a caller without a credential: %+v", name, e)
		}
	}
}
