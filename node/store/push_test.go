package store

import (
	"encoding/json"
	"errors"
	"strings"
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

// A task's push configs count in its bytes, against its owner's share:
// set before the task's first save or after it, replaced, deleted.
func TestPushConfigBytesCounted(t *testing.T) {
	const total = 16 * 4096 // one owner's share: 4096 bytes
	s, err := Open(t.TempDir(), WithMaxTasksBytes(total))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("x", n) + `"`) }
	mine := func() int64 {
		t.Helper()
		m, all, err := s.TaskBytes("alice")
		if err != nil || m != all {
			t.Fatalf("alice's bytes %d of %d: %v", m, all, err)
		}
		return m
	}
	// A config of a task not saved yet counts from the task's first save.
	if err := s.SavePushConfig("t1", "a", cfg(1000), 8); err != nil {
		t.Fatal(err)
	}
	if m := mine(); m != 0 {
		t.Fatalf("a config of an unsaved task counts %d bytes", m)
	}
	if _, err := s.SaveTask(protocol.StoredTask{ID: "t1", Owner: "alice", State: "working", Task: json.RawMessage(`{}`)}, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	base := mine()
	if base < 1000 {
		t.Fatalf("the task with a config of 1000 bytes counts %d", base)
	}
	// One more past the owner's share is refused with a quota error.
	for _, id := range []string{"b", "c"} {
		if err := s.SavePushConfig("t1", id, cfg(1000), 8); err != nil {
			t.Fatal(err)
		}
	}
	if m := mine(); m < base+2000 {
		t.Fatalf("two more configs of 1000 bytes: %d, was %d", m, base)
	}
	var qe *QuotaError
	if err := s.SavePushConfig("t1", "d", cfg(1500), 8); !errors.As(err, &qe) || qe.Quota != QuotaTasksOwner {
		t.Fatalf("a config past the owner's share: %v", err)
	}
	// Replacing counts the difference; deleting gives the bytes back.
	if err := s.SavePushConfig("t1", "b", cfg(10), 8); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.DeletePushConfig("t1", "c"); !ok || err != nil {
		t.Fatalf("delete c: %v %v", ok, err)
	}
	for _, id := range []string{"a", "b"} { // the rest
		if ok, err := s.DeletePushConfig("t1", id); !ok || err != nil {
			t.Fatalf("delete %s: %v %v", id, ok, err)
		}
	}
	if m := mine(); m >= base-900 {
		t.Fatalf("after every config is deleted the task counts %d, with its first config it counted %d", m, base)
	}
}
