package store

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadAuditAcrossRotation: records come back oldest first across the
// rotated files, filtered, with bad and oversized lines skipped and
// counted, never fatal.
func TestReadAuditAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, WithAuditRotation(600, 3))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range 20 {
		rec := AuditRecord{Time: t0.Add(time.Duration(i) * time.Minute), Caller: "12D3KooWa", Method: "tools/call", Skill: "ask", Outcome: "ok"}
		switch i % 4 {
		case 1:
			rec.Caller, rec.Skill = "ip:127.0.0.1", "ping"
		case 2:
			rec.Outcome, rec.Code, rec.Threat = "blocked", -32009, "critical"
			rec.Findings = []AuditFinding{{Vector: "instruction_override", Level: "critical", Field: "query"}}
		case 3:
			rec.Threat = "medium"
		}
		if err := s.Audit(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := AuditFiles(dir)
	if err != nil || len(files) < 3 {
		t.Fatalf("AuditFiles: %v, %v: want rotated files", files, err)
	}
	// A torn and a huge line in the current file are skipped.
	f, _ := os.OpenFile(filepath.Join(dir, auditName), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("{not json\n" + strings.Repeat("x", MaxAuditLine+10) + "\n\n")
	f.Close()

	all, skipped, err := TailAudit(context.Background(), dir, AuditFilter{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if skipped != 3 {
		t.Errorf("skipped %d lines, want 3 (torn, oversized, blank)", skipped)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Time.Before(all[i-1].Time) {
			t.Fatalf("record %d (%v) before record %d (%v): want oldest first", i, all[i].Time, i-1, all[i-1].Time)
		}
	}
	if last := all[len(all)-1]; !last.Time.Equal(t0.Add(19 * time.Minute)) {
		t.Fatalf("last record %v: want the 20th", last.Time)
	}
	count := func(f AuditFilter, limit int) []AuditRecord {
		t.Helper()
		got, _, err := TailAudit(context.Background(), dir, f, limit)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	n := len(all) // what rotation kept
	blocked := count(AuditFilter{Outcome: "blocked"}, 1000)
	for _, r := range blocked {
		if r.Outcome != "blocked" || len(r.Findings) != 1 || r.Findings[0].Field != "query" {
			t.Fatalf("blocked filter gave %+v", r)
		}
	}
	if len(blocked) == 0 || len(blocked) > n/4+1 {
		t.Errorf("%d blocked of %d", len(blocked), n)
	}
	for _, r := range count(AuditFilter{Outcome: "flagged"}, 1000) {
		if r.Threat != "medium" {
			t.Fatalf("flagged filter gave %+v", r)
		}
	}
	for _, r := range count(AuditFilter{Caller: "ip:", Skill: "ping"}, 1000) {
		if r.Caller != "ip:127.0.0.1" || r.Skill != "ping" {
			t.Fatalf("caller+skill filter gave %+v", r)
		}
	}
	if got := count(AuditFilter{Since: t0.Add(18 * time.Minute)}, 1000); len(got) != 2 {
		t.Errorf("since the 19th minute: %d records, want 2", len(got))
	}
	if got := count(AuditFilter{}, 2); len(got) != 2 || !got[1].Time.Equal(t0.Add(19*time.Minute)) {
		t.Errorf("limit 2: %+v, want the last two", got)
	}
	if _, _, err := TailAudit(context.Background(), dir, AuditFilter{Outcome: "nope"}, 5); err == nil || !strings.Contains(err.Error(), "flagged") {
		t.Errorf("bad outcome: %v, want an error listing the choices", err)
	}
}

// TestAuditReaderFollowsAGrowingFile: a line written in two pieces is read
// once, whole, after its newline arrives.
func TestAuditReaderFollowsAGrowingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.jsonl")
	w, _ := os.Create(path)
	defer w.Close()
	r, _ := os.Open(path)
	defer r.Close()
	ar := NewAuditReader(r)
	line := `{"time":"2026-12-01T10:00:00Z","caller":"c","method":"tools/call","outcome":"ok","duration_ms":1}` + "\n"
	w.WriteString(line[:40])
	if _, err := ar.Next(); err != io.EOF {
		t.Fatalf("half a line: %v, want io.EOF", err)
	}
	w.WriteString(line[40:])
	rec, err := ar.Next()
	if err != nil || rec.Caller != "c" {
		t.Fatalf("after the rest: %+v, %v", rec, err)
	}
	if _, err := ar.Next(); err != io.EOF || ar.Skipped != 0 {
		t.Fatalf("then: %v, skipped %d", err, ar.Skipped)
	}
}
