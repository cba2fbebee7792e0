package skills

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// pingRef is ping's result as it was before decodeArgs and appendResult:
// the arguments decoded into `any`, the result encoded by json.Marshal.
func pingRef(t *testing.T, args []byte, now time.Time) ([]byte, bool) {
	t.Helper()
	var in struct {
		Payload any `json:"payload,omitempty"`
	}
	if protocol.Unmarshal(args, &in) != nil {
		return nil, false
	}
	out, err := json.Marshal(PingResult{Pong: true, PeerID: "12D3KooWPeer", TimeUnixMS: now.UnixMilli(), Payload: in.Payload})
	if err != nil {
		t.Fatal(err)
	}
	return out, true
}

// pingSeeds are ping arguments decodeArgs takes in place and ones it
// leaves to the decoder.
var pingSeeds = []string{
	`{"payload":"` + strings.Repeat("x", 1024) + `"}`,
	`{}`,
	`{"payload":null}`,
	`{"payload":""}`,
	`{ "payload" : "a b" }`,
	`{"payload":"x","payload":"y"}`,
	`{"\u0070ayload":"esc name"}`,
	`{"payload":"<html> & \"quotes\""}`,
	`{"payload":"caf\u00e9 é"}`,
	`{"payload":{"b":1,"a":[1.50,2e3]}}`,
	`{"payload":12345678901234567890}`,
	`{"payload":true}`,
	`{"payload":"y","payload":{"z":1}}`,
	`{"Payload":"case"}`,
}

// FuzzPing: ping's result through Registry.Call (and AppendCall) is byte
// for byte what decoding its arguments into `any` and json.Marshal of the
// result give, whichever way the arguments were read.
func FuzzPing(f *testing.F) {
	for _, s := range pingSeeds {
		f.Add([]byte(s))
	}
	now := time.UnixMilli(1_700_000_000_123)
	r := NewRegistry(nil)
	RegisterStandard(r, Deps{PeerID: "12D3KooWPeer", Now: func() time.Time { return now }})
	f.Fuzz(func(t *testing.T, args []byte) {
		if !protocol.ValidJSON(args) {
			return
		}
		want, ok := pingRef(t, args, now)
		got, err := r.Call(context.Background(), "ping", args)
		if !ok || err != nil {
			return // refused by the schema or the decoder: not this test's
		}
		if string(got) != string(want) {
			t.Fatalf("ping(%s) = %s, want %s", args, got, want)
		}
		appended, err := r.AppendCall(context.Background(), []byte("prefix "), "ping", args)
		if err != nil || string(appended) != "prefix "+string(want) {
			t.Fatalf("AppendCall ping(%s) = %s, %v; want the prefix and %s", args, appended, err, want)
		}
	})
}

// TestPingInPlace: the ordinary shapes of ping's arguments are read in
// place (else FuzzPing would test a dead path).
func TestPingInPlace(t *testing.T) {
	for _, s := range pingSeeds[:6] {
		var a PingArgs
		if !a.decodeArgs([]byte(s)) {
			t.Errorf("decodeArgs left %s to the decoder", s)
		}
	}
	for _, s := range pingSeeds[7:] {
		var a PingArgs
		if a.decodeArgs([]byte(s)) {
			t.Errorf("decodeArgs took %s, which is the decoder's", s)
		}
	}
}

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
// json.Marshal encodes, raw results and results that write themselves,
// and leaves dst as it was on an error.
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
