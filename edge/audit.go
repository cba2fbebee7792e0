package edge

import (
	"context"
	"encoding/json"
	"errors"

	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// Limits of GET /mcpv2/audit.
const (
	defaultAuditLimit = 100
	maxAuditLimit     = 1000
)

// AuditSource is what GET /mcpv2/audit needs of a Backend; a Backend that
// does not implement it answers that endpoint 501.
type AuditSource interface {
	// AuditLog returns the matching audit lines, oldest first, each one JSON
	// object. An error wrapping a *protocol.Error (a bad outcome) is the
	// caller's; any other is the node's.
	AuditLog(ctx context.Context, q protocol.AuditQuery) ([]json.RawMessage, error)
}

// AuditAnswer is the body of a GET /mcpv2/audit answer.
type AuditAnswer struct {
	Lines []json.RawMessage `json:"lines"`
}

// audit serves GET /mcpv2/audit?limit=&since=&caller=&skill=&outcome=&trace= to
// secret holders only: the log names every caller and what they ran.
func (s *Server) audit(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	q := requestFrom(r.Context())
	if c.Kind != protocol.CallerSecretHolder {
		s.refuse(w, r, q, http.StatusForbidden, &protocol.Error{Code: protocol.CodeNotPermitted,
			Message: "not permitted: the audit log is served only to sessions minted with the node's --secret",
			Data:    map[string]string{"caller": c.Kind.String()}})
		return
	}
	src, ok := s.b.(AuditSource)
	if !ok {
		s.refuse(w, r, q, http.StatusNotImplemented, protocol.Errorf(protocol.CodeMethodNotFound, "audit: this node does not serve its audit log"))
		return
	}
	v := r.URL.Query()
	aq := protocol.AuditQuery{Caller: v.Get("caller"), Skill: v.Get("skill"), Outcome: v.Get("outcome"), Trace: v.Get("trace"), Limit: defaultAuditLimit}
	bad := func(format string, args ...any) {
		s.refuse(w, r, q, http.StatusBadRequest, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: "+format, args...))
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxAuditLimit {
			bad("limit must be an integer from 1 to %d", maxAuditLimit)
			return
		}
		aq.Limit = n
	}
	if since := v.Get("since"); since != "" {
		t, err := time.Parse(time.RFC3339, since)
		if err != nil {
			bad("since %q is not an RFC 3339 time (2026-12-01T10:00:00Z)", protocol.Clip(since, 60))
			return
		}
		aq.Since = t
	}
	for name, val := range map[string]string{"caller": aq.Caller, "skill": aq.Skill, "outcome": aq.Outcome, "trace": aq.Trace} {
		if len(val) > 256 || strings.ContainsAny(val, "\x00\n") {
			bad("%s: at most 256 bytes on one line", name)
			return
		}
	}
	lines, err := src.AuditLog(r.Context(), aq)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			s.refuse(w, r, q, ErrorStatus(pe), pe)
			return
		}
		s.log.Warn("audit log read failed", "err", err)
		s.refuse(w, r, q, http.StatusInternalServerError, protocol.Errorf(protocol.CodeInternal, "audit: the log could not be read"))
		return
	}
	if lines == nil {
		lines = []json.RawMessage{}
	}
	s.b.Audit(r.Context(), c, auditMethod(r), nil, q.start)
	writeJSON(w, http.StatusOK, AuditAnswer{Lines: lines})
}
