package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

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

// TestTaskBytesCaps: the bytes of the tasks are capped per owner (a
// sixteenth) and in total; a new task first drops its owner's finished
// tasks, oldest first, then (for the total) anyone's; what still does not
// fit is refused with a *QuotaError (-32004); a save that finishes a task
// always lands; drops, expiry and a reopen keep the counts right.
func TestTaskBytesCaps(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	const total = 16 * 4096 // one owner's share: 4096 bytes
	s, err := Open(dir, WithClock(func() time.Time { return now }), WithMaxTasksBytes(total))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	body := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("x", n) + `"`) }
	save := func(id, owner string, final bool, n int) error {
		now = now.Add(time.Second)
		_, err := s.SaveTask(protocol.StoredTask{ID: id, Owner: owner, State: "s", Final: final, Task: body(n)}, json.RawMessage(`{}`))
		return err
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	quota := func(err error, which string) {
		t.Helper()
		var qe *QuotaError
		var pe *protocol.Error
		if !errors.As(err, &qe) || qe.Quota != which || !errors.Is(err, ErrQuota) || !errors.As(err, &pe) || pe.Code != protocol.CodeToolExecution ||
			!strings.Contains(err.Error(), "max-tasks-bytes") {
			t.Fatalf("want a %s quota error naming max-tasks-bytes: %v", which, err)
		}
	}
	exists := func(id string) bool { _, err := s.Task(id); return err == nil }
	// Alice: three finished tasks of about 1 KiB, then a fourth and a
	// fifth: her oldest finished ones go to make room.
	for _, id := range []string{"a1", "a2", "a3"} {
		must(save(id, "alice", true, 1000))
	}
	mine, all, err := s.TaskBytes("alice")
	if err != nil || mine < 3000 || mine > 4096 || all != mine {
		t.Fatalf("alice's bytes %d of %d: %v", mine, all, err)
	}
	must(save("a4", "alice", false, 1000))
	must(save("a5", "alice", false, 1000))
	if exists("a1") || exists("a2") || !exists("a3") || !exists("a4") || !exists("a5") {
		t.Fatal("the oldest finished tasks of alice were not the ones dropped")
	}
	// Her unfinished tasks are not dropped: a message that does not fit
	// beside them is refused, and nothing is dropped for it.
	quota(save("a6", "alice", false, 1500), QuotaTasksOwner)
	if !exists("a3") {
		t.Fatal("a refused save dropped a task")
	}
	quota(save("big", "bob", false, 5000), QuotaTasksOwner) // larger than a share
	// A trusted owner (the node's secret holders) is held to the total
	// alone: past a share, nothing of its own is dropped or refused.
	for i := range 3 {
		_, err := s.SaveTask(protocol.StoredTask{ID: fmt.Sprintf("s%d", i), Owner: "secret", State: "s", Trusted: true, Task: body(2000)}, json.RawMessage(`{}`))
		must(err)
	}
	if mine, _, _ := s.TaskBytes("secret"); mine <= total/OwnerShare || !exists("s0") {
		t.Fatalf("a trusted owner's %d bytes: held to a share", mine)
	}
	for i := range 3 {
		_, err := s.SaveTask(protocol.StoredTask{ID: fmt.Sprintf("s%d", i), Owner: "secret", State: "s", Final: true, Trusted: true, Task: body(10)}, json.RawMessage(`{}`))
		must(err)
	}
	// A save that grows an unfinished task must fit; one that finishes it
	// lands whatever its size.
	quota(save("a4", "alice", false, 3000), QuotaTasksOwner)
	must(save("a4", "alice", true, 3000))
	// The total: 15 owners of about 3 KiB each (finished) and alice; a new
	// owner's task drops the finished task updated longest ago.
	for i := range 15 {
		must(save(fmt.Sprintf("o%d", i), fmt.Sprintf("owner%d", i), true, 3500))
	}
	_, all, _ = s.TaskBytes("")
	if all > total {
		t.Fatalf("the tasks hold %d bytes, over the cap of %d", all, total)
	}
	must(save("n1", "newcomer", false, 3800))
	_, all, _ = s.TaskBytes("")
	if all > total || exists("a3") || !exists("n1") {
		t.Fatalf("after a newcomer: %d bytes (cap %d); alice's oldest finished task a3 stayed: %v", all, total, exists("a3"))
	}
	// Counts survive a reopen, and a store that never counted (its size
	// buckets gone) counts once when opened.
	mineBefore, allBefore, _ := s.TaskBytes("alice")
	must(s.db.Update(func(tx *bolt.Tx) error {
		return errors.Join(tx.DeleteBucket(taskSize), tx.DeleteBucket(taskOwnerSize))
	}))
	s.Close()
	if s, err = Open(dir, WithClock(func() time.Time { return now }), WithMaxTasksBytes(total)); err != nil {
		t.Fatal(err)
	}
	if m, a, _ := s.TaskBytes("alice"); m != mineBefore || a != allBefore {
		t.Fatalf("counted again: alice %d (was %d), all %d (was %d)", m, mineBefore, a, allBefore)
	}
	// Expiry gives the bytes back.
	now = now.Add(DefaultTaskTTL + time.Hour)
	if _, err := s.ExpireTasks(now); err != nil {
		t.Fatal(err)
	}
	left, _ := s.ListTasks("", protocol.TaskQuery{})
	var want int64
	for _, lt := range left {
		want += int64(len(lt.Task))
	}
	if _, a, _ := s.TaskBytes(""); a < want || a > want+int64(len(left))*1024 {
		t.Fatalf("after expiry %d bytes for %d tasks of %d bytes of JSON", a, len(left), want)
	}
}
