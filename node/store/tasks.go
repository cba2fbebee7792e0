package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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
//	tasks-size       id → the task's bytes (8-byte big-endian): its JSON and
//	                 its events', each with recordOverhead; the bucket's
//	                 sequence is the sum over every task
//	tasks-owner-size "o" + owner → the bytes of the owner's tasks
var (
	taskBucket     = []byte("tasks")
	taskEvents     = []byte("task-events")
	taskByOwner    = []byte("tasks-by-owner")
	taskByUpdate   = []byte("tasks-by-update")
	taskUnfinished = []byte("tasks-unfinished")
	taskSize       = []byte("tasks-size")
	taskOwnerSize  = []byte("tasks-owner-size")
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
	// DefaultMaxTasksBytes caps the bytes of every task together
	// (WithMaxTasksBytes): 256 MiB. One owner's tasks may hold
	// 1/OwnerShare of the cap (16 MiB by default).
	DefaultMaxTasksBytes = 256 << 20
	// OwnerShare divides the cap on the bytes of the tasks into one
	// owner's share: an owner's tasks may hold at most
	// max-tasks-bytes/OwnerShare.
	OwnerShare = 16
	// recordOverhead is what each task and event counts beyond its JSON:
	// its keys and index entries.
	recordOverhead = 64
)

// The quotas of the tasks' bytes, as a *QuotaError names them.
const (
	// QuotaTasks is the cap on the bytes of every task together.
	QuotaTasks = "max-tasks-bytes"
	// QuotaTasksOwner is one owner's share of it.
	QuotaTasksOwner = "max-tasks-bytes/16, one owner's share"
)

// WithMaxTasksBytes caps the bytes the tasks hold in state.db, each task
// counted with its events (default DefaultMaxTasksBytes; 0: no cap), and
// one owner's tasks at a sixteenth of it (OwnerShare). A save that does
// not fit first drops the owner's own finished tasks, oldest first; then,
// for the total, anyone's finished tasks, the one updated longest ago
// first; then it is refused with a *QuotaError. A save that finishes a task
// is never refused for its bytes. It must not be negative.
func WithMaxTasksBytes(n int64) Option {
	return func(c *config) error {
		return notNegative("WithMaxTasksBytes", n, func(v int64) { c.maxTasksBytes = v })
	}
}

// ErrTaskNotFound is wrapped when no task has the ID asked for; it is
// protocol's, so that a face can test for it.
var ErrTaskNotFound = protocol.ErrTaskNotFound

// ErrTaskFinal is wrapped when a task in a terminal state is saved again.
var ErrTaskFinal = protocol.ErrTaskFinal

func (s *Store) initTasks(tx *bolt.Tx) error {
	sized := tx.Bucket(taskSize) != nil
	for _, b := range [][]byte{taskBucket, taskEvents, taskByOwner, taskByUpdate, taskUnfinished, taskSize, taskOwnerSize, taskPush} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	if sized {
		return nil
	}
	return countTaskBytes(tx)
}

// countTaskBytes fills tasks-size and tasks-owner-size from the tasks a
// store made before it counted them: once, when such a store is opened.
func countTaskBytes(tx *bolt.Tx) error {
	events, sizes := tx.Bucket(taskEvents), tx.Bucket(taskSize)
	var total uint64
	owners := map[string]uint64{}
	err := tx.Bucket(taskBucket).ForEach(func(id, v []byte) error {
		var t protocol.StoredTask
		if json.Unmarshal(v, &t) != nil {
			return nil
		}
		n := recordBytes(len(v))
		if eb := events.Bucket(id); eb != nil {
			_ = eb.ForEach(func(_, ev []byte) error {
				n += recordBytes(len(ev))
				return nil
			})
		}
		total += n
		owners[t.Owner] += n
		return sizes.Put(id, binary.BigEndian.AppendUint64(nil, n))
	})
	if err != nil {
		return err
	}
	for owner, n := range owners {
		if err := tx.Bucket(taskOwnerSize).Put(ownerSizeKey(owner), binary.BigEndian.AppendUint64(nil, n)); err != nil {
			return err
		}
	}
	return sizes.SetSequence(total)
}

// recordBytes is what a stored task or event of n bytes of JSON counts.
func recordBytes(n int) uint64 { return uint64(n) + recordOverhead }

func ownerSizeKey(owner string) []byte { return append([]byte{'o'}, owner...) }

