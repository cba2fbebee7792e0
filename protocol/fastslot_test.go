package protocol

import (
	"reflect"
	"strings"
	"testing"
)

// quickSeeds are slots and responses of the shapes quickSlot and
// quickResponse take, and of many they must leave to the decoder.
var quickSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping","arguments":{"payload":"` + strings.Repeat("x", 100) + `"}}}`,
	`{"jsonrpc":"2.0","id":"a\u0041","method":"tools/list"}`,
	`{ "jsonrpc" : "2.0" , "id" : -1.5e3 , "method" : "m" , "params" : [1,{"a":null}] , "x" : {"y":[true]} }`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{},"context":{"provider":"gemini","session":"cGF5.00ff","forwarded":"peer","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","other":[1]}}`,
	`{"jsonrpc":"2.0","id":3,"method":"x","context":{}}`,
	`{"jsonrpc":"2.0","method":"notify"}`,
	`{}`,
	`{"jsonrpc":"2.0","id":null,"method":"x"}`,
	`{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}`,
	`{"jsonrpc":"2.0","ID":1,"method":"x"}`,
	`{"jsonrpc":"2.0","\u0069d":1,"method":"x"}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","context":{"Provider":"claude"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","context":null}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","params":null}`,
	`{"jsonrpc":2,"id":1,"method":"x"}`,
	`{"jsonrpc":"2.0","id":1,"method":"caf\u00e9"}`,
	`{"jsonrpc":"2.0","id":1,"method":"x",}`,
	`{"jsonrpc":"2.0","id":1,"method":"x"} x`,
	`{"jsonrpc":"2.0","id":{},"method":"x"}`,
	`{"jsonrpc":"2.0","id":1,"result":{"pong":true,"payload":"` + strings.Repeat("y", 100) + `"}}`,
	`{"jsonrpc":"2.0","id":"r","result":[1,2,3],"extra":"e"}`,
	`{"jsonrpc":"2.0","id":1,"result":null}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"m"}}`,
	`{"jsonrpc":"2.0","id":1,"result":1,"result":2}`,
	`{"jsonrpc":"2.0","id":1,"Result":1}`,
}

// FuzzQuickSlot: what quickSlot reads, it reads as the decoder does, and
// the slot has no member name in the wrong case.
func FuzzQuickSlot(f *testing.F) {
	for _, s := range quickSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		raw := trimJSONSpace(data)
		if len(raw) == 0 || raw[0] != '{' {
			return
		}
		got, ok := quickSlot(raw)
		if !ok {
			return
		}
		var want Slot
		if err := Unmarshal(raw, &want); err != nil {
			t.Fatalf("quickSlot read %q, which the decoder refuses: %v", raw, err)
		}
		if v := caseVariant(raw); v != "" {
			t.Fatalf("quickSlot read %q, whose member %q is a case variant", raw, v)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("quickSlot(%q) = %+v (context %+v), the decoder %+v (context %+v)", raw, got, got.Context, want, want.Context)
		}
	})
}

// FuzzQuickResponse: what quickResponse reads, it reads as the decoder does.
func FuzzQuickResponse(f *testing.F) {
	for _, s := range quickSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		raw := trimJSONSpace(data)
		got, ok := quickResponse(raw)
		if !ok {
			return
		}
		var want Response
		if err := Unmarshal(raw, &want); err != nil {
			t.Fatalf("quickResponse read %q, which the decoder refuses: %v", raw, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("quickResponse(%q) = %+v, the decoder %+v", raw, got, want)
		}
	})
}

// TestQuickTakesTheOrdinary: the shapes of an ordinary call are read in
// place, not left to the decoder (else the fast path would be dead code).
func TestQuickTakesTheOrdinary(t *testing.T) {
	for _, s := range quickSeeds[:7] {
		if _, ok := quickSlot([]byte(s)); !ok {
			t.Errorf("quickSlot left %q to the decoder", s)
		}
	}
	for _, s := range quickSeeds[7:19] {
		if _, ok := quickSlot([]byte(s)); ok {
			t.Errorf("quickSlot took %q, which is the decoder's", s)
		}
	}
	for _, s := range quickSeeds[19:21] {
		if _, ok := quickResponse([]byte(s)); !ok {
			t.Errorf("quickResponse left %q to the decoder", s)
		}
	}
	for _, s := range quickSeeds[21:] {
		if _, ok := quickResponse([]byte(s)); ok {
			t.Errorf("quickResponse took %q, which is the decoder's", s)
		}
	}
}

// BenchmarkParseResponses measures the answer to a 1 KiB ping, as a client
// reads it.
func BenchmarkParseResponses(b *testing.B) {
	out := []byte(`{"jsonrpc":"2.0","id":17,"result":{"pong":true,"peer_id":"12D3KooWDGWf3A9cQHJfxnotujMP8625N3TAY5t7dBodDwwrPjBZ","time_unix_ms":1700000000123,"payload":"` + strings.Repeat("x", 1024) + `"}}`)
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseResponses(out); err != nil {
			b.Fatal(err)
		}
	}
}
