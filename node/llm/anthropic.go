package llm

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/mcpv2/mcpv2/protocol/translate"
)

// DefaultAnthropicBaseURL is the API root [NewAnthropic] uses when baseURL is empty.
const DefaultAnthropicBaseURL = "https://api.anthropic.com"

// AnthropicVersion is the anthropic-version header value the backend sends.
const AnthropicVersion = "2023-06-01"

// anthropicDefaultMaxTokens is sent when Request.MaxTokens is not positive;
// the Messages API requires max_tokens, and every current model allows 4096.
const anthropicDefaultMaxTokens = 4096

// NewAnthropic returns a backend for the Anthropic Messages API. It POSTs to
// {baseURL}/v1/messages (a baseURL already ending in /v1 or /v1/messages is
// accepted too) with the headers x-api-key and anthropic-version: 2023-06-01.
// The system prompt travels in the top-level "system" field, and max_tokens is
// always sent (4096 when Request.MaxTokens is not positive). An empty baseURL
// means [DefaultAnthropicBaseURL] and then apiKey is required; with another
// baseURL (a proxy) an empty apiKey leaves the x-api-key header out. model is
// required; a Request's Model overrides it. The answer is the concatenation of
// the response's text content blocks.
func NewAnthropic(baseURL, model, apiKey string, opts ...Option) (Backend, error) {
	return newRemote(KindAnthropic, baseURL, DefaultAnthropicBaseURL, model, apiKey, anthropicWire{}, opts)
}

// anthropicWire is the Messages API wire format, written and read with the
// structs of package translate.
type anthropicWire struct{}

func (anthropicWire) endpoint(base *url.URL, _ string) (string, error) {
	p := base.Path
	switch {
	case strings.HasSuffix(p, "/v1/messages"):
	case strings.HasSuffix(p, "/v1"):
		p += "/messages"
	default:
		p += "/v1/messages"
	}
	return withPath(base, p), nil
}

func (anthropicWire) authorize(h http.Header, key string) {
	if key != "" {
		h.Set("x-api-key", key)
	}
	h.Set("anthropic-version", AnthropicVersion)
}

func (anthropicWire) encode(req Request, model string) any {
	max := req.MaxTokens
	if max <= 0 {
		max = anthropicDefaultMaxTokens
	}
	msgs := make([]translate.ClaudeMessage, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = translate.ClaudeMessage{Role: m.Role, Content: translate.TextContent(m.Content)}
	}
	out := translate.ClaudeRequest{Model: model, MaxTokens: max, Messages: msgs}
	if req.System != "" {
		out.System = translate.TextContent(req.System)
	}
	return out
}

func (anthropicWire) decode(body []byte) (Response, *Error) {
	var r translate.ClaudeResponse
	if e := decodeJSON(body, &r); e != nil {
		return Response{}, e
	}
	if r.Type == "error" || r.Error != nil {
		e := &Error{Message: "error in a successful response"}
		if r.Error != nil {
			e.Type, e.Message = r.Error.Type, r.Error.Message
		}
		return Response{}, e
	}
	var b strings.Builder
	for _, c := range r.Content {
		if c.Type == "text" && c.Text != nil {
			b.WriteString(*c.Text)
		}
	}
	if b.Len() == 0 {
		return Response{}, noText(r.StopReason)
	}
	return Response{Text: b.String(), Model: r.Model}, nil
}
