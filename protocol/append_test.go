package protocol

import (
	"encoding/json"
	"testing"
)

// TestAppendSlotIsMarshal holds AppendSlot to json.Marshal of the same
// slot (compact params without HTML characters, which encoding/json would
// escape and AppendSlot writes as they are), and AppendCallSlot to
// AppendSlot of the params AppendCallParams builds.
func TestAppendSlotIsMarshal(t *testing.T) {
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, s := range []Slot{
		{JSONRPC: "2.0", ID: json.RawMessage("7"), Method: MethodToolsCall},
		{JSONRPC: "2.0", Method: "notify", Params: json.RawMessage(`{"a":[1,"x y"]}`)},
		{JSONRPC: "2.0", ID: json.RawMessage(`"x"`), Method: "m<é>", Context: &SlotContext{}},
		{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: MethodToolsList, Context: &SlotContext{Provider: "claude", Session: "s.1", Forwarded: "peer", Traceparent: tp}},
		{JSONRPC: "2.0", ID: json.RawMessage("2"), Method: MethodToolsCall, Context: &SlotContext{Traceparent: tp}},
	} {
		want, err := json.Marshal(&s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendSlot(nil, &s); string(got) != string(want) {
			t.Errorf("AppendSlot = %s\njson.Marshal = %s", got, want)
		}
		for _, args := range []json.RawMessage{nil, json.RawMessage(`{"payload":"x"}`)} {
			withParams := s
			withParams.Params = AppendCallParams(nil, "ping", args)
			want := AppendSlot(nil, &withParams)
			if got := AppendCallSlot([]byte("prefix"), &s, "ping", args); string(got) != "prefix"+string(want) {
				t.Errorf("AppendCallSlot = %s\nAppendSlot = %s", got, want)
			}
		}
	}
}
