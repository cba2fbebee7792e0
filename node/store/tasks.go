package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mcpv2/mcpv2/protocol"
)

// Tasks of the faces (A2A), kept across restarts:
//
//	tasks            id → StoredTask JSON; the bucket's sequence counts them
//	task-events      id → a bucket of seq (8-byte big-endian) → event JSON
//	tasks-by-owner   owner, 0, updated (8-byte big-endian UnixNano), id → nil
//	tasks-by-update  updated (8 bytes), id → nil: expiry and the cap walk it
//	tasks-unfinished id → nil, the tasks not in a terminal state: what a
//	                 face's start looks at, without reading every task
var (
	taskBucket     = []byte("tasks")
	taskEvents     = []byte("task-events")
	taskByOwner    = []byte("tasks-by-owner")
	taskByUpdate   = []byte("tasks-by-update")
	taskUnfinished = []byte("tasks-unfinished")
)

// Limits of the task store.
const (
	// DefaultTaskTTL is how long a finished task is kept after its last
	// update: 7 days.
	DefaultTaskTTL = 7 * 24 * time.Hour
	// DefaultMaxTasks caps the tasks kept; past it, saving a new task drops
	// the finished task updated longest ago.
	DefaultMaxTasks = 100_000
	// MaxTaskEvents caps one task's events.
	MaxTaskEvents = 10_000
	// MaxTaskBytes caps one task's JSON, and one event's.
	MaxTaskBytes = 16 << 20
)

// ErrTaskNotFound is wrapped when no task has the ID asked for; it is
// protocol's, so that a face can test for it.
var ErrTaskNotFound = protocol.ErrTaskNotFound

// ErrTaskFinal is wrapped when a task in a terminal state is saved again.
var ErrTaskFinal = protocol.ErrTaskFinal

func (s *Store) initTasks(tx *bolt.Tx) error {
	for _, b := range [][]byte{taskBucket, taskEvents, taskByOwner, taskByUpdate, taskUnfinished} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	return nil
}

func ownerKey(owner string, updated time.Time, id string) []byte {
	k := append([]byte(owner), 0)
	k = binary.BigEndian.AppendUint64(k, uint64(max(updated.UnixNano(), 0)))
	return append(k, id...)
}

func updateKey(updated time.Time, id string) []byte {
	return append(binary.BigEndian.AppendUint64(nil, uint64(max(updated.UnixNano(), 0))), id...)
}

// SaveTask writes t (the whole task) and appends event to its events, in one
// transaction, and returns the event's sequence number (t.Seq is set to
// it). t.Updated is set to now; a new task gets Created too. A task saved in
// a terminal state (Final) cannot be saved again (ErrTaskFinal); a task
// with MaxTaskEvents events takes no more (ErrTooLarge), nor does a task or
// event over MaxTaskBytes. A new task beyond the cap (WithMaxTasks) drops
// the finished task updated longest ago, or fails with ErrTooLarge when
// every task is unfinished. Safe for concurrent use.
func (s *Store) SaveTask(t protocol.StoredTask, event json.RawMessage) (uint64, error) {
	const op = "save task"
	if s.closed.Load() {
		return 0, fmt.Errorf("store: %s: %w", op, net.ErrClosed)
	}
	if t.ID == "" || len(t.ID) > MaxKeyLen || len(t.Owner) > MaxKeyLen || bytes.IndexByte([]byte(t.Owner), 0) >= 0 {
		return 0, fmt.Errorf("store: %s: %w", op, ErrInvalidKey)
	}
	if len(t.Task) > MaxTaskBytes || len(event) > MaxTaskBytes {
		return 0, fmt.Errorf("store: %s %q: a task or event is larger than %d bytes: %w", op, t.ID, MaxTaskBytes, ErrTooLarge)
	}
	var seq uint64
	err := s.db.Update(func(tx *bolt.Tx) error {
		tasks, events := tx.Bucket(taskBucket), tx.Bucket(taskEvents)
		byOwner, byUpdate := tx.Bucket(taskByOwner), tx.Bucket(taskByUpdate)
		now := s.now()
		t.Updated = now
		if old := tasks.Get([]byte(t.ID)); old != nil {
			var prev protocol.StoredTask
			if err := json.Unmarshal(old, &prev); err != nil {
				return err
			}
			if prev.Final {
				return fmt.Errorf("%q: %w", t.ID, ErrTaskFinal)
			}
			if prev.Owner != t.Owner {
				return fmt.Errorf("%q: a task keeps its owner: %w", t.ID, ErrInvalidKey)
			}
			t.Created = prev.Created
			if err := errors.Join(byOwner.Delete(ownerKey(prev.Owner, prev.Updated, prev.ID)),
				byUpdate.Delete(updateKey(prev.Updated, prev.ID))); err != nil {
				return err
			}
		} else {
			t.Created = now
			if err := s.makeRoom(tx); err != nil {
				return err
			}
			if err := tasks.SetSequence(tasks.Sequence() + 1); err != nil {
				return err
			}
		}
		eb, err := events.CreateBucketIfNotExists([]byte(t.ID))
		if err != nil {
			return err
		}
		if eb.Sequence() >= MaxTaskEvents {
			return fmt.Errorf("%q has %d events, the most a task may: %w", t.ID, MaxTaskEvents, ErrTooLarge)
		}
		if seq, err = eb.NextSequence(); err != nil {
			return err
		}
		t.Seq = seq
		b, err := json.Marshal(t)
		if err != nil {
			return err
		}
		unfinished := tx.Bucket(taskUnfinished)
		if t.Final {
			err = unfinished.Delete([]byte(t.ID))
		} else {
			err = unfinished.Put([]byte(t.ID), nil)
		}
		if err != nil {
			return err
		}
		return errors.Join(eb.Put(seqKey(seq), event), tasks.Put([]byte(t.ID), b),
			byOwner.Put(ownerKey(t.Owner, t.Updated, t.ID), nil), byUpdate.Put(updateKey(t.Updated, t.ID), nil))
	})
	if err != nil {
		return 0, fmt.Errorf("store: %s: %w", op, closedErr(err))
	}
	return seq, nil
}