func getUint(b *bolt.Bucket, k []byte) uint64 {
	if v := b.Get(k); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// addTaskBytes adds delta bytes to task id of owner, to the owner's and to
// the total.
func addTaskBytes(tx *bolt.Tx, owner, id string, delta int64) error {
	sizes, owners := tx.Bucket(taskSize), tx.Bucket(taskOwnerSize)
	add := func(v uint64) uint64 { return uint64(max(int64(v)+delta, 0)) }
	put := func(b *bolt.Bucket, k []byte, v uint64) error {
		if v == 0 {
			return b.Delete(k)
		}
		return b.Put(k, binary.BigEndian.AppendUint64(nil, v))
	}
	return errors.Join(put(sizes, []byte(id), add(getUint(sizes, []byte(id)))),
		put(owners, ownerSizeKey(owner), add(getUint(owners, ownerSizeKey(owner)))),
		sizes.SetSequence(add(sizes.Sequence())))
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
// every task is unfinished. A save that takes the tasks' bytes over their
// cap or the owner's share (WithMaxTasksBytes) makes room or is refused
// with a *QuotaError (protocol code -32004). Safe for concurrent use.
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
		var was int64 // the bytes of the task's JSON this save replaces
		old := tasks.Get([]byte(t.ID))
		if old != nil {
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
			was = int64(recordBytes(len(old)))
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
		delta := int64(recordBytes(len(b))+recordBytes(len(event))) - was
		if old == nil { // a new task: the push configs set before it count from now (push.go)
			delta += pushBytes(tx, []byte(t.ID))
		}
		if old == nil || !t.Final { // a save that ends a task always lands
			if err := s.fitTaskBytes(tx, t.Owner, t.Trusted, delta); err != nil {
				return err
			}
		}
		if err := addTaskBytes(tx, t.Owner, t.ID, delta); err != nil {
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

// fitTaskBytes makes room for need more bytes of owner's tasks within the
// caps (WithMaxTasksBytes): it drops owner's own finished tasks, oldest
// first, until the owner's share (not for a trusted owner: a secret
// holder) and the total fit; then, for the total, anyone's finished tasks,
// the one updated longest ago first. What still does not fit is a
// *QuotaError; the caller's transaction then rolls back, the drops with it.
func (s *Store) fitTaskBytes(tx *bolt.Tx, owner string, trusted bool, need int64) error {
	if s.maxTasksBytes <= 0 || need <= 0 {
		return nil
	}
	share := s.maxTasksBytes / OwnerShare
	mine := func() int64 { return int64(getUint(tx.Bucket(taskOwnerSize), ownerSizeKey(owner))) }
	total := func() int64 { return int64(tx.Bucket(taskSize).Sequence()) }
	overShare := func() bool { return !trusted && mine()+need > share }
	over := func() bool { return overShare() || total()+need > s.maxTasksBytes }
	if over() {
		if err := s.dropOwnerTasks(tx, owner, over); err != nil {
			return err
		}
	}
	if overShare() {
		return &QuotaError{Quota: QuotaTasksOwner, Limit: share, Used: mine(), Need: need}
	}
	if total()+need > s.maxTasksBytes {
		if _, err := s.dropTasks(tx, math.MaxInt, func(protocol.StoredTask) bool { return total()+need > s.maxTasksBytes }); err != nil {
			return err
		}
		if total()+need > s.maxTasksBytes {
			return &QuotaError{Quota: QuotaTasks, Limit: s.maxTasksBytes, Used: total(), Need: need}
		}
	}
	return nil
}

// dropOwnerTasks deletes owner's finished tasks, the one updated longest
// ago first, while more() holds.
func (s *Store) dropOwnerTasks(tx *bolt.Tx, owner string, more func() bool) error {
	tasks := tx.Bucket(taskBucket)
	prefix := append([]byte(owner), 0)
	c := tx.Bucket(taskByOwner).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && more(); {
		idx := slices.Clone(k)
		var t protocol.StoredTask
		if len(idx) < len(prefix)+8 || json.Unmarshal(tasks.Get(idx[len(prefix)+8:]), &t) != nil || !t.Final || t.Owner != owner {
			k, _ = c.Next()
			continue
		}
		if err := deleteTask(tx, t); err != nil {
			return err
		}
		k, _ = c.Seek(idx)
	}
	return nil
}

// dropTasks walks the tasks from the one updated longest ago and deletes
// the finished ones drop accepts, at most limit; the walk ends at the
// first finished task drop refuses (drop is monotone in the update time).
func (s *Store) dropTasks(tx *bolt.Tx, limit int, drop func(protocol.StoredTask) bool) (int, error) {
	tasks, byUpdate := tx.Bucket(taskBucket), tx.Bucket(taskByUpdate)
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
		if err := deleteTask(tx, t); err != nil {
			return dropped, err
		}
		dropped++
		k, _ = c.Seek(idx)
	}
	return dropped, nil
}

// deleteTask deletes task t, its events, its index entries, and its bytes
// from the counts.
func deleteTask(tx *bolt.Tx, t protocol.StoredTask) error {
	tasks, events := tx.Bucket(taskBucket), tx.Bucket(taskEvents)
	id := []byte(t.ID)
	n := getUint(tx.Bucket(taskSize), id)
	err := errors.Join(tasks.Delete(id), tx.Bucket(taskByUpdate).Delete(updateKey(t.Updated, t.ID)),
		tx.Bucket(taskByOwner).Delete(ownerKey(t.Owner, t.Updated, t.ID)), tx.Bucket(taskUnfinished).Delete(id))
	if err == nil && events.Bucket(id) != nil {
		err = events.DeleteBucket(id)
	}
	if err == nil {
		err = deletePushConfigs(tx, id)
	}
	if err == nil {
		err = addTaskBytes(tx, t.Owner, t.ID, -int64(n))
	}
	if err == nil {
		err = tasks.SetSequence(tasks.Sequence() - 1)
	}
	return err
}

// TaskQuota returns the cap WithMaxTasksBytes set on every task's bytes
// (0: none).
func (s *Store) TaskQuota() int64 { return s.maxTasksBytes }

// TaskBytes returns the bytes owner's tasks hold and those of every task,
// as the caps of WithMaxTasksBytes count them.
func (s *Store) TaskBytes(owner string) (mine, total int64, err error) {
	const op = "task bytes"
	if s.closed.Load() {
		return 0, 0, fmt.Errorf("store: %s: %w", op, net.ErrClosed)
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		mine = int64(getUint(tx.Bucket(taskOwnerSize), ownerSizeKey(owner)))
		total = int64(tx.Bucket(taskSize).Sequence())
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("store: %s: %w", op, closedErr(err))
	}
	return mine, total, nil
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
