package skills

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

func BenchmarkRegistryCallPing(b *testing.B) {
	r := NewRegistry(nil)
	RegisterStandard(r, Deps{PeerID: "12D3KooWDGWf3A9cQHJfxnotujMP8625N3TAY5t7dBodDwwrPjBZ"})
	args := json.RawMessage(`{"payload":"` + strings.Repeat("x", 1024) + `"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Call(ctx, "ping", args); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAppendCallIsCall: AppendCall appends what Call returns, for results
// json.Marshal encodes and raw results, and leaves dst as it was on an error.
func TestAppendCallIsCall(t *testing.T) {
	r := NewRegistry(nil)
	RegisterStandard(r, Deps{PeerID: "12D3KooWPeer", Now: func() time.Time { return time.UnixMilli(5) }})
	Add(r, "typed", "", nil, func(context.Context, struct{}) (map[string]string, error) {
		return map[string]string{"b": "<2>", "a": "1"}, nil
	})
	if err := r.AddRaw(protocol.SkillDescriptor{Name: "raw"}, func(context.Context, json.RawMessage) (any, error) {
		return json.RawMessage(`[1, 2]`), nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct{ skill, args string }{
		{"typed", `{}`}, {"raw", `{}`}, {"ping", `{"payload":"p"}`}, {"ping", `{"payload":{"x":[1]}}`},
	} {
		want, err := r.Call(ctx, c.skill, json.RawMessage(c.args))
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.AppendCall(ctx, []byte("dst:"), c.skill, json.RawMessage(c.args))
		if err != nil || string(got) != "dst:"+string(want) {
			t.Errorf("AppendCall(%s) = %q, %v; want dst:%s", c.skill, got, err, want)
		}
	}
	got, err := r.AppendCall(ctx, []byte("dst:"), "ping", json.RawMessage(`{"extra":1}`))
	if err == nil || string(got) != "dst:" {
		t.Errorf("AppendCall with arguments the schema refuses = %q, %v; want dst: as it was and an error", got, err)
	}
}
