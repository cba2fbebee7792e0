package edge

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/protocol/translate"
)

// Realistic provider-native requests: a system prompt, a multi-turn history
// with an earlier answer, and a last user question about an earlier turn.
var aiRequests = map[string]string{
	"claude": `{
	  "model": "claude-sonnet-4-5",
	  "max_tokens": 1024,
	  "system": [{"type": "text", "text": "You are a terse assistant.", "cache_control": {"type": "ephemeral"}}],
	  "messages": [
	    {"role": "user", "content": "My name is Ada and my favourite colour is teal."},
	    {"role": "assistant", "content": [{"type": "text", "text": "Nice to meet you, Ada."}]},
	    {"role": "user", "content": [{"type": "text", "text": "What is my favourite colour?"}]}
	  ],
	  "temperature": 0.2
	}`,
	"openai": `{
	  "model": "gpt-4o-mini",
	  "messages": [
	    {"role": "system", "content": "You are a terse assistant."},
	    {"role": "user", "content": "My name is Ada and my favourite colour is teal."},
	    {"role": "assistant", "content": "Nice to meet you, Ada."},
	    {"role": "user", "content": [{"type": "text", "text": "What is my favourite colour?"}]}
	  ],
	  "temperature": 0.2,
	  "stream": false
	}`,
	"deepseek": `{
	  "model": "deepseek-chat",
	  "messages": [
	    {"role": "system", "content": "You are a terse assistant."},
	    {"role": "user", "content": "My name is Ada and my favourite colour is teal."},
	    {"role": "assistant", "content": "Nice to meet you, Ada.", "reasoning_content": "The user introduced themself."},
	    {"role": "user", "content": "What is my favourite colour?"}
	  ]
	}`,
	"gemini": `{
	  "systemInstruction": {"parts": [{"text": "You are a terse assistant."}]},
	  "contents": [
	    {"role": "user", "parts": [{"text": "My name is Ada and my favourite colour is teal."}]},
	    {"role": "model", "parts": [{"text": "Nice to meet you, Ada."}]},
	    {"role": "user", "parts": [{"text": "What is my favourite colour?"}]}
	  ],
	  "generationConfig": {"temperature": 0.2, "maxOutputTokens": 256}
	}`,
}

func TestAIProviders(t *testing.T) {
	e := startEdge(t, Config{})
	for _, provider := range protocol.Providers {
		t.Run(provider, func(t *testing.T) {
			st, hdr, body := e.do(t, http.MethodPost, "/mcpv2/ai/"+provider, []byte(aiRequests[provider]),
				map[string]string{SessionHeader: e.token, ConversationHeader: "conv-" + provider})
			if st != 200 || hdr.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d: %s", st, body)
			}
			if hdr.Get(ConversationHeader) != "conv-"+provider || hdr.Get(TurnHeader) != "1" {
				t.Errorf("conversation headers: %q %q", hdr.Get(ConversationHeader), hdr.Get(TurnHeader))
			}
			// What ask received: the system prompt, the last user message as
			// the query, the earlier turns as context, the conversation id
			// and the provider.
			a, prov := e.b.lastAsk()
			if a.System != "You are a terse assistant." || a.ConversationID != "conv-"+provider || prov != provider {
				t.Errorf("ask args %+v, provider %q", a, prov)
			}
			for _, want := range []string{
				"user: My name is Ada and my favourite colour is teal.",
				"assistant: Nice to meet you, Ada.",
				"Current message:\nWhat is my favourite colour?",
			} {
				if !strings.Contains(a.Query, want) {
					t.Errorf("query %q lacks %q", a.Query, want)
				}
			}
			if !strings.HasSuffix(a.Query, "What is my favourite colour?") {
				t.Errorf("query does not end with the last user message: %q", a.Query)
			}
			if strings.Contains(a.Query, "reasoning") || strings.Contains(a.Query, "mcpv2") {
				t.Errorf("query carries side data: %q", a.Query)
			}
			const answer = "echo: What is my favourite colour?"
			checkNative(t, provider, body, answer, "local-echo-1")
		})
	}
}

