package store

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

func TestPushConfigs(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s, err := Open(t.TempDir(), WithClock(func() time.Time { return now }), WithTaskTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SaveTask(protocol.StoredTask{ID: "t1", Owner: "o", State: "completed", Final: true, Task: json.RawMessage(`{}`)}, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"b", "a", "c"} {
		if err := s.SavePushConfig("t1", id, json.RawMessage(`{"id":"`+id+`"}`), 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SavePushConfig("t1", "d", json.RawMessage(`{}`), 3); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a fourth config past the cap of 3: %v", err)
	}
	if err := s.SavePushConfig("t1", "a", json.RawMessage(`{"id":"a","v":2}`), 3); err != nil {
		t.Fatalf("replacing one is no new one: %v", err)
	}
	if err := s.SavePushConfig("t1", "e", make(json.RawMessage, MaxPushConfigBytes+1), 0); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("an oversized config: %v", err)
	}
	got, err := s.PushConfigs("t1")
	if err != nil || len(got) != 3 || string(got[0]) != `{"id":"a","v":2}` {
		t.Fatalf("configs: %s %v", got, err)
	}
	if ok, err := s.DeletePushConfig("t1", "b"); !ok || err != nil {
		t.Fatalf("delete b: %v %v", ok, err)
	}
	if ok, _ := s.DeletePushConfig("t1", "b"); ok {
		t.Fatal("b deleted twice")
	}
	// The task expires: its configs go with it.
	now = now.Add(2 * time.Hour)
	if n, err := s.ExpireTasks(now); n != 1 || err != nil {
		t.Fatalf("expire: %d %v", n, err)
	}
	if got, err := s.PushConfigs("t1"); len(got) != 0 || err != nil {
		t.Fatalf("configs of an expired task: %s %v", got, err)
	}
}
