package llm

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/mcpv2/mcpv2/protocol/translate"
)

// DefaultGeminiBaseURL is the API root [NewGemini] uses when baseURL is empty.
const DefaultGeminiBaseURL = "https://generativelanguage.googleapis.com"

// NewGemini returns a backend for the Gemini API. It POSTs to
// {baseURL}/v1beta/models/{model}:generateContent (a baseURL already ending
// in an API version such as /v1beta or /v1 is used as it is) with the API key
// in the x-goog-api-key header, never in the URL. The system prompt travels as
// systemInstruction, assistant turns get the role "model", and
// Request.MaxTokens becomes generationConfig.maxOutputTokens. An empty baseURL
// means [DefaultGeminiBaseURL] and then apiKey is required. model is required
// ("gemini-2.5-flash", "models/gemini-2.5-flash" or "tunedModels/…"); a
// Request's Model overrides it. The answer
// is the concatenation of candidates[0].content.parts[].text, leaving out
// thought parts, and the reported model is the response's modelVersion.
func NewGemini(baseURL, model, apiKey string, opts ...Option) (Backend, error) {
	return newRemote(KindGemini, baseURL, DefaultGeminiBaseURL, model, apiKey, geminiWire{}, opts)
}

// geminiWire is the generateContent wire format, written and read with the
// structs of package translate.
type geminiWire struct{}

// geminiVersion reports whether a path segment names an API version
// ("v1", "v1beta", "v1alpha", …).
func geminiVersion(seg string) bool {
	return len(seg) >= 2 && seg[0] == 'v' && seg[1] >= '0' && seg[1] <= '9'
}

// geminiModelPath turns a model name into its resource path: "gemini-2.5-flash"
// and "models/gemini-2.5-flash" become "models/gemini-2.5-flash", and
// "tunedModels/x" stays as it is. The name is checked, because it becomes part
// of the URL path and may come from a remote caller.
func geminiModelPath(model string) (string, error) {
	coll, name := "models", strings.TrimPrefix(model, "models/")
	if rest, ok := strings.CutPrefix(model, "tunedModels/"); ok {
		coll, name = "tunedModels", rest
	}
	if name == "" || !modelNameOK(name) {
		return "", fmt.Errorf("%w: Gemini model name %q must be letters, digits, '.', '_' and '-'", ErrInvalidRequest, model)
	}
	return coll + "/" + name, nil
}

// modelNameOK reports whether s is a plain model identifier.
func modelNameOK(s string) bool {
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

func (geminiWire) endpoint(base *url.URL, model string) (string, error) {
	res, err := geminiModelPath(model)
	if err != nil {
		return "", err
	}
	p := base.Path
	if !geminiVersion(p[strings.LastIndexByte(p, '/')+1:]) {
		p += "/v1beta"
	}
	return withPath(base, p+"/"+res+":generateContent"), nil
}

func (geminiWire) authorize(h http.Header, key string) {
	if key != "" {
		h.Set("x-goog-api-key", key)
	}
}

func (geminiWire) encode(req Request, _ string) any {
	out := translate.GeminiRequest{Contents: make([]translate.GeminiContent, 0, len(req.Messages))}
	for _, m := range req.Messages {
		role := "user"
		if m.Role == RoleAssistant {
			role = "model"
		}
		out.Contents = append(out.Contents, translate.GeminiContent{Role: role, Parts: []translate.GeminiPart{{Text: &m.Content}}})
	}
	if req.System != "" {
		out.SystemInstruction = &translate.GeminiContent{Parts: []translate.GeminiPart{{Text: &req.System}}}
	}
	if req.MaxTokens > 0 {
		out.GenerationConfig = &translate.GeminiGenerationConfig{MaxOutputTokens: req.MaxTokens}
	}
	return out
}

func (geminiWire) decode(body []byte) (Response, *Error) {
	var r translate.GeminiResponse
	if e := decodeJSON(body, &r); e != nil {
		return Response{}, e
	}
	if len(r.Candidates) == 0 {
		if f := r.PromptFeedback; f != nil && f.BlockReason != "" {
			msg := "the prompt was blocked"
			if f.BlockReasonMessage != "" {
				msg += ": " + f.BlockReasonMessage
			}
			return Response{}, &Error{Type: f.BlockReason, Message: msg}
		}
		return Response{}, &Error{Message: "the answer holds no candidates"}
	}
	c := r.Candidates[0]
	var b strings.Builder
	for _, p := range c.Content.Parts {
		if !p.Thought && p.Text != nil {
			b.WriteString(*p.Text)
		}
	}
	if b.Len() == 0 {
		return Response{}, noText(c.FinishReason)
	}
	return Response{Text: b.String(), Model: r.ModelVersion}, nil
}
