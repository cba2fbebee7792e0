package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/node/store"
)

// TestAuditTableHasNoControlCharacters: a caller picks its skill name (an
// anonymous caller's unknown skill is logged as it was sent); the table
// must not pass an escape sequence to the operator's terminal.
func TestAuditTableHasNoControlCharacters(t *testing.T) {
	var b bytes.Buffer
	p := newAuditPrinter(&b, false)
	p.print(store.AuditRecord{Time: time.Now(), Caller: "ip:1.2.3.4", Via: "http", Method: "tools/call",
		Skill: "\x1b]0;owned\x07\x1b[2J", Outcome: "error", Code: -32002,
		Findings: []store.AuditFinding{{Vector: "x\x1b[31m", Level: "low"}}})
	p.flush()
	if out := b.String(); strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, "owned") {
		t.Fatalf("table %q: want the text without its control characters", out)
	}
	if got := oneLine("a\x1b[1mb\n\tc", 80); got != `a\x1b[1mb\n\tc` {
		t.Errorf("oneLine: %q", got)
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"":                     {},
		"90m":                  now.Add(-90 * time.Minute),
		"2026-12-01T10:00:00Z": time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
	} {
		if got, err := parseSince(in, now); err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1h", "yesterday", "2026-12-01"} {
		if _, err := parseSince(bad, now); err == nil {
			t.Errorf("parseSince(%q): want an error", bad)
		}
	}
}

// TestFollowAuditAcrossRotation: --follow prints the tail, then every line
// appended, each once, also the last lines of a file rotated away and the
// first of its successor.
func TestFollowAuditAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	line := func(i int) string {
		return fmt.Sprintf(`{"time":"2026-12-01T10:00:%02dZ","caller":"c%d","method":"tools/call","skill":"ping","outcome":"ok","duration_ms":1}`+"\n", i%60, i)
	}
	appendLines := func(p string, from, to int) {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		for i := from; i < to; i++ {
			f.WriteString(line(i))
		}
		f.Close()
	}
	appendLines(path, 0, 5)
	var out testenv.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- followAudit(ctx, dir, store.AuditFilter{}, 2, newAuditPrinter(&out, true), io.Discard) }()
	waitFor := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(out.String(), "\n") < n {
			if time.Now().After(deadline) {
				t.Fatalf("want %d lines, have:\n%s", n, out.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor(2) // the tail: c3, c4
	appendLines(path, 5, 8)
	waitFor(5)
	// Rotate with lines the follower has not read yet on both sides.
	appendLines(path, 8, 10)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendLines(path, 10, 13)
	waitFor(10)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var callers []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rec store.AuditRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		callers = append(callers, rec.Caller)
	}
	want := []string{"c3", "c4", "c5", "c6", "c7", "c8", "c9", "c10", "c11", "c12"}
	if !slices.Equal(callers, want) {
		t.Fatalf("followed %v, want %v", callers, want)
	}
}
