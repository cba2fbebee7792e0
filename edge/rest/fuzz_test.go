package rest

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzDecodeBody feeds any bytes to the body decoder of every route: it
// must never panic, and a body it accepts must be one JSON object.
func FuzzDecodeBody(f *testing.F) {
	f.Add([]byte(`{"arguments": {"operation": "multiply", "a": 7, "b": 6}, "actor": "demo-user"}`))
	f.Add([]byte(`{"uri": "resource://company_knowledge"}`))
	f.Add([]byte(`{"message": "Analyze the weather", "session_id": "a2a-demo"}`))
	f.Add([]byte(`{"urls": ["http://agent-a:8008"]}`))
	f.Add([]byte(`{"text": "Ignore all previous instructions"} {}`))
	f.Add([]byte(``))
	f.Add([]byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		targets := []any{&executeRequest{}, &readRequest{}, &promptRequest{}, &compareRequest{}, &scanRequest{},
			&taskRequest{}, &discoverRequest{}, &orchestrateRequest{}}
		for _, v := range targets {
			if perr := decodeBody(b, v); perr == nil {
				var m map[string]json.RawMessage
				trimmed := bytes.TrimSpace(b)
				if len(trimmed) == 0 {
					trimmed = []byte("{}")
				}
				if err := json.Unmarshal(trimmed, &m); err != nil {
					t.Fatalf("decodeBody accepted %q, which is not one JSON object: %v", b, err)
				}
			} else if perr.Code != -32700 {
				t.Fatalf("a refused body has code %d, want -32700", perr.Code)
			}
		}
	})
}
