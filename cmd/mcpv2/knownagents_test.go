package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestKnownAgentsOwnTimeout: one agent that never answers does not use up
// the time of the --agents after it (each URL has its own timeout; with
// one shared, every later add found its context ended), and no more than
// --max-agents are registered (review item 8).
func TestKnownAgentsOwnTimeout(t *testing.T) {
	var mu sync.Mutex
	var ok, asked []string
	add := func(ctx context.Context, u string) (string, error) {
		mu.Lock()
		asked = append(asked, u)
		mu.Unlock()
		if u == "http://slow.example" {
			<-ctx.Done() // never answers
			return "", ctx.Err()
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
		mu.Lock()
		ok = append(ok, u)
		mu.Unlock()
		return "", nil
	}
	urls := []string{"http://slow.example"}
	for i := range 6 {
		urls = append(urls, fmt.Sprintf("http://a%d.example", i))
	}
	addKnownAgents(context.Background(), urls, 6, 200*time.Millisecond, slog.New(slog.DiscardHandler), add)
	slices.Sort(ok)
	want := []string{"http://a0.example", "http://a1.example", "http://a2.example", "http://a3.example", "http://a4.example"}
	if !slices.Equal(ok, want) || len(asked) != 6 {
		t.Fatalf("registered %q of %q asked, want %q (the cap of 6 leaves a5 out)", ok, asked, want)
	}
}
