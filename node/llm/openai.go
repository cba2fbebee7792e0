package llm

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/mcpv2/mcpv2/protocol/translate"
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
// max_tokens elsewhere, which is what compatible servers understand. The
// answer is the first choice's content; a content given as an array of parts
// (some servers) reads as [translate.ContentText] reads it, one line a part,
// and a refusal stands in for an empty content.
func NewOpenAI(baseURL, model, apiKey string, opts ...Option) (Backend, error) {
	r, err := newRemote(KindOpenAI, baseURL, DefaultOpenAIBaseURL, model, apiKey, openAIWire{}, opts)
	if err != nil {
		return nil, err
	}
	r.p = openAIWire{official: r.base.Hostname() == "api.openai.com"}
	return r, nil
}

// openAIWire is the chat completions wire format, written and read with the
// structs of package translate.
type openAIWire struct {
	official bool // api.openai.com: send max_completion_tokens
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
	msgs := make([]translate.OpenAIMessage, 0, len(req.Messages)+1)
	if req.System != "" {
		msgs = append(msgs, translate.OpenAIMessage{Role: "system", Content: translate.TextContent(req.System)})
	}
	for _, m := range req.Messages {
		msgs = append(msgs, translate.OpenAIMessage{Role: m.Role, Content: translate.TextContent(m.Content)})
	}
	out := translate.OpenAIRequest{Model: model, Messages: msgs}
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
	var r translate.OpenAIResponse
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
	text := translate.ContentText(c.Message.Content)
	if text == "" && c.Message.Refusal != nil {
		text = *c.Message.Refusal
	}
	if text == "" {
		return Response{}, noText(c.FinishReason)
	}
	return Response{Text: text, Model: r.Model}, nil
}
