package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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

// The index of conversations by last use, for the count cap and the TTL:
// convUsed maps a conversation key to the 8-byte big-endian UnixNano of its
// last append; convByUse holds the same pairs as keys (time, then the
// conversation key) with empty values, so a cursor walks them oldest first.
// convUsed's bucket sequence is the number of conversations.
var (
	convUsed  = []byte("conversations-used")
	convByUse = []byte("conversations-by-use")
)

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
// Appending marks the conversation used now; when it starts a conversation
// beyond WithMaxConversations, the least recently used one is dropped in
// the same transaction.
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
		if !tx.Writable() {
			return nil
		}
		return s.touch(tx, key)
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

// initConversations creates the buckets, and indexes conversations written
// before the index existed by the time of their last turn. It runs in
// Open's first transaction.
func (s *Store) initConversations(tx *bolt.Tx) error {
	convs, err := tx.CreateBucketIfNotExists(convBucket)
	if err != nil {
		return err
	}
	if tx.Bucket(convUsed) != nil {
		_, err := tx.CreateBucketIfNotExists(convByUse)
		return err
	}
	used, err := tx.CreateBucket(convUsed)
	if err != nil {
		return err
	}
	byUse, err := tx.CreateBucketIfNotExists(convByUse)
	if err != nil {
		return err
	}
	var count uint64
	err = convs.ForEachBucket(func(k []byte) error {
		when := s.now()
		if _, v := convs.Bucket(k).Cursor().Last(); v != nil {
			var t Turn
			if json.Unmarshal(v, &t) == nil && !t.Time.IsZero() {
				when = t.Time
			}
		}
		ts := useTime(when)
		count++
		return errors.Join(used.Put(k, ts), byUse.Put(append(ts, k...), nil))
	})
	if err != nil {
		return err
	}
	return used.SetSequence(count)
}

// useTime encodes t for the index; times before 1970 count as 1970.
func useTime(t time.Time) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(max(t.UnixNano(), 0)))
}

// touch marks the conversation key used now, counting it if it is new, and
// drops the least recently used conversations beyond the cap (never key).
func (s *Store) touch(tx *bolt.Tx, key string) error {
	used, byUse := tx.Bucket(convUsed), tx.Bucket(convByUse)
	k := []byte(key)
	count := used.Sequence()
	if old := used.Get(k); old != nil {
		if err := byUse.Delete(append(slices.Clone(old), k...)); err != nil {
			return err
		}
	} else {
		count++
	}
	ts := useTime(s.now())
	if err := used.Put(k, ts); err != nil {
		return err
	}
	if err := byUse.Put(append(ts, k...), nil); err != nil {
		return err
	}
	if err := used.SetSequence(count); err != nil {
		return err
	}
	if s.maxConversations <= 0 || count <= uint64(s.maxConversations) {
		return nil
	}
	_, err := s.dropOldest(tx, key, math.MaxInt, func(_ time.Time, count uint64) bool {
		return count > uint64(s.maxConversations)
	})
	return err
}

// dropOldest walks the conversations from the least recently used and drops
// each while want, given its last use and the current count, says so, at
// most limit of them; it never drops keep. The walk is in last-use order,
// so it stops at the first one want refuses. It returns how many it
// dropped.
func (s *Store) dropOldest(tx *bolt.Tx, keep string, limit int, want func(last time.Time, count uint64) bool) (int, error) {
	convs, used, byUse := tx.Bucket(convBucket), tx.Bucket(convUsed), tx.Bucket(convByUse)
	count := used.Sequence()
	dropped := 0
	c := byUse.Cursor()
	for k, _ := c.First(); k != nil && dropped < limit; {
		if len(k) < 8 || string(k[8:]) == keep {
			k, _ = c.Next()
			continue
		}
		if !want(time.Unix(0, int64(binary.BigEndian.Uint64(k[:8]))), count) {
			break
		}
		idx := slices.Clone(k)
		conv := idx[8:]
		if err := byUse.Delete(idx); err != nil {
			return dropped, err
		}
		if err := used.Delete(conv); err != nil {
			return dropped, err
		}
		if convs.Bucket(conv) != nil {
			if err := convs.DeleteBucket(conv); err != nil {
				return dropped, err
			}
		}
		count--
		dropped++
		k, _ = c.Seek(idx) // the first entry after the one deleted
	}
	return dropped, used.SetSequence(count)
}

// ConversationCount returns how many conversations are kept.
func (s *Store) ConversationCount() (int, error) {
	if s.closed.Load() {
		return 0, fmt.Errorf("store: conversation count: %w", net.ErrClosed)
	}
	var n uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(convUsed).Sequence()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: conversation count: %w", closedErr(err))
	}
	return int(n), nil
}

// ExpireConversations drops the conversations last used before now minus
// the conversation TTL (WithConversationTTL), and the least recently used
// ones beyond the count cap (WithMaxConversations; a cap lowered since they
// were written), and returns how many it dropped. Sweep calls it. Safe for
// concurrent use.
func (s *Store) ExpireConversations(now time.Time) (int, error) {
	const op = "expire conversations"
	if s.closed.Load() {
		return 0, fmt.Errorf("store: %s: %w", op, net.ErrClosed)
	}
	const batch = 1000 // conversations per transaction, so that one stays small
	total := 0
	for {
		var n int
		err := s.db.Update(func(tx *bolt.Tx) error {
			var err error
			n, err = s.dropOldest(tx, "", batch, func(last time.Time, count uint64) bool {
				return (s.conversationTTL > 0 && now.Sub(last) >= s.conversationTTL) ||
					(s.maxConversations > 0 && count > uint64(s.maxConversations))
			})
			return err
		})
		if err != nil {
			return total, fmt.Errorf("store: %s: %w", op, closedErr(err))
		}
		total += n
		if n < batch {
			return total, nil
		}
	}
}
