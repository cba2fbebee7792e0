package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

func TestTasks(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s, err := Open(t.TempDir(), WithClock(clock), WithTaskTTL(time.Hour), WithMaxTasks(3))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	save := func(id, owner, state string, final bool) uint64 {
		t.Helper()
		seq, err := s.SaveTask(protocol.StoredTask{ID: id, Owner: owner, ContextID: "c-" + owner, State: state, Final: final,
			Task: json.RawMessage(fmt.Sprintf(`{"id":%q,"state":%q}`, id, state))}, json.RawMessage(fmt.Sprintf(`{"state":%q}`, state)))
		if err != nil {
			t.Fatalf("save %s %s: %v", id, state, err)
		}
		return seq
	}
	if seq := save("a", "alice", "submitted", false); seq != 1 {
		t.Fatalf("first event seq %d", seq)
	}
	now = now.Add(time.Minute)
	if seq := save("a", "alice", "working", false); seq != 2 {
		t.Fatalf("second event seq %d", seq)
	}
	now = now.Add(time.Minute)
	save("a", "alice", "completed", true)
	if _, err := s.SaveTask(protocol.StoredTask{ID: "a", Owner: "alice", State: "working", Task: json.RawMessage(`{}`)}, nil); !errors.Is(err, ErrTaskFinal) {
		t.Fatalf("a finished task saved again: %v", err)
	}
	if _, err := s.SaveTask(protocol.StoredTask{ID: "b", Owner: "bob", State: "submitted", Task: json.RawMessage(`{}`)}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveTask(protocol.StoredTask{ID: "b", Owner: "mallory", State: "working", Task: json.RawMessage(`{}`)}, nil); err == nil {
		t.Fatal("another owner took over a task")
	}
	got, err := s.Task("a")
	if err != nil || got.State != "completed" || !got.Final || got.Seq != 3 || !got.Created.Equal(now.Add(-2*time.Minute)) || !got.Updated.Equal(now) {
		t.Fatalf("task a: %+v %v", got, err)
	}
	if _, err := s.Task("nope"); !errors.Is(err, ErrTaskNotFound) {
		t.Fatalf("missing task: %v", err)
	}
	evs, err := s.TaskEvents("a", 1, 0)
	if err != nil || len(evs) != 2 || evs[0].Seq != 2 || string(evs[1].Event) != `{"state":"completed"}` {
		t.Fatalf("events after 1: %+v %v", evs, err)
	}
	// Listing: an owner's own, newest first; a page continues after a task.
	now = now.Add(time.Minute)
	save("c", "alice", "working", false)
	list, err := s.ListTasks("alice", protocol.TaskQuery{})
	if err != nil || len(list) != 2 || list[0].ID != "c" || list[1].ID != "a" {
		t.Fatalf("alice's tasks: %+v %v", list, err)
	}
	if page, _ := s.ListTasks("alice", protocol.TaskQuery{Before: "c"}); len(page) != 1 || page[0].ID != "a" {
		t.Fatalf("the next page: %+v", page)
	}
	if l, _ := s.ListTasks("alice", protocol.TaskQuery{Unfinished: true}); len(l) != 1 || l[0].ID != "c" {
		t.Fatalf("unfinished: %+v", l)
	}
	if l, _ := s.ListTasks("", protocol.TaskQuery{Unfinished: true}); len(l) != 2 || l[0].Final || l[1].Final {
		t.Fatalf("every owner's unfinished tasks (b, c): %+v", l)
	}
	if l, _ := s.ListTasks("al", protocol.TaskQuery{}); len(l) != 0 {
		t.Fatalf("a prefix of an owner sees its tasks: %+v", l)
	}
	// The cap (3): a fourth task drops the finished one updated longest
	// ago; a restart keeps the rest.
	save("d", "bob", "submitted", false)
	if _, err := s.Task("a"); !errors.Is(err, ErrTaskNotFound) {
		t.Fatalf("the cap kept the oldest finished task: %v", err)
	}
	if evs, _ := s.TaskEvents("a", 0, 0); len(evs) != 0 {
		t.Fatal("its events stayed")
	}
	if _, err := s.SaveTask(protocol.StoredTask{ID: "e", Owner: "bob", State: "submitted", Task: json.RawMessage(`{}`)}, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("past the cap with every task unfinished: %v", err)
	}
	// Expiry: finished tasks an hour after their last update.
	save("c", "alice", "failed", true)
	now = now.Add(59 * time.Minute)
	if n, err := s.ExpireTasks(now); err != nil || n != 0 {
		t.Fatalf("expired too early: %d %v", n, err)
	}
	now = now.Add(2 * time.Minute)
	if n, err := s.ExpireTasks(now); err != nil || n != 1 {
		t.Fatalf("expire: %d %v", n, err)
	}
	if l, _ := s.ListTasks("", protocol.TaskQuery{}); len(l) != 2 {
		t.Fatalf("left: %+v", l)
	}
}
