package node

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/protocol"
)

// TestCredentialGrants: an API key runs its own grants, the policy's
// "key:NAME" and "*" grants, never the "http" ones; an OpenID Connect
// caller runs what the policy grants its subject or a scope of its token.
// A policy with the new keys parses, and one with a bad key says which.
func TestCredentialGrants(t *testing.T) {
	policy := writePolicy(t, map[string][]string{
		"http":                []string{"list_files"},
		"*":                   []string{"negotiate"},
		"key:ci":              []string{"get_skill"},
		"oidc:alice":          []string{"translate_history"},
		"scope:mcpv2.files":   []string{"list_files"},
		"scope:mcpv2.payment": []string{"pay"},
	})
	n := newTestNode(t, func(c *Config) { c.PolicyFile = policy })
	call := func(c Caller, skill string) *protocol.Error {
		msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, skill)
		out, refused := n.Handle(context.Background(), c, []byte(msg))
		if refused != nil {
			return refused
		}
		if strings.Contains(string(out), `"code":-32009`) {
			return &protocol.Error{Code: protocol.CodeNotPermitted, Message: string(out)}
		}
		return nil
	}
	key := Caller{ID: "key:ci", Via: "http", Kind: protocol.CallerKey, Owner: "key:ci", Grants: []string{"ask"}}
	oidc := Caller{ID: "oidc:alice", Via: "http", Kind: protocol.CallerOIDC, Owner: "oidc:x:alice", Principals: []string{"scope:mcpv2.files"}}
	for _, c := range []struct {
		who   Caller
		skill string
		ok    bool
	}{
		{key, "ping", true},               // open
		{key, "ask", true},                // the key's --grant
		{key, "get_skill", true},          // the policy's key:ci
		{key, "negotiate", true},          // "*"
		{key, "list_files", false},        // "http" is not the key's
		{key, "upload_file", false},       // granted to nobody
		{oidc, "translate_history", true}, // its subject
		{oidc, "list_files", true},        // a scope of its token
		{oidc, "pay", false},              // a scope it does not carry
		{oidc, "ask", false},
		{Caller{ID: "key:other", Kind: protocol.CallerKey, Grants: []string{"*"}}, "upload_file", true}, // a key granted "*"
	} {
		perr := call(c.who, c.skill)
		if (perr == nil) != c.ok {
			t.Errorf("%s %s: %v, want allowed %v", c.who.ID, c.skill, perr, c.ok)
		}
		if perr != nil && !strings.Contains(perr.Message, "not granted skill") {
			t.Errorf("%s %s: the refusal does not say what is missing: %s", c.who.ID, c.skill, perr.Message)
		}
	}
	for _, bad := range []string{"key:", "key:a b", "key:" + strings.Repeat("k", 65), "oidc:", "scope:", "bearer:x"} {
		if _, err := ParsePolicy("p.json", []byte(`{"grants":{"`+bad+`":["ask"]}}`)); err == nil || !strings.Contains(err.Error(), "key:<NAME>") {
			t.Errorf("grant key %q: %v", bad, err)
		}
	}
	if !n.AnonymousGrants() {
		t.Error("AnonymousGrants: the policy grants \"http\" list_files")
	}
}
