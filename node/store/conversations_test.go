package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func contents(turns []Turn) []string {
	var out []string
	for _, t := range turns {
		out = append(out, t.Content)
	}
	return out
}

func TestConversationsPersistAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	n, err := s.AppendTurns("peerA|conv1",
		Turn{Role: "user", Content: "my name is Ada", Time: t0},
		Turn{Role: "assistant", Content: "hello Ada", Time: t0.Add(time.Second)})
	if err != nil || n != 2 {
		t.Fatalf("AppendTurns = %d, %v; want 2", n, err)
	}
	if n, err := s.AppendTurns("peerB|conv1", Turn{Role: "user", Content: "other caller"}); err != nil || n != 1 {
		t.Fatalf("AppendTurns other key = %d, %v", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := s.History("peerA|conv1", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Turn{
		{Role: "user", Content: "my name is Ada", Time: t0},
		{Role: "assistant", Content: "hello Ada", Time: t0.Add(time.Second)},
	}
	if len(h) != len(want) {
		t.Fatalf("History = %+v, want %+v", h, want)
	}
	for i := range want {
		if h[i].Role != want[i].Role || h[i].Content != want[i].Content || !h[i].Time.Equal(want[i].Time) {
			t.Errorf("turn %d = %+v, want %+v", i, h[i], want[i])
		}
	}
	if n, err := s.AppendTurns("peerA|conv1", Turn{Role: "user", Content: "what is my name?"}); err != nil || n != 3 {
		t.Errorf("AppendTurns after restart = %d, %v; want 3", n, err)
	}
	h, _ = s.History("peerB|conv1", 0)
	if len(h) != 1 || h[0].Content != "other caller" || h[0].Time.IsZero() {
		t.Errorf("other key History = %+v", h)
	}
	if n, err := s.AppendTurns("peerA|conv1"); err != nil || n != 3 {
		t.Errorf("AppendTurns with no turns = %d, %v; want the count 3", n, err)
	}
	if n, err := s.AppendTurns("never"); err != nil || n != 0 {
		t.Errorf("AppendTurns with no turns on a new key = %d, %v", n, err)
	}
	if h, err := s.History("never", 0); err != nil || len(h) != 0 {
		t.Errorf("History of an unknown key = %+v, %v", h, err)
	}
}

func TestConversationsCap(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, WithMaxTurns(5))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		n, err := s.AppendTurns("k", Turn{Role: "user", Content: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		if want := min(i+1, 5); n != want {
			t.Fatalf("after %d appends n = %d, want %d", i+1, n, want)
		}
	}
	h, _ := s.History("k", 0)
	if got := fmt.Sprint(contents(h)); got != "[7 8 9 10 11]" {
		t.Fatalf("History = %s, want the last five", got)
	}
	// A batch larger than the cap keeps its own tail.
	batch := make([]Turn, 7)
	for i := range batch {
		batch[i] = Turn{Role: "assistant", Content: fmt.Sprint("b", i)}
	}
	if n, err := s.AppendTurns("k", batch...); err != nil || n != 5 {
		t.Fatalf("batch AppendTurns = %d, %v; want 5", n, err)
	}
	h, _ = s.History("k", 0)
	if got := fmt.Sprint(contents(h)); got != "[b2 b3 b4 b5 b6]" {
		t.Fatalf("History = %s", got)
	}
	h, _ = s.History("k", 2)
	if got := fmt.Sprint(contents(h)); got != "[b5 b6]" {
		t.Errorf("History(2) = %s", got)
	}
	h, _ = s.History("k", 99)
	if len(h) != 5 {
		t.Errorf("History(99) has %d turns", len(h))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The cap holds across a restart.
	s, err = Open(dir, WithMaxTurns(5))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := s.AppendTurns("k", Turn{Role: "user", Content: "after"}); err != nil || n != 5 {
		t.Fatalf("AppendTurns after restart = %d, %v", n, err)
	}
	h, _ = s.History("k", 0)
	if got := fmt.Sprint(contents(h)); got != "[b3 b4 b5 b6 after]" {
		t.Errorf("History = %s", got)
	}
}

func TestConversationsLimits(t *testing.T) {
	s, _ := openT(t, WithMaxTurnBytes(10))
	_, err := s.AppendTurns("k", Turn{Role: "user", Content: "fits"}, Turn{Role: "user", Content: "this is too long"})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "10-byte limit") {
		t.Fatalf("AppendTurns over the limit = %v, want ErrTooLarge naming the limit", err)
	}
	if h, _ := s.History("k", 0); len(h) != 0 {
		t.Errorf("a refused batch stored %+v", h)
	}
	for _, key := range []string{"", strings.Repeat("k", MaxKeyLen+1)} {
		if _, err := s.AppendTurns(key, Turn{Role: "user"}); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("AppendTurns(len %d) = %v, want ErrInvalidKey", len(key), err)
		}
		if _, err := s.History(key, 0); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("History(len %d) = %v, want ErrInvalidKey", len(key), err)
		}
	}
	if _, err := s.AppendTurns(strings.Repeat("k", MaxKeyLen), Turn{Role: "user"}); err != nil {
		t.Errorf("a key of MaxKeyLen bytes was refused: %v", err)
	}
}

// fakeClock is a settable clock for conversation use times.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }

