package a2a

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeMessage: any bytes a client sends as a message are decoded or
// refused with a reason, never a panic; a decoded message re-encodes in
// both versions, and what it asks (callsOf) is a call or a reason.
func FuzzDecodeMessage(f *testing.F) {
	for _, s := range []string{
		`{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}`,
		`{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"data","data":{"skill":"ping","arguments":{}}}]}`,
		`{"messageId":"m","role":"user","parts":[{"kind":"file","file":{"name":"a","bytes":"aGk="}}]}`,
		`{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"aGk=","filename":"a.bin"},{"url":"http://x"}]}`,
		`{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a","data":{}}]}`,
		`{"messageId":"","role":"x","parts":null}`,
		`[]`, `null`, `{"parts":[1,2,3]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeMessage(json.RawMessage(data))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a reason")
			}
			return
		}
		if _, err := json.Marshal(m.v1()); err != nil {
			t.Fatalf("v1.0 form: %v", err)
		}
		if _, err := json.Marshal(m.v03()); err != nil {
			t.Fatalf("v0.3 form: %v", err)
		}
		calls, rerr := callsOf(m, nil)
		if rerr == nil && len(calls) == 0 {
			t.Fatal("neither a call nor a reason")
		}
	})
}

// FuzzVerifyCard: any bytes are a card that verifies or a reason.
func FuzzVerifyCard(f *testing.F) {
	f.Add([]byte(`{"name":"x","signatures":[{"protected":"eyJhbGciOiJFZERTQSIsImtpZCI6IjEyRDNLb29XIiwidHlwIjoiSk9TRSJ9","signature":"AAAA"}]}`))
	f.Add([]byte(`{"signatures":[{}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := VerifyCard(data); err == nil {
			t.Fatalf("a card no key signed verified: %s", data)
		}
	})
}
