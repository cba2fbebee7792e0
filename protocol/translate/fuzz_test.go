package translate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// The seed corpus lives in testdata/fuzz/FuzzTranslate/ (go test runs it as
// an ordinary test): every golden input with every target. A fuzzing run adds
// what it finds there when it fails.

// FuzzTranslate: Translate never panics; what it accepts it turns into valid
// JSON, which translates back; and back equals the source format's normal
// form of the input (Translate to itself), which is the round-trip property
// for any input.
func FuzzTranslate(f *testing.F) {
	f.Add([]byte(`[{"role":"user","content":"hi"}]`), byte(0), byte(1))
	f.Add([]byte(`[{"role":"model","parts":[{"functionCall":{"name":"f"}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"output":"x"}}}]}]`), byte(2), byte(1))
	f.Add([]byte(`[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"oops"}}]},{"role":"tool","tool_call_id":"c","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"user","content":"go on"}]`), byte(1), byte(2))
	f.Add([]byte(`[{"role":"user","content":"a","mcpv2":{"dropped":[{"at":0,"part":{"type":"media","url":"u","media_type":"video/mp4"}}]}}]`), byte(3), byte(0))
	f.Add([]byte(`[{"role":"assistant","reasoning_content":"r","content":"","tool_calls":[{"id":"c","function":{"name":"f","arguments":""}}]}]`), byte(3), byte(0))
	f.Add([]byte(`[]`), byte(0), byte(0))
	f.Fuzz(func(t *testing.T, history []byte, fromIdx, toIdx byte) {
		providers := Providers()
		from, to := providers[int(fromIdx)%len(providers)], providers[int(toIdx)%len(providers)]
		out, err := Translate(history, from, to)
		if err != nil {
			if !errors.Is(err, ErrInvalidHistory) {
				t.Fatalf("error %v is not ErrInvalidHistory", err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("%s→%s output is not valid JSON: %s", from, to, out)
		}
		back, err := Translate(out, to, from)
		if err != nil {
			t.Fatalf("%s→%s→%s failed: %v\nvia: %s", from, to, from, err, out)
		}
		norm, err := Translate(history, from, from)
		if err != nil {
			t.Fatalf("%s→%s failed after %s→%s succeeded: %v", from, from, from, to, err)
		}
		if !sameJSON(t, back, norm) {
			t.Fatalf("%s→%s→%s differs from %s→%s\nvia:  %s\nback: %s\nnorm: %s", from, to, from, from, from, out, back, norm)
		}
		if _, err := Strip(out); err != nil {
			t.Fatalf("Strip of a translated history: %v", err)
		}
	})
}

// FuzzContentText: ContentText and SystemText never panic; a string content
// reads as itself; SystemText returns no blank prompt, and an error only.
func FuzzContentText(f *testing.F) {
	for _, tc := range contentTextCases {
		f.Add([]byte(tc.content), "openai")
	}
	f.Add([]byte(`"hi"`), "claude")
	f.Add([]byte(`[{"type":"text","text":"a"},null]`), "claude")
	f.Add([]byte(`{"parts":[{"text":"a"},{}]}`), "gemini")
	f.Add([]byte(`null`), "deepseek")
	f.Fuzz(func(t *testing.T, raw []byte, provider string) {
		got := ContentText(raw)
		var s string
		if utf8.Valid(raw) && json.Unmarshal(raw, &s) == nil && jsonType(raw) == "string" && got != s {
			t.Fatalf("ContentText(%s) = %q, want the string %q", raw, got, s)
		}
		if s := string(raw); utf8.ValidString(s) && ContentText(TextContent(s)) != s {
			t.Fatalf("ContentText(TextContent(%q)) = %q", s, ContentText(TextContent(s)))
		}
		prompts, err := SystemText(provider, raw)
		if err != nil && prompts != nil {
			t.Fatalf("SystemText returned %q with error %v", prompts, err)
		}
		for _, p := range prompts {
			if strings.TrimSpace(p) == "" {
				t.Fatalf("SystemText(%s) returned a blank prompt", raw)
			}
		}
	})
}
