package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
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

// auditLines reads one audit file's lines, checking that each is a whole
// record, and returns their Code fields (the test's sequence numbers).
func auditLines(t *testing.T, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		t.Fatalf("%s does not end in a newline: a line was split", filepath.Base(path))
	}
	var seqs []int
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var rec AuditRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.Method != "ping" {
			t.Fatalf("%s: a line that is not a whole record: %q", filepath.Base(path), sc.Text())
		}
		seqs = append(seqs, rec.Code)
	}
	return seqs
}

func TestAuditRotation(t *testing.T) {
	const max, keep = 1000, 3
	dir := t.TempDir()
	s, err := Open(dir, WithAuditRotation(max, keep))
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "audit.jsonl")
	write := func(from, to int) {
		for i := from; i < to; i++ {
			if err := s.Audit(AuditRecord{Caller: "12D3KooWcaller", Method: "ping", Outcome: "ok", Code: i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0, 30)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The size is learnt again at Open: rotation goes on across restarts.
	if s, err = Open(dir, WithAuditRotation(max, keep)); err != nil {
		t.Fatal(err)
	}
	write(30, 60)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Oldest first: .3, .2, .1, then the current file. Each is within the
	// size, the lines run on without a gap, and the newest line is last.
	var all []int
	for _, name := range []string{log + ".3", log + ".2", log + ".1", log} {
		st, err := os.Stat(name)
		if err != nil {
			t.Fatalf("%v (want %d rotated files)", err, keep)
		}
		if st.Size() > max || st.Size() == 0 {
			t.Fatalf("%s is %d bytes; want 1 to %d", filepath.Base(name), st.Size(), max)
		}
		all = append(all, auditLines(t, name)...)
	}
	if _, err := os.Stat(log + ".4"); !os.IsNotExist(err) {
		t.Fatalf("audit.jsonl.4 exists beyond keep=%d: %v", keep, err)
	}
	if len(all) == 60 || all[len(all)-1] != 59 {
		t.Fatalf("lines %v; want the newest ones, ending at 59, and the oldest dropped", all)
	}
	for i := 1; i < len(all); i++ {
		if all[i] != all[i-1]+1 {
			t.Fatalf("lines %v: a gap or a reordering at %d", all, i)
		}
	}
}

// Under concurrent writers no line is lost or split by a rotation.
func TestAuditRotationConcurrent(t *testing.T) {
	const goroutines, each, keep = 20, 50, 1000
	dir := t.TempDir()
	s, err := Open(dir, WithAuditRotation(2000, keep))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if err := s.Audit(AuditRecord{Caller: "c", Method: "ping", Outcome: "ok", Code: g*each + i}); err != nil {
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
	seen := map[int]bool{}
	files := 0
	for i := 0; ; i++ {
		name := filepath.Join(dir, "audit.jsonl")
		if i > 0 {
			name = fmt.Sprintf("%s.%d", name, i)
		}
		if _, err := os.Stat(name); os.IsNotExist(err) {
			break
		}
		files++
		for _, seq := range auditLines(t, name) {
			if seen[seq] {
				t.Fatalf("line %d twice", seq)
			}
			seen[seq] = true
		}
	}
	if len(seen) != goroutines*each || files < 10 {
		t.Fatalf("%d distinct lines in %d files; want %d lines, rotated many times", len(seen), files, goroutines*each)
	}
}

// keep 0 keeps no rotated file; maxBytes 0 never rotates.
func TestAuditRotationEdges(t *testing.T) {
	for _, c := range []struct {
		max          int64
		keep         int
		files        []string
		currentLines int
	}{
		{max: 300, keep: 0, files: []string{"audit.jsonl"}, currentLines: 2}, // ~110-byte lines
		{max: 0, keep: 2, files: []string{"audit.jsonl"}, currentLines: 20},
	} {
		dir := t.TempDir()
		s, err := Open(dir, WithAuditRotation(c.max, c.keep))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if err := s.Audit(AuditRecord{Caller: "c", Method: "ping", Outcome: "ok", Code: i}); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		var names []string
		for _, n := range rawNames(t, dir) {
			if strings.HasPrefix(n, "audit") {
				names = append(names, n)
			}
		}
		lines := auditLines(t, filepath.Join(dir, "audit.jsonl"))
		if fmt.Sprint(names) != fmt.Sprint(c.files) || len(lines) != c.currentLines || lines[len(lines)-1] != 19 {
			t.Errorf("max %d keep %d: files %v, current lines %v", c.max, c.keep, names, lines)
		}
	}
}

// TestAuditLineIsJSONMarshal holds the hand-built audit line equal to what
// encoding/json makes of the record, for plain and hostile field values.
func TestAuditLineIsJSONMarshal(t *testing.T) {
	odd := []string{"", "12D3KooWplain", "ip:127.0.0.1", "/ip4/1.2.3.4/tcp/4001", `quo"te`, `back\slash`,
		"<script>&amp;", "new\nline\ttab\x00nul\x1f", "ünïcødé ✓", "\u2028\u2029", string([]byte{0xff, 0xfe}), "\x7f"}
	durations := []float64{0, 0.001, 1.5, 123456.789, 1e-7, 3e21, 0.1 + 0.2}
	i := 0
	for _, a := range odd {
		for _, b := range odd {
			d := durations[i%len(durations)]
			i++
			rec := AuditRecord{Time: time.Date(2026, 12, 1, 16, 0, 0, i*1000, time.UTC), Caller: a, Via: b, Auth: a, Method: b,
				Skill: a, Outcome: b, Code: -32000 - i%10, DurationMS: d, Remote: b}
			if i%3 == 0 {
				rec.Code, rec.Via, rec.Skill = 0, "", ""
			}
			if i%4 == 0 {
				rec.Threat = a
				rec.Findings = []AuditFinding{{Vector: a, Level: b}, {Vector: b, Level: a, Field: a}}
			}
			want, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			got, err := rec.appendLine(nil)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want)+"\n" {
				t.Fatalf("record %+v:\n got %s\nwant %s", rec, got, want)
			}
		}
	}
}
