package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// ContentTextCases are contents on which the two readers this package
// replaced disagreed: node/llm concatenated the text parts and dropped the
// rest, the edge joined every part by lines with a placeholder for what is
// not text. ContentText is the edge's reading, which loses less: the lines
// stay apart and the reader learns that an image was there. The consumers'
// tests (node/llm, edge) run the same inputs through their own paths.
var contentTextCases = []struct {
	name, content, want string
	oldLLM              string // what node/llm's concatenation gave
}{
	{"text, image, text", `[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}},{"type":"text","text":"b"}]`,
		"a\n[image]\nb", "ab"},
	{"two text parts", `[{"type":"text","text":"Hello"},{"type":"text","text":"world"}]`,
		"Hello\nworld", "Helloworld"},
	{"refusal part", `[{"type":"refusal","refusal":"I can't help with that."}]`,
		"[refused: I can't help with that.]", ""},
	{"audio then text", `[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}},{"type":"text","text":"transcribe"}]`,
		"[audio]\ntranscribe", "transcribe"},
	{"a part of another type", `[{"type":"file","file":{"file_id":"file-1"}},{"type":"text","text":"sum up"}]`,
		"[file]\nsum up", "sum up"},
}

func TestContentText(t *testing.T) {
	for _, tc := range contentTextCases {
		if got := ContentText(json.RawMessage(tc.content)); got != tc.want {
			t.Errorf("%s: ContentText = %q, want %q (node/llm gave %q)", tc.name, got, tc.want, tc.oldLLM)
		}
	}
	// Inputs on which the two readers agreed, and the edges.
	for _, tc := range []struct{ name, content, want string }{
		{"string", `"hi there"`, "hi there"},
		{"escaped string", `"a\nb \u00e9"`, "a\nb é"},
		{"empty string", `""`, ""},
		{"null", `null`, ""},
		{"absent", ``, ""},
		{"one text part", `[{"type":"text","text":"only"}]`, "only"},
		{"empty array", `[]`, ""},
		{"empty text part keeps its line", `[{"type":"text","text":""},{"type":"text","text":"x"}]`, "\nx"},
		{"extra members ignored", `[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]`, "a"},
		{"null members read as absent", `[{"type":"text","text":null}]`, ""},
		{"a null part reads as {}", `[null]`, "[]"},
		{"claude block types", `[{"type":"text","text":"t"},{"type":"tool_use","id":"x","name":"f","input":{}}]`, "t\n[tool_use]"},
		{"long type clipped", `[{"type":"` + strings.Repeat("x", 50) + `"}]`, "[" + strings.Repeat("x", 40) + "…]"},
		{"number", `42`, ""},
		{"object", `{"type":"text","text":"a"}`, ""},
		{"array of strings", `["a","b"]`, ""},
		{"text not a string", `[{"type":"text","text":5}]`, ""},
		{"type not a string", `[{"type":1}]`, ""},
		{"refusal not a string", `[{"type":"text","text":"a","refusal":{}}]`, ""},
		// Member names match exactly (encoding/json's case folding read
		// "Type" as "type"): a part without "type" is a part of type "".
		{"names match exactly", `[{"Type":"text","Text":"a"}]`, "[]"},
		{"not UTF-8", "\"\xff\"", ""},
	} {
		if got := ContentText(json.RawMessage(tc.content)); got != tc.want {
			t.Errorf("%s: ContentText(%s) = %q, want %q", tc.name, tc.content, got, tc.want)
		}
	}
}

func TestTextContent(t *testing.T) {
	for _, s := range []string{"", "hi", "a \"quoted\"\nline", "<b>&</b>", "é\u2028"} {
		raw := TextContent(s)
		var back string
		if err := json.Unmarshal(raw, &back); err != nil || back != s {
			t.Errorf("TextContent(%q) = %s, reads back as %q (%v)", s, raw, back, err)
		}
		if got := ContentText(raw); got != s {
			t.Errorf("ContentText(TextContent(%q)) = %q", s, got)
		}
	}
}

