package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
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
