package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/mcpv2/mcpv2/protocol"
)

// The push-notification configs of the tasks (A2A), kept across restarts:
//
//	task-push  task id → a bucket of config id → the config's JSON
//
// A task's configs are deleted with it (deleteTask). Their bytes count
// in the task's (tasks-size), and so against its owner's share of
// WithMaxTasksBytes: from the save of the config when the task is stored
// already, else from the task's first save (the face sets a message's
// webhook before it saves the new task). A store made before the configs
// were counted undercounts the configs it held then, until their tasks go.
var taskPush = []byte("task-push")

// MaxPushConfigBytes caps the JSON of one push-notification config.
const MaxPushConfigBytes = 8 << 10

// SavePushConfig keeps the push-notification config id of task taskID,
// its JSON config (the face's own form), replacing one of the same id. A
// task holds at most max configs (max > 0): one more is refused with
// ErrTooLarge, as is a config over MaxPushConfigBytes. The store does not
// ask whether the task exists yet (the face sets the config of a message's
// new task before its first save); the face checks that the caller owns
// the task. Safe for concurrent use.
func (s *Store) SavePushConfig(taskID, id string, config json.RawMessage, max int) error {
	const op = "save push config"
	if s.closed.Load() {
		return fmt.Errorf("store: %s: %w", op, net.ErrClosed)
	}
	if taskID == "" || id == "" || len(taskID) > MaxKeyLen || len(id) > MaxKeyLen {
		return fmt.Errorf("store: %s: task or config id: %w", op, ErrInvalidKey)
	}
	if len(config) > MaxPushConfigBytes {
		return fmt.Errorf("store: %s: the config is %d bytes, more than %d: %w", op, len(config), MaxPushConfigBytes, ErrTooLarge)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		var was []byte
		if b := tx.Bucket(taskPush).Bucket([]byte(taskID)); b != nil {
			was = b.Get([]byte(id))
			if was == nil && max > 0 && b.Stats().KeyN >= max {
				return fmt.Errorf("task %q has %d push-notification configs, the most a task may (delete one first): %w", taskID, max, ErrTooLarge)
			}
		}
		t, err := storedTask(tx, taskID)
		if err != nil {
			return err
		}
		if t != nil { // stored: count it now
			delta := int64(recordBytes(len(config)))
			if was != nil {
				delta -= int64(recordBytes(len(was)))
			}
			if err := s.fitTaskBytes(tx, t.Owner, t.Trusted, delta); err != nil {
				return err
			}
			if tx.Bucket(taskBucket).Get([]byte(taskID)) == nil { // finished, and dropped to make room
				return fmt.Errorf("%q: %w", taskID, ErrTaskNotFound)
			}
			if err := addTaskBytes(tx, t.Owner, t.ID, delta); err != nil {
				return err
			}
		}
		b, err := tx.Bucket(taskPush).CreateBucketIfNotExists([]byte(taskID))
		if err != nil {
			return err
		}
		return b.Put([]byte(id), config)
	})
	if err != nil {
		return fmt.Errorf("store: %s: %w", op, closedErr(err))
	}
	return nil
}

// PushConfigs returns the push-notification configs of task taskID, by id;
// none when it has none.
func (s *Store) PushConfigs(taskID string) ([]json.RawMessage, error) {
	const op = "push configs"
	if s.closed.Load() {
		return nil, fmt.Errorf("store: %s: %w", op, net.ErrClosed)
	}
	var out []json.RawMessage
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(taskPush).Bucket([]byte(taskID))
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			out = append(out, slices.Clone(v))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, closedErr(err))
	}
	return out, nil
}

// DeletePushConfig deletes the push-notification config id of task taskID
// and says whether there was one (a task's deletion takes all of its
// configs: deletePushConfigs).
func (s *Store) DeletePushConfig(taskID, id string) (bool, error) {
	const op = "delete push config"
	if s.closed.Load() {
		return false, fmt.Errorf("store: %s: %w", op, net.ErrClosed)
	}
	found := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		all := tx.Bucket(taskPush)
		b := all.Bucket([]byte(taskID))
		if b == nil {
			return nil
		}
		v := b.Get([]byte(id))
		if v == nil {
			return nil
		}
		found = true
		if err := errors.Join(uncountPush(tx, taskID, int(recordBytes(len(v)))), b.Delete([]byte(id))); err != nil {
			return err
		}
		if b.Stats().KeyN == 0 {
			return all.DeleteBucket([]byte(taskID))
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: %s: %w", op, closedErr(err))
	}
	return found, nil
}

// uncountPush takes n bytes of deleted configs off task taskID's count,
// if the task is stored (else they were never counted).
func uncountPush(tx *bolt.Tx, taskID string, n int) error {
	t, err := storedTask(tx, taskID)
	if t == nil || err != nil {
		return err
	}
	return addTaskBytes(tx, t.Owner, t.ID, -int64(n))
}

// storedTask is task taskID as stored, for its owner whose share its
// configs count in; nil when it is not stored (yet, or any more).
func storedTask(tx *bolt.Tx, taskID string) (*protocol.StoredTask, error) {
	raw := tx.Bucket(taskBucket).Get([]byte(taskID))
	if raw == nil {
		return nil, nil
	}
	var t protocol.StoredTask
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("task %q: %w", taskID, err)
	}
	return &t, nil
}

// pushBytes is what task id's configs count: the bytes of a new task's
// configs set before its first save.
func pushBytes(tx *bolt.Tx, id []byte) int64 {
	b := tx.Bucket(taskPush).Bucket(id)
	if b == nil {
		return 0
	}
	var n int64
	_ = b.ForEach(func(_, v []byte) error { n += int64(recordBytes(len(v))); return nil })
	return n
}

// deletePushConfigs deletes task id's configs with the task (their bytes
// are in the task's, which its deletion takes off).
func deletePushConfigs(tx *bolt.Tx, id []byte) error {
	all := tx.Bucket(taskPush)
	if all.Bucket(id) == nil {
		return nil
	}
	return all.DeleteBucket(id)
}