// makeRoom drops the finished task updated longest ago when the store holds
// its cap of tasks.
func (s *Store) makeRoom(tx *bolt.Tx) error {
	if s.maxTasks <= 0 || tx.Bucket(taskBucket).Sequence() < uint64(s.maxTasks) {
		return nil
	}
	n, err := s.dropTasks(tx, 1, func(protocol.StoredTask) bool { return true })
	if err == nil && n == 0 {
		err = fmt.Errorf("the node keeps at most %d tasks, and none of them is finished: %w", s.maxTasks, ErrTooLarge)
	}
	return err
}

// dropTasks walks the tasks from the one updated longest ago and deletes
// the finished ones drop accepts, at most limit; the walk ends at the
// first finished task drop refuses (drop is monotone in the update time).
func (s *Store) dropTasks(tx *bolt.Tx, limit int, drop func(protocol.StoredTask) bool) (int, error) {
	tasks, events := tx.Bucket(taskBucket), tx.Bucket(taskEvents)
	byOwner, byUpdate := tx.Bucket(taskByOwner), tx.Bucket(taskByUpdate)
	dropped := 0
	c := byUpdate.Cursor()
	for k, _ := c.First(); k != nil && dropped < limit; {
		idx := slices.Clone(k)
		id := idx[8:]
		var t protocol.StoredTask
		if v := tasks.Get(id); v == nil || json.Unmarshal(v, &t) != nil {
			if err := byUpdate.Delete(idx); err != nil { // a stray index entry
				return dropped, err
			}
			k, _ = c.Seek(idx)
			continue
		}
		if !t.Final {
			k, _ = c.Next()
			continue
		}
		if !drop(t) {
			break
		}
		err := errors.Join(tasks.Delete(id), byUpdate.Delete(idx), byOwner.Delete(ownerKey(t.Owner, t.Updated, t.ID)))
		if err == nil && events.Bucket(id) != nil {
			err = events.DeleteBucket(id)
		}
		if err == nil {
			err = tasks.SetSequence(tasks.Sequence() - 1)
		}
		if err != nil {
			return dropped, err
		}
		dropped++
		k, _ = c.Seek(idx)
	}
	return dropped, nil
}

// Task returns the task id, or an error wrapping ErrTaskNotFound.
func (s *Store) Task(id string) (protocol.StoredTask, error) {
	const op = "task"
	var t protocol.StoredTask
	if s.closed.Load() {
		return t, fmt.Errorf("store: %s: %w", op, net.ErrClosed)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(taskBucket).Get([]byte(id))
		if v == nil {
			return fmt.Errorf("%q: %w", protocol.Clip(id, 80), ErrTaskNotFound)
		}
		return json.Unmarshal(v, &t)
	})
	if err != nil {
		return t, fmt.Errorf("store: %s: %w", op, closedErr(err))
	}
	return t, nil
}

