package llm

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/mcpv2/mcpv2/protocol/translate"
)

// openAIOK is a chat completion as api.openai.com returns it.
const openAIOK = `{
  "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
  "object": "chat.completion",
  "created": 1741569952,
  "model": "gpt-4o-mini-2024-07-18",
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": "2 + 2 = 4.",
        "refusal": null,
        "annotations": []
      },
      "logprobs": null,
      "finish_reason": "stop"
    }
  ],
  "usage": {
    "prompt_tokens": 19,
    "completion_tokens": 10,
    "total_tokens": 29,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": "fp_06737a9306"
}`

// openAI401 is OpenAI's answer to a wrong key.
const openAI401 = `{
  "error": {
    "message": "Incorrect API key provided: sk-test-*****CRET. You can find your API key at https://platform.openai.com/account/api-keys.",
    "type": "invalid_request_error",
    "param": null,
    "code": "invalid_api_key"
  }
}`

func TestOpenAIWire(t *testing.T) {
	f := newFake(t, reply(200, openAIOK))
	b, err := NewOpenAI(f.URL+"/v1/", "gpt-4o-mini", testKey, WithHTTPClient(f.Client()))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.Complete(context.Background(), conversation)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "2 + 2 = 4." || resp.Model != "gpt-4o-mini-2024-07-18" {
		t.Errorf("resp = %+v", resp)
	}
	r := f.only(t)
	if r.Method != http.MethodPost || r.Path != "/v1/chat/completions" || r.RawQuery != "" {
		t.Errorf("request = %s %s?%s", r.Method, r.Path, r.RawQuery)
	}
	for k, want := range map[string]string{
		"Authorization": "Bearer " + testKey,
		"Content-Type":  "application/json",
		"Accept":        "application/json",
	} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	assertJSON(t, r.Body, `{
	  "model": "gpt-4o-mini",
	  "messages": [
	    {"role": "system", "content": "You are terse."},
	    {"role": "user", "content": "Hi"},
	    {"role": "assistant", "content": "Hello!"},
	    {"role": "user", "content": "What is 2+2?"}
	  ],
	  "max_tokens": 64,
	  "stream": false
	}`)
}

func TestOpenAICompatibleServerWithoutKey(t *testing.T) {
	// llama.cpp / Ollama style: no key, no system prompt, model override, and
	// a server that reports its own model name.
	f := newFake(t, reply(200, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"llama3.2:latest",
	  "system_fingerprint":"fp_ollama","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there."},"finish_reason":"stop"}],
	  "usage":{"prompt_tokens":26,"completion_tokens":4,"total_tokens":30}}`))
	b, err := NewOpenAI(f.URL, "llama3.2", "", WithHTTPClient(f.Client()))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.Complete(context.Background(), Request{Model: "llama3.2:1b", Messages: []Message{{Role: RoleUser, Content: "Hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hello there." || resp.Model != "llama3.2:latest" {
		t.Errorf("resp = %+v", resp)
	}
	r := f.only(t)
	if r.Path != "/v1/chat/completions" {
		t.Errorf("path = %s", r.Path)
	}
	if h := r.Header.Get("Authorization"); h != "" {
		t.Errorf("Authorization = %q, want none", h)
	}
	assertJSON(t, r.Body, `{"model":"llama3.2:1b","messages":[{"role":"user","content":"Hi"}],"stream":false}`)
}

func TestOpenAIMaxCompletionTokensOnOfficialAPI(t *testing.T) {
	b, err := NewOpenAI("", "gpt-4o", testKey)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(b.(*remote).p.encode(Request{Messages: []Message{{Role: RoleUser, Content: "x"}}, MaxTokens: 10}, "gpt-4o"))
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, data, `{"model":"gpt-4o","messages":[{"role":"user","content":"x"}],"max_completion_tokens":10,"stream":false}`)
}

func TestOpenAIDecodeVariants(t *testing.T) {
	for _, tc := range []struct {
		name, body, text, errSub string
	}{
		// Array content reads as translate.ContentText does: one line a
		// part, a placeholder for a part that is not text.
		{"array content", `{"model":"m","choices":[{"message":{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]}}]}`, "a\n[image]\nb", ""},
		{"refusal", `{"model":"m","choices":[{"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`, "I can't help with that.", ""},
		{"no choices", `{"model":"m","choices":[]}`, "", "no choices"},
		{"empty content", `{"model":"m","choices":[{"message":{"role":"assistant","content":""},"finish_reason":"length"}]}`, "", "finish reason: length"},
		{"error in 200", `{"error":{"message":"upstream overloaded","type":"server_error"}}`, "", "upstream overloaded"},
	} {
		resp, e := openAIWire{}.decode([]byte(tc.body))
		switch {
		case tc.errSub == "" && (e != nil || resp.Text != tc.text):
			t.Errorf("%s: %+v, %v; want text %q", tc.name, resp, e, tc.text)
		case tc.errSub != "" && (e == nil || !contains(e.Message, tc.errSub)):
			t.Errorf("%s: err = %v, want %q", tc.name, e, tc.errSub)
		}
	}
}

// TestOpenAIContentText: an answer's array content reads as
// translate.ContentText reads it, on the contents where this package's own
// reader (which concatenated the text parts) and the edge's (one line a
// part, placeholders) disagreed; edge/ai_test.go runs the same contents
// through the edge.
func TestOpenAIContentText(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"text, image, text", `[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}},{"type":"text","text":"b"}]`, "a\n[image]\nb"},
		{"two text parts", `[{"type":"text","text":"Hello"},{"type":"text","text":"world"}]`, "Hello\nworld"},
		{"refusal part", `[{"type":"refusal","refusal":"I can't help with that."}]`, "[refused: I can't help with that.]"},
		{"audio then text", `[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}},{"type":"text","text":"transcribe"}]`, "[audio]\ntranscribe"},
		{"a part of another type", `[{"type":"file","file":{"file_id":"file-1"}},{"type":"text","text":"sum up"}]`, "[file]\nsum up"},
	} {
		body := `{"model":"m","choices":[{"message":{"role":"assistant","content":` + tc.content + `},"finish_reason":"stop"}]}`
		resp, e := openAIWire{}.decode([]byte(body))
		if e != nil || resp.Text != tc.want || resp.Text != translate.ContentText(json.RawMessage(tc.content)) {
			t.Errorf("%s: text %q, %v; want %q", tc.name, resp.Text, e, tc.want)
		}
	}
}

// TestDecodeExactNames: answers are decoded with protocol.Unmarshal, whose
// member names match exactly, as every provider spells them.
func TestDecodeExactNames(t *testing.T) {
	for _, tc := range []struct {
		w    provider
		body string
	}{
		{openAIWire{}, `{"Model":"m","Choices":[{"Message":{"Content":"hi"}}]}`},
		{anthropicWire{}, `{"type":"message","Content":[{"Type":"text","Text":"hi"}]}`},
		{geminiWire{}, `{"Candidates":[{"Content":{"Parts":[{"Text":"hi"}]}}]}`},
	} {
		if resp, e := tc.w.decode([]byte(tc.body)); e == nil {
			t.Errorf("%T read %q from a body with case-folded names", tc.w, resp.Text)
		}
	}
}
