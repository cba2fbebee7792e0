package llm

import (
	"context"
	"net/http"
	"testing"
)

// geminiOK is a generateContent answer as generativelanguage.googleapis.com returns it.
const geminiOK = `{
  "candidates": [
    {
      "content": {
        "parts": [
          {"text": "2 + 2 = 4."}
        ],
        "role": "model"
      },
      "finishReason": "STOP",
      "avgLogprobs": -0.0123,
      "index": 0
    }
  ],
  "usageMetadata": {
    "promptTokenCount": 14,
    "candidatesTokenCount": 8,
    "totalTokenCount": 22,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 14}],
    "candidatesTokensDetails": [{"modality": "TEXT", "tokenCount": 8}]
  },
  "modelVersion": "gemini-2.0-flash",
  "responseId": "Vm0XaKbEHeeWmNAPo4bi6Qc"
}`

// gemini401 is Google's answer to missing or wrong credentials.
const gemini401 = `{
  "error": {
    "code": 401,
    "message": "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
    "status": "UNAUTHENTICATED"
  }
}`

func TestGeminiWire(t *testing.T) {
	f := newFake(t, reply(200, geminiOK))
	b, err := NewGemini(f.URL, "gemini-2.0-flash", testKey, WithHTTPClient(f.Client()))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.Complete(context.Background(), conversation)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "2 + 2 = 4." || resp.Model != "gemini-2.0-flash" {
		t.Errorf("resp = %+v", resp)
	}
	r := f.only(t)
	if r.Method != http.MethodPost || r.Path != "/v1beta/models/gemini-2.0-flash:generateContent" {
		t.Errorf("request = %s %s", r.Method, r.Path)
	}
	if r.RawQuery != "" {
		t.Errorf("query = %q; the key belongs in a header, not the URL", r.RawQuery)
	}
	for k, want := range map[string]string{
		"X-Goog-Api-Key": testKey,
		"Content-Type":   "application/json",
		"Authorization":  "",
	} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	assertJSON(t, r.Body, `{
	  "contents": [
	    {"role": "user", "parts": [{"text": "Hi"}]},
	    {"role": "model", "parts": [{"text": "Hello!"}]},
	    {"role": "user", "parts": [{"text": "What is 2+2?"}]}
	  ],
	  "systemInstruction": {"parts": [{"text": "You are terse."}]},
	  "generationConfig": {"maxOutputTokens": 64}
	}`)
}

func TestGeminiMinimalAndThoughts(t *testing.T) {
	f := newFake(t, reply(200, `{"candidates":[{"content":{"parts":[{"text":"pondering","thought":true},{"text":"Hello"},{"text":", Ada."}],"role":"model"},"finishReason":"STOP","index":0}],
	  "usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":3,"totalTokenCount":6,"thoughtsTokenCount":12},"modelVersion":"gemini-2.5-flash","responseId":"abc"}`))
	b, err := NewGemini(f.URL+"/v1beta", "models/gemini-2.5-flash", "", WithHTTPClient(f.Client()))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.Complete(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "Hi, I am Ada"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hello, Ada." || resp.Model != "gemini-2.5-flash" {
		t.Errorf("resp = %+v", resp)
	}
	r := f.only(t)
	if r.Path != "/v1beta/models/gemini-2.5-flash:generateContent" {
		t.Errorf("path = %s", r.Path)
	}
	if _, ok := r.Header["X-Goog-Api-Key"]; ok {
		t.Error("x-goog-api-key sent without a key")
	}
	assertJSON(t, r.Body, `{"contents":[{"role":"user","parts":[{"text":"Hi, I am Ada"}]}]}`)
}

func TestGeminiDecodeVariants(t *testing.T) {
	for _, tc := range []struct {
		name, body, errSub, typ string
	}{
		{"prompt blocked", `{"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[]},"usageMetadata":{"promptTokenCount":5},"modelVersion":"gemini-2.0-flash"}`, "prompt was blocked", "SAFETY"},
		{"no candidates", `{"modelVersion":"gemini-2.0-flash"}`, "no candidates", ""},
		{"safety stop", `{"candidates":[{"finishReason":"SAFETY","index":0}],"modelVersion":"gemini-2.0-flash"}`, "finish reason: SAFETY", ""},
	} {
		_, e := geminiWire{}.decode([]byte(tc.body))
		if e == nil || !contains(e.Message, tc.errSub) || e.Type != tc.typ {
			t.Errorf("%s: err = %+v, want %q (type %q)", tc.name, e, tc.errSub, tc.typ)
		}
	}
}
