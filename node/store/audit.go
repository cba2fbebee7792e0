package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// AuditRecord is one line of the audit log, one per call.
type AuditRecord struct {
	// Time is when the call started; Audit fills a zero Time with now.
	Time time.Time `json:"time"`
	// Caller is the caller's identity: a PeerID, or the edge's session identity.
	Caller string `json:"caller"`
	// Via is how the call arrived: "mesh" or "http".
	Via string `json:"via,omitempty"`
	// Auth is how the caller was authenticated: "peer", "secret" (an edge
	// token minted with the node's secret) or "anonymous" (an edge session
	// anyone may get).
	Auth string `json:"auth,omitempty"`
	// Method is the protocol method called.
	Method string `json:"method"`
	// Skill is the skill run, when the method runs one.
	Skill string `json:"skill,omitempty"`
	// Outcome is "ok", "error", or "blocked" (the prompt-injection guard
	// refused the call; Code says how it was answered).
	Outcome string `json:"outcome"`
	// Code is the error code when Outcome is "error".
	Code int `json:"code,omitempty"`
	// DurationMS is how long the call took, in milliseconds.
	DurationMS float64 `json:"duration_ms"`
	// Remote is the caller's network address, when known.
	Remote string `json:"remote,omitempty"`
	// Threat is the highest threat level the guard found in the call's
	// arguments ("low", "medium", "high", "critical"), empty when it found
	// nothing or did not look.
	Threat string `json:"threat,omitempty"`
	// Findings are what the guard found, at most MaxAuditFindings of them.
	Findings []AuditFinding `json:"findings,omitempty"`
	// Trace is the W3C trace id of the call (32 lowercase hex digits): the
	// trace of the incoming traceparent, or a new one the node started, the
	// same on every node the request crossed (mcpv2 audit --trace).
	Trace string `json:"trace,omitempty"`
	// Span is this node's span id of the call (16 lowercase hex digits).
	Span string `json:"span,omitempty"`
}

// AuditFinding is one finding of the guard in an audit line.
type AuditFinding struct {
	Vector string `json:"vector"`
	Level  string `json:"level"`
	Field  string `json:"field,omitempty"`
}

// MaxAuditFindings caps the findings one audit line carries.
const MaxAuditFindings = 16

// Audit appends rec to <data-dir>/audit.jsonl as one JSON line. The line is
// built in one buffer and written with one write call under Store.auditMu on
// a file opened O_APPEND, so concurrent callers never interleave or leave
// partial lines. When the line would take the file over the rotation size
// (WithAuditRotation), the file is rotated first, under the same lock, so
// every line lands whole in exactly one file. Lines are not fsynced one by
// one; a rotation and Close fsync. A marshal, write or rotation error is
// returned (after a failed rotation the line is still appended, to the file
// that could not be rotated); after Close the error wraps net.ErrClosed.
func (s *Store) Audit(rec AuditRecord) error {
	if rec.Time.IsZero() {
		rec.Time = time.Now().UTC()
	}
	if len(rec.Findings) > MaxAuditFindings {
		rec.Findings = rec.Findings[:MaxAuditFindings]
	}
	bp := lineBuffers.Get().(*[]byte)
	defer lineBuffers.Put(bp)
	line, err := rec.appendLine((*bp)[:0])
	if err != nil {
		return fmt.Errorf("store: audit: %w", err)
	}
	if cap(line) <= maxPooledLine {
		*bp = line
	}
	s.auditMu.Lock()
	defer s.auditMu.Unlock()
	if s.auditClosed {
		return fmt.Errorf("store: audit: %w", net.ErrClosed)
	}
	if s.audit == nil { // a rotation failed to open the fresh file: try again
		if err := s.openAudit(); err != nil {
			return err
		}
	}
	var rerr error
	if s.auditMaxBytes > 0 && s.auditSize > 0 && s.auditSize+int64(len(line)) > s.auditMaxBytes {
		rerr = s.rotateAudit()
		if s.audit == nil {
			return rerr
		}
	}
	n, err := s.audit.Write(line) // even after a failed rotation: the line is not lost
	s.auditSize += int64(n)
	if n == len(line) {
		s.publishAudit(rec)
	}
	if err != nil {
		return errors.Join(rerr, fmt.Errorf("store: audit: %w", err))
	}
	return rerr
}

// lineBuffers hold the buffers audit lines are built in: a line is
// written before Audit returns, and its buffer serves the next one.
var lineBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, 512) // a call's line, trace and span ids included, fits
	return &b
}}

