package skills

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcpv2/mcpv2/protocol"
)

// TestNotFoundDidYouMean (issue 26 item 3): the one "no such skill" error,
// from Call and from get_skill, suggests the nearest skill when one is a
// slip away, and says where the names are when none is.
func TestNotFoundDidYouMean(t *testing.T) {
	r := NewRegistry(nil)
	RegisterStandard(r, Deps{PeerID: "p"})
	for _, tc := range []struct{ name, want string }{
		{"pnig", `skill "pnig" not found (did you mean "ping"?)`},
		{"translat_history", `skill "translat_history" not found (did you mean "translate_history"?)`},
		{"Ping", `skill "Ping" not found (did you mean "ping"?)`},
		{"zzzzzzzz", `skill "zzzzzzzz" not found: tools/list names this node's skills`},
	} {
		_, err := r.Call(context.Background(), tc.name, nil)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeSkillNotFound || pe.Message != tc.want {
			t.Errorf("Call(%q): %v, want -32002 %q", tc.name, err, tc.want)
		}
		args, _ := json.Marshal(map[string]string{"name": tc.name})
		_, err = r.Call(context.Background(), "get_skill", args)
		if !errors.As(err, &pe) || pe.Code != protocol.CodeSkillNotFound || pe.Message != tc.want {
			t.Errorf("get_skill %q: %v, want -32002 %q", tc.name, err, tc.want)
		}
	}
}
