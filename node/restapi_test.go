package node

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/protocol"
)

// TestRESTAudit: the REST face's audit route reads the log for a secret
// holder or a security_audit grantee only, each read audited; and the
// policy knows the pseudo-skill. (The scan methods are node/scan_api.go's,
// tested there.)
func TestRESTAudit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(p, []byte(`{"grants":{"key:auditor":["security_audit"]},"limits":{"security_audit":"60/m"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	n := newTestNode(t, func(c *Config) { c.PolicyFile = p })
	ctx := context.Background()
	anon := protocol.Caller{ID: "ip:10.0.0.1", Via: "rest", Kind: protocol.CallerAnonymous}
	auditor := protocol.Caller{ID: "key:auditor", Via: "rest", Kind: protocol.CallerKey}
	holder := protocol.Caller{ID: "ip:10.0.0.2", Via: "rest", Kind: protocol.CallerSecretHolder, Owner: protocol.OwnerSecret}

	var perr *protocol.Error
	if _, err := n.AuditTail(ctx, anon, 5); !errors.As(err, &perr) || perr.Code != protocol.CodeNotPermitted {
		t.Fatalf("an anonymous caller read the audit log: %v", err)
	}
	for _, c := range []protocol.Caller{auditor, holder} {
		out, err := n.AuditTail(ctx, c, 1)
		var lines []map[string]any
		if err != nil || json.Unmarshal(out, &lines) != nil || len(lines) != 1 {
			t.Fatalf("%s: audit: %s %v", c.ID, out, err)
		}
	}
	if _, err := n.AuditTail(ctx, holder, MaxAuditTail+1); !errors.As(err, &perr) || perr.Code != protocol.CodeInvalidParams {
		t.Fatalf("limit past the cap: %v", err)
	}
	all := readAudit(t, n)
	var methods []string
	for _, l := range all {
		if m, _ := l["method"].(string); strings.HasPrefix(m, "rest ") {
			methods = append(methods, m+" "+l["outcome"].(string))
		}
	}
	want := "rest security/audit error,rest security/audit ok,rest security/audit ok,rest security/audit error"
	if strings.Join(methods, ",") != want {
		t.Fatalf("audit lines:\n%s\nwant\n%s", strings.Join(methods, ","), want)
	}
	ws, err := PolicyWarnings(t.TempDir(), p, "", false)
	if err != nil || len(ws) != 0 {
		t.Fatalf("the policy warns of the REST face's pseudo-skill: %v %v", ws, err)
	}
}
