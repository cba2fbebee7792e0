package rest_test

import (
	"context"
	"testing"

	"github.com/mcpv2/mcpv2/edge/rest"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/store"
)

// auditCount is how many audit lines the rig's node holds.
func (r *rig) auditCount(t *testing.T) int {
	t.Helper()
	recs, _, err := store.TailAudit(context.Background(), r.n.DataDir(), store.AuditFilter{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

// TestOneAuditLinePerRequest checks that every REST request writes one
// audit line, whether the node's method (which audits what it does) or
// the face (which audits what never reached it) writes it: the routes to
// the node's agent registry, refused and not, the scanner's GET and POST,
// the audit tail.
func TestOneAuditLinePerRequest(t *testing.T) {
	r := newRigWith(t, func(c *node.Config) { c.PolicyFile = writePolicy(t, `{"grants":{"http":["scan"]}}`) },
		func(n *node.Node) []rest.Option { return []rest.Option{rest.WithAgents(n)} })
	sec := r.secretToken()
	for _, c := range []struct {
		method, path, tok string
		body              any
		status            int
	}{
		{"POST", "/api/v1/a2a/discover", "", map[string]any{"urls": []string{"http://127.0.0.1:1"}}, 403},  // not granted
		{"POST", "/api/v1/a2a/discover", sec, map[string]any{"urls": []string{"http://127.0.0.1:1"}}, 200}, // the URL fails: its error
		{"POST", "/api/v1/a2a/discover", sec, map[string]any{"urls": []string{}}, 400},
		{"GET", "/api/v1/a2a/agents", "", nil, 403},
		{"GET", "/api/v1/a2a/agents", sec, nil, 200},
		{"GET", "/api/v1/mcp/security/scan", "", nil, 200},
		{"POST", "/api/v1/mcp/security/scan", "", map[string]any{"text": "hello"}, 200},
		{"GET", "/api/v1/mcp/security/audit?limit=5", "", nil, 403},
		{"GET", "/api/v1/mcp/security/audit?limit=5", sec, nil, 200},
		{"GET", "/api/v1/mcp/tools", "", nil, 200},
	} {
		before := r.auditCount(t)
		a := r.do(t, c.method, c.path, c.tok, c.body)
		if a.status != c.status {
			t.Errorf("%s %s: status %d, want %d: %.300s", c.method, c.path, a.status, c.status, a.body)
		}
		if n := r.auditCount(t) - before; n != 1 {
			t.Errorf("%s %s (%d): %d audit lines, want 1", c.method, c.path, a.status, n)
		}
	}
}
