package store

import (
	"encoding/json"
	"fmt"
	"net"
	"time"
)

// AuditRecord is one line of the audit log, one per call.
type AuditRecord struct {
	// Time is when the call started; Audit fills a zero Time with now.
	Time time.Time `json:"time"`
	// Caller is the caller's identity: a PeerID, or the edge's session identity.
	Caller string `json:"caller"`
	// Via is how the call arrived: "mesh" or "http".
	Via string `json:"via,omitempty"`
	// Method is the protocol method called.
	Method string `json:"method"`
	// Skill is the skill run, when the method runs one.
	Skill string `json:"skill,omitempty"`
	// Outcome is "ok" or "error".
	Outcome string `json:"outcome"`
	// Code is the error code when Outcome is "error".
	Code int `json:"code,omitempty"`
	// DurationMS is how long the call took, in milliseconds.
	DurationMS float64 `json:"duration_ms"`
	// Remote is the caller's network address, when known.
	Remote string `json:"remote,omitempty"`
}

// Audit appends rec to <data-dir>/audit.jsonl as one JSON line. The line is
// built in one buffer and written with one write call under Store.auditMu on
// a file opened O_APPEND, so concurrent callers never interleave or leave
// partial lines. Lines are not fsynced one by one; Close fsyncs. A marshal
// or write error is returned; after Close the error wraps net.ErrClosed.
func (s *Store) Audit(rec AuditRecord) error {
	if rec.Time.IsZero() {
		rec.Time = time.Now().UTC()
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("store: audit: %w", err)
	}
	line = append(line, '\n')
	s.auditMu.Lock()
	defer s.auditMu.Unlock()
	if s.audit == nil {
		return fmt.Errorf("store: audit: %w", net.ErrClosed)
	}
	if _, err := s.audit.Write(line); err != nil {
		return fmt.Errorf("store: audit: %w", err)
	}
	return nil
}
