package node

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
)

// SecurityAuditSkill is the pseudo-skill of the REST face's GET
// /api/v1/mcp/security/audit: a secret holder, or a caller the policy
// (or its key's --grant) grants this name, may read the audit log; a grant
// of "*" does not reach it (grantsSkill), as the log names every caller and
// what they ran. The registry has no skill of
// that name; the policy knows it (UnknownGrants does not warn).
const SecurityAuditSkill = "security_audit"

// MaxAuditTail is the most audit lines AuditTail returns.
const MaxAuditTail = 1000

// restLimit applies the node's per-caller rate limit and the policy's
// limit of skill ("": none) to one REST call of c.
func (n *Node) restLimit(c protocol.Caller, skill string, now time.Time) *protocol.Error {
	if ok, wait := n.limits.allow(c.ID, 1, now); !ok {
		return &protocol.Error{Code: protocol.CodeRateLimited, Message: fmt.Sprintf("rate limited: retry after %dms", wait.Milliseconds()),
			Data: map[string]any{"retry_after_ms": wait.Milliseconds()}}
	}
	if skill == "" {
		return nil
	}
	if ok, wait := n.policy.allowSkill(c.ID, skill, now); !ok {
		return &protocol.Error{Code: protocol.CodeRateLimited,
			Message: fmt.Sprintf("rate limited: this node's policy limits %q per caller; retry after %dms", skill, wait.Milliseconds()),
			Data:    map[string]any{"retry_after_ms": wait.Milliseconds(), "skill": skill}}
	}
	return nil
}

// AuditTail returns the last limit lines of the node's audit log (1 to
// MaxAuditTail; audit.jsonl and its rotations), oldest first, as a JSON
// array of audit records, for GET /api/v1/mcp/security/audit. Only a
// secret holder, or a caller granted SecurityAuditSkill by name (not by
// "*"), may read it (-32009 otherwise); within the node's per-caller rate limit; one
// audit line.
func (n *Node) AuditTail(ctx context.Context, c protocol.Caller, limit int) (out json.RawMessage, err error) {
	start := time.Now()
	var perr *protocol.Error
	defer func() { n.audit(ctx, c, "rest security/audit", SecurityAuditSkill, perr, start) }()
	if limit < 1 || limit > MaxAuditTail {
		perr = protocol.Errorf(protocol.CodeInvalidParams, "invalid params: limit %d: want 1 to %d", limit, MaxAuditTail)
		return nil, perr
	}
	if perr = n.grant(c, "", protocol.PurposeRPC, SecurityAuditSkill); perr != nil {
		return nil, perr
	}
	if perr = n.restLimit(c, SecurityAuditSkill, start); perr != nil {
		return nil, perr
	}
	recs, _, terr := store.TailAudit(ctx, n.cfg.DataDir, store.AuditFilter{}, limit)
	if terr != nil {
		n.log.Error("rest: read audit log", "err", terr)
		perr = protocol.Errorf(protocol.CodeInternal, "internal error: the audit log could not be read")
		return nil, perr
	}
	if recs == nil {
		recs = []store.AuditRecord{}
	}
	b, merr := json.Marshal(recs)
	if merr != nil {
		perr = protocol.Errorf(protocol.CodeInternal, "internal error: the audit log could not be encoded")
		return nil, perr
	}
	return b, nil
}
