package discovery

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// TestNoDHTPeerSaidOnce: a node whose DHT stays empty says so once at Info;
// its retries say it at Debug only.
func TestNoDHTPeerSaidOnce(t *testing.T) {
	var logs testenv.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	lone := newDisc(t, newHost(t), WithRepublish(50*time.Millisecond), WithLogger(log))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lone.Publish(ctx, testCard(lone.h.ID(), "lone", []string{"ping"})); err != nil {
		t.Fatal(err)
	}
	count := func(level string) int {
		n := 0
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "level="+level) && strings.Contains(l, "no DHT peer yet") {
				n++
			}
		}
		return n
	}
	eventually(t, 5*time.Second, "three retries", func() bool { return count("DEBUG") >= 3 })
	if n := count("INFO"); n != 1 {
		t.Fatalf("%d Info lines about the empty DHT, want 1:\n%s", n, logs.String())
	}
}
