package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpv2/mcpv2/protocol"
)

// MaxAuditLine caps one line of the audit log when it is read back: a
// longer line (none that Audit writes) is skipped whole.
const MaxAuditLine = 64 << 10

// AuditFilter selects audit records; its zero value selects all.
type AuditFilter struct {
	// Since keeps records that started at or after it (zero: all).
	Since time.Time
	// Caller keeps records whose caller starts with it.
	Caller string
	// Skill keeps records of that skill (exact).
	Skill string
	// Outcome keeps "ok", "error" or "blocked" records; "flagged" keeps
	// those the guard found something in but did not block.
	Outcome string
	// Trace keeps records of that trace id (exact, 32 lowercase hex).
	Trace string
}

// AuditOutcomes are the values AuditFilter.Outcome may take.
var AuditOutcomes = []string{"ok", "error", "blocked", "flagged"}

// Check reports a filter that can never match because its Outcome is not
// one of AuditOutcomes.
func (f AuditFilter) Check() error {
	if f.Outcome != "" && !slices.Contains(AuditOutcomes, f.Outcome) {
		return fmt.Errorf("outcome %q: want one of %s", f.Outcome, strings.Join(AuditOutcomes, ", "))
	}
	if f.Trace != "" && !validTraceID(f.Trace) {
		return fmt.Errorf("trace %q: want a trace id of 32 lowercase hex digits, not all zero", protocol.Clip(f.Trace, 40))
	}
	return nil
}

// Match reports whether f selects rec.
func (f AuditFilter) Match(rec *AuditRecord) bool {
	switch {
	case !f.Since.IsZero() && rec.Time.Before(f.Since):
		return false
	case f.Caller != "" && !strings.HasPrefix(rec.Caller, f.Caller):
		return false
	case f.Skill != "" && rec.Skill != f.Skill:
		return false
	case f.Trace != "" && rec.Trace != f.Trace:
		return false
	}
	switch f.Outcome {
	case "":
		return true
	case "flagged":
		return rec.Threat != "" && rec.Outcome != "blocked"
	default:
		return rec.Outcome == f.Outcome
	}
}

// AuditFiles returns the audit log files of the data dir dir, oldest first:
// the rotated audit.jsonl.N from the highest N down, then audit.jsonl. Files
// that do not exist are left out.
func AuditFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("store: audit: %w", err)
	}
	type rotated struct {
		n    int
		path string
	}
	var old []rotated
	current := ""
	for _, e := range ents {
		name := e.Name()
		if name == auditName {
			current = filepath.Join(dir, name)
			continue
		}
		if rest, ok := strings.CutPrefix(name, auditName+"."); ok {
			if n, err := strconv.Atoi(rest); err == nil && n > 0 {
				old = append(old, rotated{n, filepath.Join(dir, name)})
			}
		}
	}
	slices.SortFunc(old, func(a, b rotated) int { return b.n - a.n })
	files := make([]string, 0, len(old)+1)
	for _, r := range old {
		files = append(files, r.path)
	}
	if current != "" {
		files = append(files, current)
	}
	return files, nil
}

// AuditReader reads audit records from one file, line by line, skipping
// (and counting) lines that are too long or not audit records. It reads
// what is there and can be read again after the file grew (--follow).
type AuditReader struct {
	r *bufio.Reader
	// Skipped counts the lines skipped so far.
	Skipped int
	// partial holds the start of a line whose newline has not arrived.
	partial []byte
	long    bool // the current line is over MaxAuditLine: skip to its newline
}

// NewAuditReader reads records from r.
func NewAuditReader(r io.Reader) *AuditReader {
	return &AuditReader{r: bufio.NewReaderSize(r, 32<<10)}
}