func TestSystemText(t *testing.T) {
	for _, tc := range []struct {
		name, provider, raw string
		want                []string
		errSub              string
	}{
		{"absent", "claude", ``, nil, ""},
		{"null", "gemini", `null`, nil, ""},
		{"claude string", "claude", `"Be brief."`, []string{"Be brief."}, ""},
		{"claude blank string", "claude", `"  \n"`, nil, ""},
		{"claude blocks", "claude", `[{"type":"text","text":"A.","cache_control":{"type":"ephemeral"}},{"type":"text","text":" "},{"type":"text","text":"B."}]`, []string{"A.", "B."}, ""},
		{"claude image block", "claude", `[{"type":"text","text":"A."},{"type":"image"}]`, nil, `block 1: type "image" (want "text")`},
		{"claude null block", "claude", `[null]`, nil, `block 0: type ""`},
		{"claude block type case", "claude", `[{"Type":"text","Text":"A."}]`, nil, `block 0: type ""`},
		{"claude number", "claude", `42`, nil, "want a string or an array of text blocks"},
		{"claude object", "claude", `{"parts":[{"text":"A."}]}`, nil, "want a string or an array of text blocks"},
		{"claude text not a string", "claude", `[{"type":"text","text":1}]`, nil, "want a string or an array of text blocks"},
		{"openai text parts", "openai", `[{"type":"text","text":"A."}]`, []string{"A."}, ""},
		{"deepseek string", "deepseek", `"A."`, []string{"A."}, ""},
		{"gemini content", "gemini", `{"role":"system","parts":[{"text":"A."},{"text":"B."}]}`, []string{"A.", "B."}, ""},
		{"gemini string", "gemini", `"A."`, []string{"A."}, ""},
		{"gemini no parts", "gemini", `{}`, nil, ""},
		{"gemini part without text", "gemini", `{"parts":[{"inlineData":{}}]}`, nil, "part 0 has no text"},
		{"gemini null text", "gemini", `{"parts":[{"text":null}]}`, nil, "part 0 has no text"},
		{"gemini text case", "gemini", `{"parts":[{"Text":"A."}]}`, nil, "part 0 has no text"},
		{"gemini parts case", "gemini", `{"Parts":[{"text":"A."}]}`, nil, `member "Parts" (a Content has "role" and "parts")`},
		{"gemini array", "gemini", `[{"text":"A."}]`, nil, "want a Content object"},
		{"gemini parts not an array", "gemini", `{"parts":{}}`, nil, "want a Content object"},
		{"gemini text not a string", "gemini", `{"parts":[{"text":1}]}`, nil, "want a Content object"},
		{"not JSON", "claude", `[`, nil, "not valid JSON"},
	} {
		got, err := SystemText(tc.provider, json.RawMessage(tc.raw))
		switch {
		case tc.errSub == "" && (err != nil || !equalStrings(got, tc.want)):
			t.Errorf("%s: SystemText = %q, %v; want %q", tc.name, got, err, tc.want)
		case tc.errSub != "" && (err == nil || !strings.Contains(err.Error(), tc.errSub)):
			t.Errorf("%s: SystemText err = %v, want %q", tc.name, err, tc.errSub)
		}
	}
	if _, err := SystemText("llama", json.RawMessage(`"x"`)); !errors.Is(err, ErrUnknownProvider) {
		t.Errorf("unknown provider: err = %v", err)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestWireStructs decodes a body of each provider in the API's own spelling
// into the structs, refusing members the structs do not name (a misspelt tag
// would leave one over), and encodes it back to the same JSON.
func TestWireStructs(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		body string
	}{
		{"claude request", &ClaudeRequest{}, `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":[{"type":"text","text":"Be brief."}],
			"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"text","text":"Hello."}]}]}`},
		{"claude response", &ClaudeResponse{}, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",
			"content":[{"type":"thinking","thinking":"Hm.","signature":"sig"},{"type":"text","text":"Lisbon."},{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}],
			"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":7}}`},
		{"claude error", &ClaudeResponse{}, `{"id":"","type":"error","role":"","model":"","content":null,"stop_reason":"","stop_sequence":null,
			"usage":{"input_tokens":0,"output_tokens":0},"error":{"type":"overloaded_error","message":"Overloaded"}}`},
		{"openai request", &OpenAIRequest{}, `{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},
			{"role":"user","name":"ada","content":[{"type":"text","text":"Hi"}]},
			{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
			{"role":"tool","content":"ok","tool_call_id":"call_1"},
			{"role":"assistant","content":"x","reasoning_content":"r","refusal":"no"}],
			"max_tokens":10,"max_completion_tokens":20,"stream":false}`},
		{"openai response", &OpenAIResponse{}, `{"id":"chatcmpl-1","object":"chat.completion","created":1741569952,"model":"gpt-4o-mini",
			"choices":[{"index":0,"message":{"role":"assistant","content":"4."},"logprobs":null,"finish_reason":"stop"}],
			"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29},"system_fingerprint":"fp_1"}`},
		{"gemini request", &GeminiRequest{}, `{"contents":[{"role":"user","parts":[{"text":"Hi"}]},{"role":"model","parts":[{"text":"Hm","thought":true},{"text":"Hello."}]}],
			"systemInstruction":{"parts":[{"text":"Be brief."}]},"generationConfig":{"maxOutputTokens":256}}`},
		{"gemini response", &GeminiResponse{}, `{"candidates":[{"content":{"role":"model","parts":[{"text":"4."}]},"finishReason":"STOP","index":0}],
			"promptFeedback":{"blockReason":"SAFETY","blockReasonMessage":"m"},
			"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":2,"totalTokenCount":3},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`},
	} {
		dec := json.NewDecoder(strings.NewReader(tc.body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(tc.v); err != nil {
			t.Errorf("%s: decode: %v", tc.name, err)
			continue
		}
		out, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatalf("%s: encode: %v", tc.name, err)
		}
		if !sameJSON(t, out, []byte(tc.body)) {
			t.Errorf("%s: encodes as\n%s\nwant\n%s", tc.name, out, tc.body)
		}
	}
	// What a zero value leaves out, and what it always writes.
	for _, tc := range []struct {
		v    any
		want string
	}{
		{ClaudeRequest{}, `{"model":"","max_tokens":0,"messages":null}`},
		{OpenAIRequest{}, `{"model":"","messages":null,"stream":false}`},
		{OpenAIMessage{Role: "user", Content: TextContent("")}, `{"role":"user","content":""}`},
		{OpenAIMessage{Role: "assistant"}, `{"role":"assistant","content":null}`},
		{GeminiRequest{}, `{"contents":null}`},
		{GeminiPart{Text: new(string)}, `{"text":""}`},
		{ClaudeBlock{Type: "text", Text: new(string)}, `{"type":"text","text":""}`},
	} {
		out, err := json.Marshal(tc.v)
		if err != nil || !bytes.Equal(out, []byte(tc.want)) {
			t.Errorf("%T encodes as %s (%v), want %s", tc.v, out, err, tc.want)
		}
	}
}