// checkNative asserts the provider's native response shape.
func checkNative(t *testing.T, provider string, body []byte, text, model string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("not JSON: %s", body)
	}
	switch provider {
	case "claude":
		var r struct {
			ID, Type, Role, Model string
			Content               []struct{ Type, Text string }
			StopReason            string `json:"stop_reason"`
			Usage                 struct {
				In  *int `json:"input_tokens"`
				Out *int `json:"output_tokens"`
			}
		}
		_ = json.Unmarshal(body, &r)
		if !strings.HasPrefix(r.ID, "msg_") || r.Type != "message" || r.Role != "assistant" || r.Model != model ||
			len(r.Content) != 1 || r.Content[0].Type != "text" || r.Content[0].Text != text || r.StopReason != "end_turn" ||
			r.Usage.In == nil || r.Usage.Out == nil || *r.Usage.Out == 0 {
			t.Errorf("claude answer: %s", body)
		}
		if _, ok := m["stop_sequence"]; !ok {
			t.Errorf("claude answer lacks stop_sequence: %s", body)
		}
	case "openai", "deepseek":
		var r struct {
			ID, Object, Model string
			Created           int64
			Choices           []struct {
				Index   int
				Message struct{ Role, Content string }
				Finish  string `json:"finish_reason"`
			}
			Usage struct {
				P int `json:"prompt_tokens"`
				C int `json:"completion_tokens"`
				T int `json:"total_tokens"`
			}
		}
		_ = json.Unmarshal(body, &r)
		if !strings.HasPrefix(r.ID, "chatcmpl-") || r.Object != "chat.completion" || r.Model != model || r.Created == 0 ||
			len(r.Choices) != 1 || r.Choices[0].Message.Role != "assistant" || r.Choices[0].Message.Content != text ||
			r.Choices[0].Finish != "stop" || r.Usage.T != r.Usage.P+r.Usage.C || r.Usage.C == 0 {
			t.Errorf("%s answer: %s", provider, body)
		}
	case "gemini":
		var r struct {
			Candidates []struct {
				Content struct {
					Role  string
					Parts []struct{ Text string }
				}
				FinishReason string
			}
			UsageMetadata struct{ PromptTokenCount, CandidatesTokenCount, TotalTokenCount int }
			ModelVersion  string
		}
		_ = json.Unmarshal(body, &r)
		if len(r.Candidates) != 1 || r.Candidates[0].Content.Role != "model" || len(r.Candidates[0].Content.Parts) != 1 ||
			r.Candidates[0].Content.Parts[0].Text != text || r.Candidates[0].FinishReason != "STOP" || r.ModelVersion != model ||
			r.UsageMetadata.TotalTokenCount != r.UsageMetadata.PromptTokenCount+r.UsageMetadata.CandidatesTokenCount {
			t.Errorf("gemini answer: %s", body)
		}
	default:
		t.Fatalf("unknown provider %q", provider)
	}
}

