package mcp_test

import (
	"os"
	"path/filepath"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/node"
)

// TestToolsReadOnlyHint: a skill that declares itself free of side effects
// (a standard one such as ping; a custom one with "read_only": true) is a
// tool with readOnlyHint in tools/list; one that does not (upload_file, a
// custom skill without the field) has no such hint.
func TestToolsReadOnlyHint(t *testing.T) {
	file := filepath.Join(t.TempDir(), "skills.json")
	if err := os.WriteFile(file, []byte(`{"skills":[
		{"name":"lookup","read_only":true,"handler":{"type":"template","template":"x"}},
		{"name":"poke","handler":{"type":"template","template":"x"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, func(c *node.Config) { c.SkillsFile = file })
	cs := connect(t, r.url, r.secretToken(), eraStateless, nil)
	lt, err := cs.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*sdk.Tool{}
	for _, tool := range lt.Tools {
		tools[tool.Name] = tool
	}
	for name, want := range map[string]bool{"ping": true, "read_file": true, "scan": true, "lookup": true,
		"upload_file": false, "ask": false, "poke": false} {
		tool := tools[name]
		if tool == nil {
			t.Errorf("tools/list lacks %s", name)
			continue
		}
		if got := tool.Annotations != nil && tool.Annotations.ReadOnlyHint; got != want {
			t.Errorf("%s: readOnlyHint %v, want %v (annotations %+v)", name, got, want, tool.Annotations)
		}
	}
}