// maxPooledLine is the largest line buffer lineBuffers keeps (a line with
// many findings, or long names, is built in a buffer of its own).
const maxPooledLine = 4 << 10

// appendLine appends rec as one JSON line, newline included: the bytes
// json.Marshal gives, without its reflection. A call writes one line, so the
// line is built by hand; TestAuditLineIsJSONMarshal holds the two equal.
func (rec *AuditRecord) appendLine(b []byte) ([]byte, error) {
	if math.IsNaN(rec.DurationMS) || math.IsInf(rec.DurationMS, 0) {
		return nil, fmt.Errorf("duration_ms is %v, not a JSON number", rec.DurationMS)
	}
	b = append(b, `{"time":"`...)
	b = rec.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","caller":`...)
	b = protocol.AppendJSONString(b, rec.Caller)
	if rec.Via != "" {
		b = append(b, `,"via":`...)
		b = protocol.AppendJSONString(b, rec.Via)
	}
	if rec.Auth != "" {
		b = append(b, `,"auth":`...)
		b = protocol.AppendJSONString(b, rec.Auth)
	}
	b = append(b, `,"method":`...)
	b = protocol.AppendJSONString(b, rec.Method)
	if rec.Skill != "" {
		b = append(b, `,"skill":`...)
		b = protocol.AppendJSONString(b, rec.Skill)
	}
	b = append(b, `,"outcome":`...)
	b = protocol.AppendJSONString(b, rec.Outcome)
	if rec.Code != 0 {
		b = append(b, `,"code":`...)
		b = strconv.AppendInt(b, int64(rec.Code), 10)
	}
	b = append(b, `,"duration_ms":`...)
	b = appendJSONFloat(b, rec.DurationMS)
	if rec.Remote != "" {
		b = append(b, `,"remote":`...)
		b = protocol.AppendJSONString(b, rec.Remote)
	}
	if rec.Threat != "" {
		b = append(b, `,"threat":`...)
		b = protocol.AppendJSONString(b, rec.Threat)
	}
	if len(rec.Findings) > 0 {
		b = append(b, `,"findings":[`...)
		for i, f := range rec.Findings {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"vector":`...)
			b = protocol.AppendJSONString(b, f.Vector)
			b = append(b, `,"level":`...)
			b = protocol.AppendJSONString(b, f.Level)
			if f.Field != "" {
				b = append(b, `,"field":`...)
				b = protocol.AppendJSONString(b, f.Field)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if rec.Trace != "" {
		b = append(b, `,"trace":`...)
		b = protocol.AppendJSONString(b, rec.Trace)
	}
	if rec.Span != "" {
		b = append(b, `,"span":`...)
		b = protocol.AppendJSONString(b, rec.Span)
	}
	return append(b, "}\n"...), nil
}

// appendJSONFloat appends f, a finite number, as encoding/json writes a
// float64.
func appendJSONFloat(b []byte, f float64) []byte {
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		q, _ := json.Marshal(f) // finite: always encodes
		return append(b, q...)
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

// openAudit opens audit.jsonl for appending and learns its size. Called by
// Open, and under auditMu.
func (s *Store) openAudit() error {
	f, err := os.OpenFile(filepath.Join(s.dir, auditName), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("store: open %s: %w", auditName, err)
	}
	st, err := f.Stat()
	if err != nil {
		return errors.Join(fmt.Errorf("store: open %s: %w", auditName, err), f.Close())
	}
	s.audit, s.auditSize = f, st.Size()
	return nil
}

// rotateAudit fsyncs and closes audit.jsonl, shifts audit.jsonl.N to .N+1
// (removing the one beyond auditKeep), renames audit.jsonl to .1 and opens
// a fresh one. Called under auditMu with s.audit open. When the current
// file cannot be renamed it is kept and appended to; when the fresh one
// cannot be opened, s.audit is left nil and the next Audit tries again.
func (s *Store) rotateAudit() error {
	base := filepath.Join(s.dir, auditName)
	errs := []error{s.audit.Sync(), s.audit.Close()}
	s.audit = nil
	if s.auditKeep == 0 {
		errs = append(errs, os.Remove(base))
	} else {
		if err := os.Remove(fmt.Sprintf("%s.%d", base, s.auditKeep)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		for i := s.auditKeep - 1; i >= 1; i-- {
			if err := os.Rename(fmt.Sprintf("%s.%d", base, i), fmt.Sprintf("%s.%d", base, i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		errs = append(errs, os.Rename(base, base+".1"))
	}
	if err := s.openAudit(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: audit: rotate: %w", err)
	}
	return nil
}