func TestAIVariants(t *testing.T) {
	e := startEdge(t, Config{})
	tests := []struct {
		name, provider, body string
		wantQuery, wantSys   string
	}{
		{"claude string system, single turn", "claude",
			`{"model":"claude-x","max_tokens":10,"system":"Be brief.","messages":[{"role":"user","content":"Hello there"}]}`,
			"Hello there", "Be brief."},
		{"gemini without roles, snake_case system", "gemini",
			`{"system_instruction":{"parts":[{"text":"Be brief."}]},"contents":[{"parts":[{"text":"Explain how AI works"}]}]}`,
			"Explain how AI works", "Be brief."},
		{"openai developer role and image", "openai",
			`{"model":"gpt-4o","messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}`,
			"What is this?\n[image]", "Be brief."},
		{"claude agent loop: tool use and result after the question", "claude",
			`{"model":"c","max_tokens":10,"messages":[
			  {"role":"user","content":"What is the weather in Paris?"},
			  {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
			  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny, 21C"}]}]}`,
			"Current message:\nWhat is the weather in Paris?\n\nAfter it:\nassistant: [called tool get_weather with {\"city\":\"Paris\"}]\ntool: [result of toolu_1] sunny, 21C", ""},
		{"openai tool call arguments as a string (the API's form)", "openai",
			`{"model":"m","messages":[
			  {"role":"user","content":"What is the weather in Paris?"},
			  {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
			  {"role":"tool","tool_call_id":"call_1","content":"sunny, 21C"}]}`,
			"Current message:\nWhat is the weather in Paris?\n\nAfter it:\nassistant: [called tool get_weather with {\"city\":\"Paris\"}]\ntool: [result of call_1] sunny, 21C", ""},
		{"openai tool call arguments as an object (as the seed accepts)", "openai",
			`{"model":"m","messages":[
			  {"role":"user","content":"What is the weather in Paris?"},
			  {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":{"city": "Paris"}}}]},
			  {"role":"tool","tool_call_id":"call_1","content":"sunny, 21C"}]}`,
			"Current message:\nWhat is the weather in Paris?\n\nAfter it:\nassistant: [called tool get_weather with {\"city\":\"Paris\"}]\ntool: [result of call_1] sunny, 21C", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _, body := e.post(t, "/mcpv2/ai/"+tc.provider, tc.body)
			if st != 200 {
				t.Fatalf("status %d: %s", st, body)
			}
			a, _ := e.b.lastAsk()
			if a.Query != tc.wantQuery || a.System != tc.wantSys || a.ConversationID != "" {
				t.Errorf("ask args = %+v\nwant query %q system %q", a, tc.wantQuery, tc.wantSys)
			}
		})
	}
}

