package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestAuditConcurrentWriters(t *testing.T) {
	s, dir := openT(t)
	const goroutines, each = 50, 100
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				rec := AuditRecord{
					Caller: fmt.Sprintf("12D3KooWcaller%02d", g), Via: "mesh", Method: "tools/call",
					Skill: "upload_file", Outcome: "ok", DurationMS: float64(i) / 3,
					Remote: "/ip4/127.0.0.1/tcp/4001", Code: i,
				}
				if err := s.Audit(rec); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(data, []byte("\n")) {
		t.Error("log does not end in a newline")
	}
	seen := make(map[string]bool)
	lines := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		lines++
		var rec AuditRecord
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("line %d is not a record: %v: %q", lines, err, sc.Text())
		}
		if rec.Time.IsZero() || rec.Outcome != "ok" {
			t.Fatalf("line %d = %+v", lines, rec)
		}
		k := fmt.Sprint(rec.Caller, "/", rec.Code)
		if seen[k] {
			t.Fatalf("duplicate record %s", k)
		}
		seen[k] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if lines != goroutines*each || len(seen) != goroutines*each {
		t.Fatalf("got %d lines (%d distinct), want %d", lines, len(seen), goroutines*each)
	}
}

func TestAuditErrorsAndAppend(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Audit(AuditRecord{Caller: "a", Method: "ping", Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Audit(AuditRecord{Caller: "a", DurationMS: math.NaN()}); err == nil {
		t.Error("a record that cannot be marshalled was accepted")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Audit(AuditRecord{Caller: "b\nwith newline", Method: "ping", Outcome: "error", Code: -32601}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if n := bytes.Count(data, []byte("\n")); n != 2 {
		t.Fatalf("log has %d lines, want 2 (append across restarts, none for the failed record):\n%s", n, data)
	}
}
