package node

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/protocol"
)

// TestStarGrantSkipsPseudoSkills checks that "*" — in a policy grant to a
// PeerID, "via:", "http", "*", a key or a scope, and in a key's own
// --grant — opens every skill but none of the pseudo-skills (the audit
// log, agent discovery and listing, private resources): each must be named.
func TestStarGrantSkipsPseudoSkills(t *testing.T) {
	peer := "12D3KooWGRUVh2jVdvyEtjWrDJeGaYmcV5JwgeR3mAU7zmG1oCbV"
	star := map[string][]string{peer: {"*"}, protocol.PolicyVia + peer: {"*"}, "http": {"*"}, "*": {"*"},
		"key:k": {"*"}, "scope:all": {"*"}}
	n := newTestNode(t, func(c *Config) { c.PolicyFile = writePolicy(t, star) })
	callers := []Caller{
		{ID: peer, Via: "mesh", Kind: protocol.CallerPeer},
		{ID: protocol.PolicyVia + peer, Via: "mesh", Kind: protocol.CallerForwarded},
		{ID: "ip:192.0.2.1", Via: "rest", Kind: protocol.CallerAnonymous},
		{ID: "key:k", Via: "rest", Kind: protocol.CallerKey, Grants: []string{"*"}},
		{ID: "key:own", Via: "rest", Kind: protocol.CallerKey, Grants: []string{"*"}},
		{ID: "oidc:alice", Via: "rest", Kind: protocol.CallerOIDC, Principals: []string{"scope:all"}},
	}
	if len(pseudoSkills) != 4 {
		t.Fatalf("pseudoSkills = %v: add the new one's entry point below", pseudoSkills)
	}
	for _, c := range callers {
		if perr := n.grant(c, "", protocol.PurposeRPC, "negotiate"); perr != nil {
			t.Errorf("%s: \"*\" no longer grants a skill: %v", c.ID, perr)
		}
		for _, ps := range pseudoSkills {
			if perr := n.grant(c, "", protocol.PurposeRPC, ps); perr == nil || perr.Code != protocol.CodeNotPermitted {
				t.Errorf("%s: \"*\" grants pseudo-skill %q: %v", c.ID, ps, perr)
			}
		}
		// Through the entry points themselves.
		if _, err := n.AuditTail(context.Background(), c, 5); err == nil {
			t.Errorf("%s: reads the audit log through \"*\"", c.ID)
		}
		if _, err := n.DiscoverAgents(context.Background(), c, []string{"https://agent.example"}); err == nil {
			t.Errorf("%s: discovers agents through \"*\"", c.ID)
		}
		if _, err := n.Agents(context.Background(), c); err == nil {
			t.Errorf("%s: lists agents through \"*\"", c.ID)
		}
		if perr := n.mayRead(c, &resource{}); perr == nil {
			t.Errorf("%s: reads a private resource through \"*\"", c.ID)
		}
	}
	// Named, each is granted; a secret holder needs no grant.
	named := map[string][]string{peer: slices.Clone(pseudoSkills), "http": slices.Clone(pseudoSkills)}
	n2 := newTestNode(t, func(c *Config) { c.PolicyFile = writePolicy(t, named) })
	for _, c := range []Caller{callers[0], callers[2], {ID: "key:named", Kind: protocol.CallerKey, Grants: pseudoSkills},
		{ID: "local", Via: "local", Kind: protocol.CallerSecretHolder, Owner: protocol.OwnerSecret}} {
		for _, ps := range pseudoSkills {
			if perr := n2.grant(c, "", protocol.PurposeRPC, ps); perr != nil {
				t.Errorf("%s: pseudo-skill %q granted by name is refused: %v", c.ID, ps, perr)
			}
		}
	}
}

// TestWarnAnonymousPseudoGrants checks that a node whose policy grants
// anonymous callers ("http" or "*") a pseudo-skill says so at start, one
// WARN naming them, and that one granting "*" (which does not reach them)
// or only PeerIDs does not.
func TestWarnAnonymousPseudoGrants(t *testing.T) {
	peer := "12D3KooWGRUVh2jVdvyEtjWrDJeGaYmcV5JwgeR3mAU7zmG1oCbV"
	for _, c := range []struct {
		grants map[string][]string
		want   []string // in the warning; nil: none
	}{
		{map[string][]string{"http": {"scan", "security_audit", "discover_agents"}}, []string{"security_audit", "discover_agents", "grant=http", "public"}},
		{map[string][]string{"*": {"list_agents"}}, []string{"list_agents", "grant=*"}},
		{map[string][]string{"http": {"*"}, "*": {"*"}}, nil},
		{map[string][]string{peer: {"security_audit"}}, nil},
	} {
		var buf bytes.Buffer
		newTestNode(t, func(cfg *Config) {
			cfg.PolicyFile = writePolicy(t, c.grants)
			cfg.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
		})
		var warn string
		for line := range strings.Lines(buf.String()) {
			if strings.Contains(line, "anonymous") && strings.Contains(line, "level=WARN") {
				warn += line
			}
		}
		if c.want == nil {
			if warn != "" {
				t.Errorf("%v: warned: %s", c.grants, warn)
			}
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(warn, w) {
				t.Errorf("%v: the warning does not name %s: %q (log %s)", c.grants, w, warn, buf.String())
			}
		}
	}
}
