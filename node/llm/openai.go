package llm

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// DefaultOpenAIBaseURL is the API root [NewOpenAI] uses when baseURL is empty.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// NewOpenAI returns a backend for any OpenAI-compatible chat completions
// server (OpenAI, DeepSeek, llama.cpp, vLLM, Ollama, …). It POSTs to
// {baseURL}/chat/completions. baseURL may be given with or without a trailing
// /v1: a URL with no path gets /v1 added (so "http://localhost:8080" and
// "http://localhost:8080/v1" are the same), any other path is taken as the API
// root, and a URL already ending in /chat/completions is used as it is. An
// empty baseURL means [DefaultOpenAIBaseURL] and then apiKey is required;
// otherwise apiKey may be empty, and the Authorization header is then left out
// (local servers need none). model is required; a Request's Model overrides
// it. The system prompt travels as the first message with role "system".
// Request.MaxTokens is sent as max_completion_tokens to api.openai.com and as
// max_tokens elsewhere, which is what compatible servers understand.
func NewOpenAI(baseURL, model, apiKey string, opts ...Option) (Backend, error) {
	r, err := newRemote(KindOpenAI, baseURL, DefaultOpenAIBaseURL, model, apiKey, openAIWire{}, opts)
	if err != nil {
		return nil, err
	}
	r.p = openAIWire{official: r.base.Hostname() == "api.openai.com"}
	return r, nil
}

// openAIWire is the chat completions wire format.
type openAIWire struct {
	official bool // api.openai.com: send max_completion_tokens
}

type openAIMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type openAIRequest struct {
	Model               string          `json:"model"`
	Messages            []openAIMessage `json:"messages"`
	MaxTokens           int             `json:"max_tokens,omitempty"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	Stream              bool            `json:"stream"`
}

type openAIResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"` // a string, null, or (some servers) an array of parts
			Refusal *string         `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Error json.RawMessage `json:"error"` // some proxies answer 200 with an error object
}

func (openAIWire) endpoint(base *url.URL, _ string) (string, error) {
	p := base.Path
	switch {
	case strings.HasSuffix(p, "/chat/completions"):
	case p == "":
		p = "/v1/chat/completions"
	default:
		p += "/chat/completions"
	}
	return withPath(base, p), nil
}

func (openAIWire) authorize(h http.Header, key string) {
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
}

func (w openAIWire) encode(req Request, model string) any {
	msgs := make([]openAIMessage, 0, len(req.Messages)+1)
	if req.System != "" {
		msgs = append(msgs, openAIMessage{Role: "system", Content: req.System})
	}
	for _, m := range req.Messages {
		msgs = append(msgs, openAIMessage{Role: m.Role, Content: m.Content})
	}
	out := openAIRequest{Model: model, Messages: msgs}
	if req.MaxTokens > 0 {
		if w.official {
			out.MaxCompletionTokens = req.MaxTokens
		} else {
			out.MaxTokens = req.MaxTokens
		}
	}
	return out
}

func (openAIWire) decode(body []byte) (Response, *Error) {
	var r openAIResponse
	if e := decodeJSON(body, &r); e != nil {
		return Response{}, e
	}
	if len(r.Error) > 0 && string(r.Error) != "null" {
		typ, msg := parseErrorBody(body)
		if msg == "" {
			msg = snippet(r.Error)
		}
		return Response{}, &Error{Type: typ, Message: msg}
	}
	if len(r.Choices) == 0 {
		return Response{}, &Error{Message: "the answer holds no choices"}
	}
	c := r.Choices[0]
	text := contentText(c.Message.Content)
	if text == "" && c.Message.Refusal != nil {
		text = *c.Message.Refusal
	}
	if text == "" {
		return Response{}, noText(c.FinishReason)
	}
	return Response{Text: text, Model: r.Model}, nil
}

// contentText reads a chat message content: a string, or an array of
// {"type":"text","text":…} parts whose texts are concatenated.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
