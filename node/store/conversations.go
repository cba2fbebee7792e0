package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// MaxKeyLen is the longest conversation key accepted, in bytes.
const MaxKeyLen = 4096

// convBucket holds one nested bucket per conversation key; inside, each turn
// is a JSON value under its 8-byte big-endian sequence number. Turns are only
// appended (NextSequence) and only dropped from the front, so the sequence
// numbers in a bucket are contiguous and the count is last-first+1.
var convBucket = []byte("conversations")

// Turn is one message of a conversation.
type Turn struct {
	// Role is who spoke, such as "user" or "assistant".
	Role string `json:"role"`
	// Content is the message text; at most the configured turn size.
	Content string `json:"content"`
	// Time is when the turn happened; AppendTurns fills a zero Time with now.
	Time time.Time `json:"time"`
}

// AppendTurns appends turns to the conversation key, creating it if needed,
// in one transaction, then drops the oldest turns beyond the configured cap.
// It returns the number of turns now stored. If any turn's content is over
// the size limit nothing is stored and the error wraps ErrTooLarge; an empty
// or overlong key gives ErrInvalidKey. The key is opaque to the store: the
// caller builds it from caller identity and conversation_id.
func (s *Store) AppendTurns(key string, turns ...Turn) (n int, err error) {
	const op = "append turns"
	if err := checkKey(op, key); err != nil {
		return 0, err
	}
	vals := make([][]byte, len(turns))
	for i, t := range turns {
		if len(t.Content) > s.maxTurnBytes {
			return 0, fmt.Errorf("store: %s: turn %d content is %d bytes, over the %d-byte limit: %w",
				op, i, len(t.Content), s.maxTurnBytes, ErrTooLarge)
		}
		if t.Time.IsZero() {
			t.Time = time.Now().UTC()
		}
		if vals[i], err = json.Marshal(t); err != nil {
			return 0, fmt.Errorf("store: %s: turn %d: %w", op, i, err)
		}
	}
	if s.closed.Load() {
		return 0, fmt.Errorf("store: %s: %w", op, net.ErrClosed)
	}
	update := s.db.Update
	if len(turns) == 0 {
		update = s.db.View
	}
	err = update(func(tx *bolt.Tx) error {
		b := tx.Bucket(convBucket).Bucket([]byte(key))
		if b == nil {
			if len(turns) == 0 {
				return nil
			}
			var err error
			if b, err = tx.Bucket(convBucket).CreateBucket([]byte(key)); err != nil {
				return err
			}
		}
		for _, v := range vals {
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			if err := b.Put(seqKey(seq), v); err != nil {
				return err
			}
		}
		first, last := bounds(b)
		count := last - first + 1
		if first == 0 {
			count = 0
		}
		for ; tx.Writable() && count > uint64(s.maxTurns); count-- {
			if err := b.Delete(seqKey(first)); err != nil {
				return err
			}
			first++
		}
		n = int(count)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: %s: %w", op, closedErr(err))
	}
	return n, nil
}

// History returns the last max turns of the conversation key, oldest first;
// max <= 0 returns all of them. An unknown key has no turns and no error.
func (s *Store) History(key string, max int) ([]Turn, error) {
	const op = "history"
	if err := checkKey(op, key); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("store: %s: %w", op, net.ErrClosed)
	}
	var out []Turn
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(convBucket).Bucket([]byte(key))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Last(); k != nil && (max <= 0 || len(out) < max); k, v = c.Prev() {
			var t Turn
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("turn %d: %w", binary.BigEndian.Uint64(k), err)
			}
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, closedErr(err))
	}
	slices.Reverse(out)
	return out, nil
}

// checkKey refuses an empty or overlong conversation key.
func checkKey(op, key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return fmt.Errorf("store: %s: key of %d bytes (want 1 to %d): %w", op, len(key), MaxKeyLen, ErrInvalidKey)
	}
	return nil
}

// bounds returns the first and last sequence numbers in b, or 0, 0.
func bounds(b *bolt.Bucket) (first, last uint64) {
	c := b.Cursor()
	if k, _ := c.First(); k != nil {
		first = binary.BigEndian.Uint64(k)
	}
	if k, _ := c.Last(); k != nil {
		last = binary.BigEndian.Uint64(k)
	}
	return first, last
}

// seqKey encodes a sequence number so keys sort in append order.
func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// closedErr maps bbolt's "database not open" (a Close racing a call) to
// net.ErrClosed.
func closedErr(err error) error {
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return net.ErrClosed
	}
	return err
}
