package node

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpv2/mcpv2/node/guard"
	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
)

// The pseudo-skills of the REST face's security routes (edge/rest): names
// a policy may grant or limit like a skill, though the registry has no
// skill of that name. The policy knows them (UnknownGrants does not warn).
const (
	// SecurityScanSkill is POST /api/v1/mcp/security/scan: open to every
	// caller, limited by the node's per-caller rate and by a policy limit
	// of this name when there is one.
	SecurityScanSkill = "security_scan"
	// SecurityAuditSkill is GET /api/v1/mcp/security/audit: a secret
	// holder, or a caller the policy grants this name.
	SecurityAuditSkill = "security_audit"
)

// MaxAuditTail is the most audit lines AuditTail returns.
const MaxAuditTail = 1000

// SecurityScan runs the prompt-injection guard over text for c (the REST
// face's POST /api/v1/mcp/security/scan) and returns guard.Result as JSON:
// is_safe, threat_level, findings (vector, level, match) and
// sanitized_input. Every caller may scan, within the node's per-caller
// rate limit and the policy's limit of SecurityScanSkill (-32005 past
// either); the scan waits for one of the guard's slots, as the scan skill
// does. A text longer than guard.MaxScan is -32602. One audit line names
// the call ("rest security/scan"). Safe for concurrent use.
func (n *Node) SecurityScan(ctx context.Context, c protocol.Caller, text string) (out json.RawMessage, err error) {
	start := time.Now()
	const method = "rest security/scan"
	var perr *protocol.Error
	defer func() { n.audit(ctx, c, method, SecurityScanSkill, perr, start) }()
	if perr = n.restLimit(c, SecurityScanSkill, start); perr != nil {
		return nil, perr
	}
	if len(text) > guard.MaxScan {
		perr = protocol.Errorf(protocol.CodeInvalidParams, "invalid params: text is %d bytes; the scanner takes at most %d", len(text), guard.MaxScan)
		return nil, perr
	}
	release, perr := n.scanSlot(ctx, SecurityScanSkill)
	if perr != nil {
		return nil, perr
	}
	defer release()
	b, merr := json.Marshal(guard.Scan(text))
	if merr != nil {
		perr = protocol.Errorf(protocol.CodeInternal, "internal error: the scan result could not be encoded")
		return nil, perr
	}
	return b, nil
}

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

// scannerVectors describes each vector the guard reports, in the order
// ScannerInfo lists them.
var scannerVectors = []struct{ vector, what string }{
	{guard.VectorInstructionOverride, "instructions that tell the model to ignore, forget or replace the ones it was given"},
	{guard.VectorPersonaHijacking, "role-play and persona switches that take the model out of its role (DAN, developer mode, 'you are now …')"},
	{guard.VectorPromptExtraction, "requests to reveal, repeat or print the system prompt or hidden instructions"},
	{guard.VectorXMLTagInjection, "fake system, assistant or tool tags and chat-template tokens that forge a turn of the conversation"},
	{guard.VectorMarkdownDelimiter, "markdown headings, fences and delimiter lines that pose as a new section of instructions"},
	{guard.VectorEncoding, "payloads hidden in base64, hex, escapes, entities, Unicode tags or invisible characters (decoded and scanned)"},
	{guard.VectorDataExfiltration, "instructions to send data, secrets or the conversation to a URL, address or tool"},
	{guard.VectorPathTraversal, "../ sequences and encoded forms that climb out of a directory (kind path)"},
	{guard.VectorSensitivePath, "paths of secrets and system files: /etc/shadow, ~/.ssh, .env, key files (kind path)"},
	{guard.VectorSQLInjection, "SQL injection and destructive statements: tautologies, UNION SELECT, stacked DROP/DELETE, comments (kind sql)"},
	{guard.VectorTruncated, "the text was longer than the scan bound or spent the work budget: part of it was not scanned by every rule"},
}

// ScannerInfo describes the guard for c (GET /api/v1/mcp/security/scan):
// its capabilities (the bound of one scan, the sanitizer, the kinds of
// text) and each attack vector with its threat level. Open to every
// caller, within the node's per-caller rate limit; one audit line.
func (n *Node) ScannerInfo(ctx context.Context, c protocol.Caller) (out json.RawMessage, err error) {
	start := time.Now()
	var perr *protocol.Error
	defer func() { n.audit(ctx, c, "rest security/scanner", "", perr, start) }()
	if perr = n.restLimit(c, "", start); perr != nil {
		return nil, perr
	}
	type vector struct {
		Name        string `json:"name"`
		ThreatLevel string `json:"threat_level"`
		Description string `json:"description"`
	}
	vs := make([]vector, 0, len(scannerVectors))
	for _, v := range scannerVectors {
		vs = append(vs, vector{Name: v.vector, ThreatLevel: guard.VectorLevel(v.vector).String(), Description: v.what})
	}
	b, merr := json.Marshal(map[string]any{
		"scanner": "mcpv2 prompt-injection guard (node/guard; docs/guard.md)",
		"capabilities": map[string]any{
			"max_scan_bytes": guard.MaxScan,
			"max_match":      guard.MaxMatch,
			"kinds":          []string{"prompt", "path", "sql"},
			"decodes":        []string{"base64", "hex", "url and html escapes", "unicode tags", "zero-width and bidi characters"},
			"sanitizes":      "each matched span becomes [removed: <vector>]; invisible characters are dropped",
			"threat_levels":  []string{"none", "low", "medium", "high", "critical"},
			"screens_calls":  "the arguments of every tool call are scanned by the node before the tool runs",
		},
		"attack_vectors": vs,
	})
	if merr != nil {
		perr = protocol.Errorf(protocol.CodeInternal, "internal error: the scanner's description could not be encoded")
		return nil, perr
	}
	return b, nil
}

// AuditTail returns the last limit lines of the node's audit log (1 to
// MaxAuditTail; audit.jsonl and its rotations), oldest first, as a JSON
// array of audit records, for GET /api/v1/mcp/security/audit. Only a
// secret holder, or a caller the policy grants SecurityAuditSkill, may
// read it (-32009 otherwise); within the node's per-caller rate limit; one
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
