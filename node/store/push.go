package store

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// The push-notification configs of the tasks (A2A), kept across restarts:
//
//	task-push  task id → a bucket of config id → the config's JSON
//
// A task's configs are deleted with it (deleteTask).
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
		b, err := tx.Bucket(taskPush).CreateBucketIfNotExists([]byte(taskID))
		if err != nil {
			return err
		}
		if b.Get([]byte(id)) == nil && max > 0 && b.Stats().KeyN >= max {
			return fmt.Errorf("task %q has %d push-notification configs, the most a task may (delete one first): %w", taskID, max, ErrTooLarge)
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
// ("" deletes all of the task's) and says whether there was one.
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
		if id == "" {
			found = true
			return all.DeleteBucket([]byte(taskID))
		}
		if b.Get([]byte(id)) == nil {
			return nil
		}
		found = true
		if err := b.Delete([]byte(id)); err != nil {
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

// deletePushConfigs deletes task id's configs with the task.
func deletePushConfigs(tx *bolt.Tx, id []byte) error {
	all := tx.Bucket(taskPush)
	if all.Bucket(id) == nil {
		return nil
	}
	return all.DeleteBucket(id)
}