// Next returns the next whole record. At the end of the input it returns
// io.EOF and keeps an unfinished last line for the next call, so a reader
// of a growing file sees each line once, whole.
func (a *AuditReader) Next() (AuditRecord, error) {
	for {
		chunk, err := a.r.ReadSlice('\n')
		if len(chunk) > 0 && !a.long {
			a.partial = append(a.partial, chunk...)
			if len(a.partial) > MaxAuditLine {
				a.partial, a.long = a.partial[:0], true
			}
		}
		switch {
		case err == nil:
			line := a.partial
			a.partial = a.partial[:0]
			if a.long {
				a.long = false
				a.Skipped++
				continue
			}
			rec, ok := parseAuditLine(line)
			if !ok {
				a.Skipped++
				continue
			}
			return rec, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return AuditRecord{}, err
		}
	}
}

// parseAuditLine decodes one line; blank lines and lines that are not an
// audit record (no time or method) are refused.
func parseAuditLine(line []byte) (AuditRecord, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return AuditRecord{}, false
	}
	var rec AuditRecord
	if err := json.Unmarshal(line, &rec); err != nil || rec.Time.IsZero() || rec.Outcome == "" {
		return AuditRecord{}, false
	}
	return rec, true
}

// ReadAudit calls fn, oldest first, for each record of the audit log of the
// data dir dir that f selects, until fn returns false or ctx ends. It
// returns how many lines it skipped as unreadable.
func ReadAudit(ctx context.Context, dir string, f AuditFilter, fn func(AuditRecord) bool) (skipped int, err error) {
	if err := f.Check(); err != nil {
		return 0, err
	}
	files, err := AuditFiles(dir)
	if err != nil {
		return 0, err
	}
	for _, path := range files {
		// A file last written before Since holds nothing after it.
		if st, err := os.Stat(path); err == nil && !f.Since.IsZero() && st.ModTime().Before(f.Since) {
			continue
		}
		more, n, err := ReadAuditFile(ctx, path, f, fn)
		skipped += n
		if err != nil || !more {
			return skipped, err
		}
	}
	return skipped, nil
}

// ReadAuditFile is ReadAudit over one file: it calls fn for each record f
// selects until fn returns false (more is then false) or ctx ends. A file
// that does not exist (rotated away) has no records.
func ReadAuditFile(ctx context.Context, path string, f AuditFilter, fn func(AuditRecord) bool) (more bool, skipped int, err error) {
	file, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true, 0, nil // rotated away since the listing
	}
	if err != nil {
		return false, 0, fmt.Errorf("store: audit: %w", err)
	}
	defer file.Close()
	ar := NewAuditReader(file)
	for {
		if err := ctx.Err(); err != nil {
			return false, ar.Skipped, err
		}
		rec, err := ar.Next()
		if err == io.EOF {
			return true, ar.Skipped, nil
		}
		if err != nil {
			return false, ar.Skipped, fmt.Errorf("store: audit: read %s: %w", filepath.Base(path), err)
		}
		if f.Match(&rec) && !fn(rec) {
			return false, ar.Skipped, nil
		}
	}
}

// TailAudit returns the last limit records of the audit log of dir that f
// selects, oldest first, and how many lines it skipped as unreadable.
func TailAudit(ctx context.Context, dir string, f AuditFilter, limit int) ([]AuditRecord, int, error) {
	if limit < 1 {
		return nil, 0, fmt.Errorf("store: audit: limit %d: want at least 1", limit)
	}
	ring := make([]AuditRecord, 0, min(limit, 1024))
	next := 0
	skipped, err := ReadAudit(ctx, dir, f, func(rec AuditRecord) bool {
		if len(ring) < limit {
			ring = append(ring, rec)
		} else {
			ring[next] = rec
			next = (next + 1) % limit
		}
		return true
	})
	if err != nil {
		return nil, skipped, err
	}
	return slices.Concat(ring[next:], ring[:next]), skipped, nil
}

// validTraceID reports whether s is a W3C trace-id: 32 lowercase hex
// digits, not all zero.
func validTraceID(s string) bool {
	_, err := trace.TraceIDFromHex(s)
	return err == nil
}
