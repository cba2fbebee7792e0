package store

import (
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every owner of this package: a second Close returns net.ErrClosed, and
// operations after Close wrap it too (one closed sentinel, never
// fs.ErrClosed).
func TestCloseTwice(t *testing.T) {
	cases := []struct {
		name  string
		close func(t *testing.T) (first, second func() error, after func() error)
	}{
		{"Store", func(t *testing.T) (func() error, func() error, func() error) {
			s, err := Open(filepath.Join(t.TempDir(), "data"))
			if err != nil {
				t.Fatal(err)
			}
			return s.Close, s.Close, func() error { _, err := s.Sweep(); return err }
		}},
		{"Partial", func(t *testing.T) (func() error, func() error, func() error) {
			s, _ := openT(t)
			p := openPartialT(t, s.Files(), "peerA", "p.bin", []byte("0123456789"))
			if _, err := p.Write([]byte("0123")); err != nil {
				t.Fatal(err)
			}
			return p.Close, p.Close, func() error { _, err := p.Write([]byte("4")); return err }
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			first, second, after := c.close(t)
			if err := first(); err != nil {
				t.Fatalf("first Close = %v", err)
			}
			if err := second(); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("second Close = %v, want net.ErrClosed", err)
			}
			if err := after(); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("use after Close = %v, want net.ErrClosed", err)
			}
		})
	}
}

// A committed Partial's deferred Close stays a no-op; its other uses wrap
// net.ErrClosed.
func TestPartialAfterCommitClosed(t *testing.T) {
	s, _ := openT(t)
	data := []byte("all of it")
	p := openPartialT(t, s.Files(), "peerA", "c.bin", data)
	if _, err := p.Write(data); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Commit = %v, want net.ErrClosed", err)
	}
	if err := p.Restart(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Restart after Commit = %v, want net.ErrClosed", err)
	}
	if _, err := p.Commit(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Commit after Commit = %v, want net.ErrClosed", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close after Commit = %v, want nil", err)
	}
	if err := p.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close = %v, want net.ErrClosed", err)
	}
}

// A bad option value fails Open with an error naming the option, and
// leaves nothing behind (the lock is free for the next Open).
func TestOpenBadOption(t *testing.T) {
	cases := []struct {
		opt  Option
		name string
	}{
		{WithMaxFileSize(0), "WithMaxFileSize"},
		{WithMaxTurns(-1), "WithMaxTurns"},
		{WithMaxTurnBytes(0), "WithMaxTurnBytes"},
		{WithLockTimeout(0), "WithLockTimeout"},
		{WithMaxPartial(-1), "WithMaxPartial"},
		{WithPartialTTL(0), "WithPartialTTL"},
		{WithMaxStore(-1), "WithMaxStore"},
		{WithAuditRotation(-1, 0), "WithAuditRotation"},
		{WithAuditRotation(0, -1), "WithAuditRotation"},
		{WithMaxConversations(-1), "WithMaxConversations"},
		{WithConversationTTL(-time.Second), "WithConversationTTL"},
		{WithTaskTTL(-time.Second), "WithTaskTTL"},
		{WithMaxTasks(-1), "WithMaxTasks"},
		{WithMaxTasksBytes(-1), "WithMaxTasksBytes"},
		{WithClock(nil), "WithClock"},
	}
	dir := filepath.Join(t.TempDir(), "data")
	for _, c := range cases {
		s, err := Open(dir, c.opt)
		if err == nil {
			_ = s.Close()
			t.Errorf("%s: Open succeeded", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.name) || !strings.HasPrefix(err.Error(), "store: open: ") {
			t.Errorf("%s: error %q does not name the option", c.name, err)
		}
	}
	s, err := Open(dir, WithLockTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatalf("Open after the failed ones: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

var _ io.Closer = (*Partial)(nil)
