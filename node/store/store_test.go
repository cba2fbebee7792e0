package store

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openT opens a store in a fresh temp dir and closes it at cleanup.
func openT(t *testing.T, opts ...Option) (*Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	s, err := Open(dir, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, dir
}

func TestOpenLayout(t *testing.T) {
	s, dir := openT(t)
	if s.Dir() != dir {
		t.Errorf("Dir() = %q, want %q", s.Dir(), dir)
	}
	if got, want := s.Files().Dir(), filepath.Join(dir, "files"); got != want {
		t.Errorf("Files().Dir() = %q, want %q", got, want)
	}
	for _, c := range []struct {
		name string
		mode os.FileMode
	}{
		{"", os.ModeDir | 0o700},
		{"files", os.ModeDir | 0o700},
		{"state.db", 0o600},
		{"audit.jsonl", 0o600},
	} {
		st, err := os.Stat(filepath.Join(dir, c.name))
		if err != nil {
			t.Fatalf("%q: %v", c.name, err)
		}
		if st.Mode() != c.mode {
			t.Errorf("%q mode = %v, want %v", c.name, st.Mode(), c.mode)
		}
	}
}

func TestOpenFilesDirOption(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	s, err := Open("data", WithFilesDir("elsewhere/files"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := s.Files().Dir(), filepath.Join(base, "elsewhere", "files"); got != want {
		t.Errorf("Files().Dir() = %q, want absolute %q", got, want)
	}
	if got, want := s.Dir(), filepath.Join(base, "data"); got != want {
		t.Errorf("Dir() = %q, want absolute %q", got, want)
	}
	if _, err := s.Files().Write("x", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(base, "elsewhere", "files", "x")); err != nil {
		t.Errorf("file not in the configured dir: %v", err)
	}
}

func TestOpenBadOptions(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		dir  string
		opts []Option
	}{
		"empty data dir":     {"", nil},
		"zero max file":      {dir, []Option{WithMaxFileSize(0)}},
		"negative max turns": {dir, []Option{WithMaxTurns(-1)}},
		"zero turn bytes":    {dir, []Option{WithMaxTurnBytes(0)}},
		"zero lock timeout":  {dir, []Option{WithLockTimeout(0)}},
		"files dir is data":  {dir, []Option{WithFilesDir(dir)}},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := Open(c.dir, c.opts...)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.HasPrefix(err.Error(), "store: open") {
				t.Errorf("error %q lacks the store: open prefix", err)
			}
		})
	}
}

func TestCloseIdempotent(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	testenv.CloseTwice(t, s)
	if err := s.Audit(AuditRecord{Caller: "x"}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Audit after Close = %v, want net.ErrClosed", err)
	}
	if _, err := s.AppendTurns("k", Turn{Role: "user"}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("AppendTurns after Close = %v, want net.ErrClosed", err)
	}
	if _, err := s.History("k", 0); !errors.Is(err, net.ErrClosed) {
		t.Errorf("History after Close = %v, want net.ErrClosed", err)
	}
	if _, err := s.Files().Write("x", strings.NewReader("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close = %v, want net.ErrClosed", err)
	}
	if _, err := s.Files().List(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("List after Close = %v, want net.ErrClosed", err)
	}
}

func TestOpenInUse(t *testing.T) {
	s, dir := openT(t)
	// A temp file standing for the first node's write in progress.
	inflight := filepath.Join(s.Files().Dir(), tempPrefix+"inflight")
	if err := os.WriteFile(inflight, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	s2, err := Open(dir, WithLockTimeout(200*time.Millisecond))
	elapsed := time.Since(start)
	if err == nil {
		s2.Close()
		t.Fatal("second Open of the same data dir succeeded")
	}
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "data dir in use by another mcpv2 node") {
		t.Errorf("second Open error = %v, want ErrInUse with a clear message", err)
	}
	if elapsed > 2*time.Second {
		t.Errorf("second Open took %v, want it to fail fast", elapsed)
	}
	if _, err := os.Stat(inflight); err != nil {
		t.Errorf("failed Open touched the live node's temp file: %v", err)
	}

	// The default timeout also fails fast.
	start = time.Now()
	if s3, err := Open(dir); !errors.Is(err, ErrInUse) {
		if err == nil {
			s3.Close()
		}
		t.Errorf("Open with default timeout = %v, want ErrInUse", err)
	}
	if d := time.Since(start); d > DefaultLockTimeout+2*time.Second {
		t.Errorf("Open with default timeout took %v", d)
	}

	// Once the first node closes, the dir opens again and the stale temp
	// file is cleaned.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s4, err := Open(dir, WithLockTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	defer s4.Close()
	if _, err := os.Stat(inflight); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temp file survived Open: %v", err)
	}
}

func TestFailedOpenReleasesEverything(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "data")
	blocker := filepath.Join(base, "not-a-dir")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Fails after the database is open: the files dir cannot be created.
	if s, err := Open(dir, WithFilesDir(filepath.Join(blocker, "files"))); err == nil {
		s.Close()
		t.Fatal("Open with an impossible files dir succeeded")
	}
	// The lock must have been released.
	s, err := Open(dir, WithLockTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatalf("Open after a failed Open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