func appendT(t *testing.T, s *Store, key string) {
	t.Helper()
	if _, err := s.AppendTurns(key, Turn{Role: "user", Content: key}); err != nil {
		t.Fatal(err)
	}
}

// keys returns which of keys still have history, and checks the count.
func kept(t *testing.T, s *Store, keys ...string) []string {
	t.Helper()
	var out []string
	for _, k := range keys {
		h, err := s.History(k, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) > 0 {
			out = append(out, k)
		}
	}
	if n, err := s.ConversationCount(); err != nil || n != len(out) {
		t.Fatalf("ConversationCount = %d, %v; %d kept", n, err, len(out))
	}
	return out
}

func TestConversationsCountCap(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	dir := t.TempDir()
	s, err := Open(dir, WithMaxConversations(3), WithClock(clock.now))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		appendT(t, s, k)
		clock.add(time.Second)
	}
	appendT(t, s, "a") // a is now the most recently used
	clock.add(time.Second)
	appendT(t, s, "d") // one too many: b, the least recently used, goes
	all := []string{"a", "b", "c", "d", "e"}
	if got := fmt.Sprint(kept(t, s, all...)); got != "[a c d]" {
		t.Fatalf("kept %s; want [a c d]", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The order survives a restart; a lower cap is applied by the sweep.
	s, err = Open(dir, WithMaxConversations(2), WithClock(clock.now))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r, err := s.Sweep(); err != nil || r.Conversations != 1 {
		t.Fatalf("Sweep = %+v, %v; want one over the lowered cap", r, err)
	}
	if got := fmt.Sprint(kept(t, s, all...)); got != "[a d]" {
		t.Fatalf("kept %s after the sweep; want [a d]", got)
	}
	clock.add(time.Second)
	appendT(t, s, "e")
	if got := fmt.Sprint(kept(t, s, all...)); got != "[d e]" {
		t.Fatalf("kept %s; want [d e]", got)
	}
}

func TestConversationsTTL(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	s, _ := openT(t, WithConversationTTL(time.Hour), WithClock(clock.now))
	appendT(t, s, "old")
	clock.add(30 * time.Minute)
	appendT(t, s, "mid")
	appendT(t, s, "kept")
	clock.add(20 * time.Minute)
	appendT(t, s, "kept") // used again: its hour starts over
	clock.add(15 * time.Minute)
	// 65 min after old, 35 after mid and 15 after kept.
	if r, err := s.Sweep(); err != nil || r.Conversations != 1 {
		t.Fatalf("Sweep = %+v, %v; want old expired", r, err)
	}
	all := []string{"old", "mid", "kept"}
	if got := fmt.Sprint(kept(t, s, all...)); got != "[mid kept]" {
		t.Fatalf("kept %s", got)
	}
	clock.add(40 * time.Minute)
	if n, err := s.ExpireConversations(clock.now()); err != nil || n != 1 {
		t.Fatalf("ExpireConversations = %d, %v; want mid expired", n, err)
	}
	if got := fmt.Sprint(kept(t, s, all...)); got != "[kept]" {
		t.Fatalf("kept %s", got)
	}
	// A key appended after expiry starts a new conversation.
	appendT(t, s, "old")
	if h, _ := s.History("old", 0); len(h) != 1 {
		t.Fatalf("old has %d turns after expiry and a new append", len(h))
	}
}

// Many expired conversations go in batches; none beyond the TTL is kept.
func TestConversationsExpireMany(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	s, _ := openT(t, WithConversationTTL(time.Minute), WithMaxConversations(0), WithClock(clock.now))
	// As AppendTurns does, but in one transaction (each of its own fsyncs).
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for i := range 2500 {
			key := fmt.Sprint("k", i)
			if _, err := tx.Bucket(convBucket).CreateBucket([]byte(key)); err != nil {
				return err
			}
			if err := s.touch(tx, key); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	clock.add(time.Minute)
	appendT(t, s, "fresh")
	n, err := s.ExpireConversations(clock.now())
	if err != nil || n != 2500 {
		t.Fatalf("ExpireConversations = %d, %v; want 2500", n, err)
	}
	if c, _ := s.ConversationCount(); c != 1 {
		t.Fatalf("%d conversations left, want 1", c)
	}
}

// A state.db written before the index existed is indexed at Open by the
// time of each conversation's last turn.
func TestConversationsIndexBuiltAtOpen(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	dir := t.TempDir()
	s, err := Open(dir, WithClock(clock.now))
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range []string{"x", "y", "z"} {
		if _, err := s.AppendTurns(k, Turn{Role: "user", Content: k, Time: clock.t.Add(time.Duration(i) * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	// Back to the old layout: no index buckets.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return errors.Join(tx.DeleteBucket(convUsed), tx.DeleteBucket(convByUse))
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(dir, WithConversationTTL(90*time.Minute), WithClock(clock.now))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := s.ConversationCount(); err != nil || n != 3 {
		t.Fatalf("ConversationCount after the rebuild = %d, %v", n, err)
	}
	clock.add(2 * time.Hour) // x's last turn is 2 h old, y's 1 h, z's 0
	if n, err := s.ExpireConversations(clock.now()); err != nil || n != 1 {
		t.Fatalf("ExpireConversations = %d, %v; want x", n, err)
	}
	if got := fmt.Sprint(kept(t, s, "x", "y", "z")); got != "[y z]" {
		t.Fatalf("kept %s", got)
	}
}