// TaskEvents returns the events of task id after the sequence number after,
// oldest first, at most max (0: all). A task without events, or none, gives
// none.
func (s *Store) TaskEvents(id string, after uint64, max int) ([]protocol.TaskEvent, error) {
	const op = "task events"
	if s.closed.Load() {
		return nil, fmt.Errorf("store: %s: %w", op, net.ErrClosed)
	}
	var out []protocol.TaskEvent
	err := s.db.View(func(tx *bolt.Tx) error {
		eb := tx.Bucket(taskEvents).Bucket([]byte(id))
		if eb == nil {
			return nil
		}
		c := eb.Cursor()
		for k, v := c.Seek(seqKey(after + 1)); k != nil && (max <= 0 || len(out) < max); k, v = c.Next() {
			out = append(out, protocol.TaskEvent{Seq: binary.BigEndian.Uint64(k), Event: slices.Clone(v)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, closedErr(err))
	}
	return out, nil
}

// ListTasks returns owner's tasks that q selects, the most recently updated
// first. An empty owner lists every owner's (for the node itself, never a
// caller), in no particular order; with q.Unfinished it reads only the
// unfinished ones. Safe for concurrent use.
func (s *Store) ListTasks(owner string, q protocol.TaskQuery) ([]protocol.StoredTask, error) {
	const op = "list tasks"
	if s.closed.Load() {
		return nil, fmt.Errorf("store: %s: %w", op, net.ErrClosed)
	}
	match := func(t protocol.StoredTask) bool {
		return (q.ContextID == "" || t.ContextID == q.ContextID) && (q.State == "" || t.State == q.State) &&
			(!q.Unfinished || !t.Final) && (q.UpdatedAfter.IsZero() || t.Updated.After(q.UpdatedAfter))
	}
	var out []protocol.StoredTask
	full := func() bool { return q.Limit > 0 && len(out) >= q.Limit }
	err := s.db.View(func(tx *bolt.Tx) error {
		tasks := tx.Bucket(taskBucket)
		if owner == "" && q.Unfinished {
			return tx.Bucket(taskUnfinished).ForEach(func(id, _ []byte) error {
				var t protocol.StoredTask
				if v := tasks.Get(id); v != nil && json.Unmarshal(v, &t) == nil && match(t) && !full() {
					out = append(out, t)
				}
				return nil
			})
		}
		if owner == "" {
			return tasks.ForEach(func(_, v []byte) error {
				var t protocol.StoredTask
				if json.Unmarshal(v, &t) == nil && match(t) && !full() {
					out = append(out, t)
				}
				return nil
			})
		}
		prefix := append([]byte(owner), 0)
		c := tx.Bucket(taskByOwner).Cursor()
		k, _ := c.Seek(append(slices.Clone(prefix), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))
		if k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
		skipping := q.Before != ""
		for ; k != nil && bytes.HasPrefix(k, prefix) && !full(); k, _ = c.Prev() {
			if len(k) < len(prefix)+8 {
				continue
			}
			id := k[len(prefix)+8:]
			if skipping {
				skipping = string(id) != q.Before
				continue
			}
			var t protocol.StoredTask
			if v := tasks.Get(id); v != nil && json.Unmarshal(v, &t) == nil && match(t) {
				out = append(out, t)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, closedErr(err))
	}
	return out, nil
}

// ExpireTasks drops the finished tasks last updated before now minus the
// task TTL (WithTaskTTL) and returns how many. Sweep calls it.
func (s *Store) ExpireTasks(now time.Time) (int, error) {
	const op = "expire tasks"
	if s.closed.Load() {
		return 0, fmt.Errorf("store: %s: %w", op, net.ErrClosed)
	}
	if s.taskTTL <= 0 {
		return 0, nil
	}
	cutoff := now.Add(-s.taskTTL)
	const batch = 1000
	total := 0
	for {
		var n int
		err := s.db.Update(func(tx *bolt.Tx) error {
			var err error
			n, err = s.dropTasks(tx, batch, func(t protocol.StoredTask) bool { return t.Updated.Before(cutoff) })
			return err
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("store: %s: %w", op, closedErr(err))
		}
		if n < batch {
			return total, nil
		}
	}
}
