package llm

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// anthropicOK is a Messages API answer as api.anthropic.com returns it.
const anthropicOK = `{
  "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-20250514",
  "content": [
    {"type": "text", "text": "2 + 2 = 4."}
  ],
  "stop_reason": "end_turn",
  "stop_sequence": null,
  "usage": {
    "input_tokens": 21,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
    "output_tokens": 12,
    "service_tier": "standard"
  }
}`

// anthropic401 is Anthropic's answer to a wrong key.
const anthropic401 = `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestAnthropicWire(t *testing.T) {
	f := newFake(t, reply(200, anthropicOK))
	b, err := NewAnthropic(f.URL, "claude-sonnet-4-0", testKey, WithHTTPClient(f.Client()))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.Complete(context.Background(), conversation)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "2 + 2 = 4." || resp.Model != "claude-sonnet-4-20250514" {
		t.Errorf("resp = %+v", resp)
	}
	r := f.only(t)
	if r.Method != http.MethodPost || r.Path != "/v1/messages" {
		t.Errorf("request = %s %s", r.Method, r.Path)
	}
	for k, want := range map[string]string{
		"X-Api-Key":         testKey,
		"Anthropic-Version": "2023-06-01",
		"Content-Type":      "application/json",
		"Authorization":     "",
	} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	assertJSON(t, r.Body, `{
	  "model": "claude-sonnet-4-0",
	  "max_tokens": 64,
	  "system": "You are terse.",
	  "messages": [
	    {"role": "user", "content": "Hi"},
	    {"role": "assistant", "content": "Hello!"},
	    {"role": "user", "content": "What is 2+2?"}
	  ]
	}`)
}

func TestAnthropicDefaultsAndBlocks(t *testing.T) {
	// Several content blocks: text blocks are joined, others skipped.
	f := newFake(t, reply(200, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-1-20250805",
	  "content":[{"type":"thinking","thinking":"Let me think.","signature":"sig"},{"type":"text","text":"Lisbon "},{"type":"text","text":"is the capital."}],
	  "stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":7}}`))
	b, err := NewAnthropic(f.URL+"/v1", "claude-opus-4-1", "", WithHTTPClient(f.Client()))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.Complete(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "Capital of Portugal?"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Lisbon is the capital." || resp.Model != "claude-opus-4-1-20250805" {
		t.Errorf("resp = %+v", resp)
	}
	r := f.only(t)
	if r.Path != "/v1/messages" {
		t.Errorf("path = %s", r.Path)
	}
	if _, ok := r.Header["X-Api-Key"]; ok {
		t.Error("x-api-key sent without a key")
	}
	// max_tokens is required by the API, so a default is sent; no system field.
	assertJSON(t, r.Body, `{"model":"claude-opus-4-1","max_tokens":4096,"messages":[{"role":"user","content":"Capital of Portugal?"}]}`)
}

func TestAnthropicDecodeVariants(t *testing.T) {
	for _, tc := range []struct {
		name, body, errSub string
	}{
		{"only tool use", `{"type":"message","model":"m","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}],"stop_reason":"tool_use"}`, "finish reason: tool_use"},
		{"error in 200", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "Overloaded"},
		{"refusal", `{"type":"message","model":"m","content":[],"stop_reason":"refusal"}`, "refusal"},
	} {
		_, e := anthropicWire{}.decode([]byte(tc.body))
		if e == nil || !contains(e.Message, tc.errSub) {
			t.Errorf("%s: err = %v, want %q", tc.name, e, tc.errSub)
		}
	}
}