func TestAIRefusals(t *testing.T) {
	e := startEdge(t, Config{})
	tests := []struct {
		name, path, body string
		hdr              map[string]string
		status, code     int
		msg              string
	}{
		{"unknown provider", "/mcpv2/ai/llama", `{"messages":[{"role":"user","content":"hi"}]}`, nil, 400, protocol.CodeUnsupportedProvider, `"llama"`},
		{"not JSON", "/mcpv2/ai/openai", `{"messages":`, nil, 400, protocol.CodeParseError, "not valid JSON"},
		{"not an object", "/mcpv2/ai/openai", `[1,2]`, nil, 400, protocol.CodeInvalidRequest, "JSON object"},
		// protocol.Unmarshal's rules: the text must be UTF-8.
		{"not UTF-8", "/mcpv2/ai/openai", "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", nil, 400, protocol.CodeParseError, "not valid JSON"},
		{"no messages", "/mcpv2/ai/claude", `{"model":"x","max_tokens":1}`, nil, 400, protocol.CodeInvalidParams, "messages is missing"},
		{"no contents", "/mcpv2/ai/gemini", `{"messages":[]}`, nil, 400, protocol.CodeInvalidParams, "contents is missing"},
		{"stream", "/mcpv2/ai/openai", `{"stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil, 400, protocol.CodeInvalidParams, "stream"},
		{"no user message", "/mcpv2/ai/openai", `{"messages":[{"role":"system","content":"x"}]}`, nil, 400, protocol.CodeInvalidParams, "no user message"},
		{"bad history", "/mcpv2/ai/claude", `{"messages":[{"role":"wizard","content":"hi"}]}`, nil, 400, protocol.CodeInvalidParams, "claude request: messages"},
		{"bad claude system", "/mcpv2/ai/claude", `{"system":42,"messages":[{"role":"user","content":"hi"}]}`, nil, 400, protocol.CodeInvalidParams, "system"},
		{"bad conversation header", "/mcpv2/ai/claude", `{"messages":[{"role":"user","content":"hi"}]}`, map[string]string{ConversationHeader: "a b"}, 400, protocol.CodeInvalidParams, ConversationHeader},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{SessionHeader: e.token}
			for k, v := range tc.hdr {
				hdr[k] = v
			}
			n := len(e.b.auditLines())
			st, h, body := e.do(t, http.MethodPost, tc.path, []byte(tc.body), hdr)
			e.wantRefusal(t, n, st, h, body, tc.status, tc.code, tc.msg)
		})
	}
	if n := len(e.b.callerList()); n != 0 {
		t.Errorf("Handle ran %d times for refused requests", n)
	}
}

func TestAISkillFailure(t *testing.T) {
	e := startEdge(t, Config{})
	for _, tc := range []struct {
		err    *protocol.Error
		status int
	}{
		{protocol.Errorf(protocol.CodeNotPermitted, "not permitted"), 403},
		{protocol.Errorf(protocol.CodeToolExecution, "ask: the openai backend answered HTTP 500"), 502},
		{&protocol.Error{Code: protocol.CodeRateLimited, Message: "rate limited", Data: map[string]any{"retry_after_ms": 1500}}, 429},
	} {
		e.b.set(func(f *fakeBackend) { f.askErr = tc.err })
		n := len(e.b.auditLines())
		st, hdr, body := e.post(t, "/mcpv2/ai/openai", aiRequests["openai"])
		if st != tc.status || rpcError(t, body).Code != tc.err.Code {
			t.Errorf("%d: status %d body %s", tc.err.Code, st, body)
		}
		if tc.status == 429 && hdr.Get("Retry-After") != "2" {
			t.Errorf("Retry-After = %q", hdr.Get("Retry-After"))
		}
		// Handle audited the slot; the edge adds no second line.
		if lines := e.b.auditLines()[n:]; len(lines) != 1 || lines[0].code != tc.err.Code {
			t.Errorf("audit lines = %+v", lines)
		}
	}
}

// TestAIContentText: a message's array content reaches ask as
// translate.ContentText reads it (one line a part, a placeholder for a part
// that is not text), on the contents where the edge's former reader and
// node/llm's (which concatenated the text parts) disagreed; node/llm's
// TestOpenAIContentText runs the same contents through the llm backend.
func TestAIContentText(t *testing.T) {
	e := startEdge(t, Config{})
	for _, tc := range []struct{ name, content, want string }{
		{"text, image, text", `[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}},{"type":"text","text":"b"}]`, "a\n[image]\nb"},
		{"two text parts", `[{"type":"text","text":"Hello"},{"type":"text","text":"world"}]`, "Hello\nworld"},
		{"refusal part", `[{"type":"refusal","refusal":"I can't help with that."}]`, "[refused: I can't help with that.]"},
		{"audio then text", `[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}},{"type":"text","text":"transcribe"}]`, "[audio]\ntranscribe"},
		{"a part of another type", `[{"type":"file","file":{"file_id":"file-1"}},{"type":"text","text":"sum up"}]`, "[file]\nsum up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := translate.ContentText(json.RawMessage(tc.content)); got != tc.want {
				t.Fatalf("translate.ContentText = %q, want %q", got, tc.want)
			}
			// A refusal is the assistant's; other parts are the user's
			// question.
			body := `{"model":"m","messages":[{"role":"user","content":` + tc.content + `}]}`
			want := tc.want
			if strings.Contains(tc.content, `"refusal"`) {
				body = `{"model":"m","messages":[{"role":"user","content":"Pick a lock."},{"role":"assistant","content":` + tc.content + `},{"role":"user","content":"Why not?"}]}`
				want = "Earlier turns of this conversation:\nuser: Pick a lock.\nassistant: " + tc.want + "\n\nCurrent message:\nWhy not?"
			}
			st, _, out := e.post(t, "/mcpv2/ai/openai", body)
			if st != 200 {
				t.Fatalf("status %d: %s", st, out)
			}
			if a, _ := e.b.lastAsk(); a.Query != want {
				t.Errorf("ask query = %q, want %q", a.Query, want)
			}
		})
	}
}

// TestAIExactNames: the edge reads a request with protocol.Unmarshal, whose
// member names match exactly: a system block spelt "Type" is not a text
// block.
func TestAIExactNames(t *testing.T) {
	e := startEdge(t, Config{})
	n := len(e.b.auditLines())
	st, h, body := e.do(t, http.MethodPost, "/mcpv2/ai/claude",
		[]byte(`{"system":[{"Type":"text","Text":"Be brief."}],"messages":[{"role":"user","content":"hi"}]}`),
		map[string]string{SessionHeader: e.token})
	e.wantRefusal(t, n, st, h, body, 400, protocol.CodeInvalidParams, `system: block 0: type ""`)
}
