package skills

import (
	"context"
	"strings"
	"testing"
)

// TestReadOnlyStandard: the standard skills without side effects (and
// scan) declare it, the others do not; ReadOnly() marks a typed skill and
// leaves its schema options working.
func TestReadOnlyStandard(t *testing.T) {
	r := NewRegistry(nil)
	RegisterStandard(r, Deps{PeerID: "12D3KooWPeer"})
	RegisterScan(r, func(context.Context, string) (func(), error) { return func() {}, nil })
	Add(r, "typed_ro", "", nil, func(context.Context, struct {
		K string `json:"k"`
	}) (string, error) {
		return "", nil
	}, enumProp("k", "a"), ReadOnly())
	want := map[string]bool{"ping": true, "list_files": true, "get_skill": true, "translate_history": true, "read_file": true, ScanSkill: true, "typed_ro": true}
	for _, d := range r.List() {
		if d.ReadOnly != want[d.Name] {
			t.Errorf("%s: ReadOnly %v, want %v", d.Name, d.ReadOnly, want[d.Name])
		}
	}
	if d, _ := r.Lookup("typed_ro"); !strings.Contains(string(d.InputSchema), `"enum":["a"]`) {
		t.Errorf("typed_ro schema lost its option: %s", d.InputSchema)
	}
}
