package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcpv2/mcpv2/protocol"
)

// userAgent identifies this package to remote servers.
const userAgent = "mcpv2-llm/1"

// maxErrorMessageRunes caps the provider message carried by an [*Error].
const maxErrorMessageRunes = 500

// provider is the wire format of one remote API.
type provider interface {
	// endpoint returns the URL to POST to for model, or an error wrapping
	// ErrInvalidRequest when model cannot be named in it.
	endpoint(base *url.URL, model string) (string, error)
	// authorize sets the provider's authentication (and version) headers.
	authorize(h http.Header, key string)
	// encode builds the JSON request body.
	encode(req Request, model string) any
	// decode parses a 2xx response body. A returned *Error needs only
	// Message (and Type); the caller fills in Backend and StatusCode.
	decode(body []byte) (Response, *Error)
}

// remote is a Backend that speaks HTTP to a provider. It is immutable after
// construction and safe for concurrent use.
type remote struct {
	kind  string
	model string
	key   string
	base  *url.URL // normalized: no trailing slash, no fragment
	cfg   config
	p     provider
}

// newRemote validates the common arguments and applies opts. defaultBase is
// used when baseURL is empty, and then a key is required.
func newRemote(kind, baseURL, defaultBase, model, apiKey string, p provider, opts []Option) (*remote, error) {
	model = strings.TrimSpace(model)
	if model == "" {
		return nil, fmt.Errorf("llm: %s: a model name is required", kind)
	}
	if apiKey != "" {
		if err := checkKey(apiKey); err != nil {
			return nil, fmt.Errorf("llm: %s: API key: %w", kind, err)
		}
	}
	official := strings.TrimSpace(baseURL) == ""
	if official && apiKey == "" {
		return nil, fmt.Errorf("llm: %s: an API key is required for %s (set %s or %s)", kind, defaultBase, EnvAPIKey, EnvAPIKeyFile)
	}
	raw := strings.TrimSpace(baseURL)
	if official {
		raw = defaultBase
	}
	base, err := parseBase(raw)
	if err != nil {
		return nil, fmt.Errorf("llm: %s: base URL: %w", kind, err)
	}
	if _, err := p.endpoint(base, model); err != nil {
		return nil, fmt.Errorf("llm: %s: %w", kind, err)
	}
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return nil, fmt.Errorf("llm: %s: %w", kind, err)
	}
	return &remote{kind: kind, model: model, key: apiKey, base: base, cfg: cfg, p: p}, nil
}

// parseBase parses an http(s) URL and trims its trailing slashes.
func parseBase(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q: scheme must be http or https", u.Redacted())
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%q: no host", u.Redacted())
	}
	u.Fragment, u.RawFragment = "", ""
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// withPath returns a copy of base whose path is p (query kept).
func withPath(base *url.URL, p string) string {
	u := *base
	u.Path = p
	u.RawPath = ""
	return u.String()
}

// Name reports the backend kind.
func (r *remote) Name() string { return r.kind }

// String describes the backend without its key.
func (r *remote) String() string {
	return fmt.Sprintf("llm.%s(%s, model=%s)", r.kind, r.base.Redacted(), r.model)
}

// Format prints the backend as String does for every verb, so that the key
// never reaches a log through %v, %+v or %#v.
func (r *remote) Format(f fmt.State, _ rune) { io.WriteString(f, r.String()) }

// Complete sends req to the provider and returns its answer.
func (r *remote) Complete(ctx context.Context, req Request) (Response, error) {
	if err := validate(req); err != nil {
		return Response{}, err
	}
	model := strings.TrimSpace(req.Model)
	if model == "" {
		model = r.model
	}
	endpoint, err := r.p.endpoint(r.base, model)
	if err != nil {
		return Response{}, err
	}
	body, status, err := r.post(ctx, endpoint, r.p.encode(req, model))
	if err != nil {
		return Response{}, err
	}
	resp, perr := r.p.decode(body)
	if perr != nil {
		perr.Backend, perr.StatusCode = r.kind, status
		perr.Message = r.clean(perr.Message)
		return Response{}, perr
	}
	if resp.Model == "" {
		resp.Model = model
	}
	return resp, nil
}

// post sends payload as JSON and returns the body of a 2xx answer with its
// status. Every failure is an *Error.
func (r *remote) post(ctx context.Context, endpoint string, payload any) ([]byte, int, error) {
	data, err := json.Marshal(payload)
	if err != nil {
		return nil, 0, r.fail(0, "encoding request: "+err.Error(), err)
	}
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if r.cfg.timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, r.cfg.timeout)
	}
	defer cancel()

	hreq, err := http.NewRequestWithContext(cctx, http.MethodPost, endpoint, bytes.NewReader(data))
	if err != nil {
		return nil, 0, r.fail(0, "building request: "+err.Error(), err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("User-Agent", userAgent)
	r.p.authorize(hreq.Header, r.key)

	hresp, err := r.cfg.client.Do(hreq)
	if err != nil {
		return nil, 0, r.transportError(ctx, cctx, 0, err)
	}
	defer hresp.Body.Close()

	max := r.cfg.maxBytes
	body, err := io.ReadAll(io.LimitReader(hresp.Body, max+1))
	if err != nil {
		return nil, hresp.StatusCode, r.transportError(ctx, cctx, hresp.StatusCode, fmt.Errorf("reading response: %w", err))
	}
	if int64(len(body)) > max {
		return nil, hresp.StatusCode, r.fail(hresp.StatusCode, fmt.Sprintf("response body exceeds the limit of %d bytes", max), nil)
	}
	if hresp.StatusCode < 200 || hresp.StatusCode > 299 {
		typ, msg := parseErrorBody(body)
		if msg == "" {
			msg = snippet(body)
		}
		e := r.fail(hresp.StatusCode, msg, nil)
		e.Type = r.clean(typ)
		return nil, hresp.StatusCode, e
	}
	return body, hresp.StatusCode, nil
}

// transportError reports a failed exchange, naming our own timeout apart
// from the caller's cancellation.
func (r *remote) transportError(parent, cctx context.Context, status int, err error) *Error {
	if parent.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return r.fail(status, fmt.Sprintf("no answer within %v", r.cfg.timeout), context.DeadlineExceeded)
	}
	if perr := parent.Err(); perr != nil {
		return r.fail(status, perr.Error(), perr)
	}
	return r.fail(status, err.Error(), err)
}

// fail builds an *Error with a cleaned message.
func (r *remote) fail(status int, msg string, cause error) *Error {
	return &Error{Backend: r.kind, StatusCode: status, Message: r.clean(msg), Err: cause}
}

// clean removes the API key, control characters and excess length from a
// message that came from the network.
func (r *remote) clean(s string) string {
	if r.key != "" {
		s = strings.ReplaceAll(s, r.key, "[redacted]")
	}
	return sanitize(s)
}

// sanitize collapses white space, drops control and invalid characters, and
// caps the length.
func sanitize(s string) string {
	var b strings.Builder
	n, space := 0, false
	for _, c := range s {
		if c == utf8.RuneError || (unicode.IsControl(c) && !unicode.IsSpace(c)) {
			continue
		}
		if unicode.IsSpace(c) {
			space = b.Len() > 0
			continue
		}
		if n >= maxErrorMessageRunes {
			b.WriteString("…")
			break
		}
		if space {
			b.WriteByte(' ')
			space = false
			n++
		}
		b.WriteRune(c)
		n++
	}
	return b.String()
}

// snippet describes a body that carried no recognizable error message.
func snippet(body []byte) string {
	s := sanitize(string(body))
	if s == "" {
		return "empty response body"
	}
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return "response: " + s
}

// parseErrorBody extracts the error type and message from the error shapes
// the providers use:
//
//	OpenAI, Ollama, llama.cpp: {"error":{"message","type","code"}}
//	Anthropic:                 {"type":"error","error":{"type","message"}}
//	Gemini:                    {"error":{"code","message","status"}} (also in a one-element array)
//	vLLM:                      {"object":"error","message","type","code"}
//	others:                    {"error":"text"}, {"detail":"text"}
func parseErrorBody(body []byte) (typ, msg string) {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return "", ""
	}
	if a, ok := v.([]any); ok && len(a) > 0 {
		v = a[0]
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return "", ""
	}
	switch e := obj["error"].(type) {
	case string:
		return "", e
	case map[string]any:
		return firstString(e, "type", "status", "code"), firstString(e, "message")
	}
	if m := firstString(obj, "message"); m != "" {
		return firstString(obj, "type"), m
	}
	if d := firstString(obj, "detail"); d != "" {
		return "", d
	}
	return "", ""
}

// firstString returns the first non-empty string value among keys.
func firstString(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := m[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// decodeJSON unmarshals a 2xx body with protocol.Unmarshal (member names
// match exactly; the body must be UTF-8), reporting failures as an *Error.
func decodeJSON(body []byte, v any) *Error {
	if err := protocol.Unmarshal(body, v); err != nil {
		return &Error{Message: "invalid JSON in response: " + protocol.JSONErrorText(err), Err: err}
	}
	return nil
}

// noText reports an answer that carried no text.
func noText(reason string) *Error {
	if reason == "" {
		return &Error{Message: "the answer holds no text"}
	}
	return &Error{Message: "the answer holds no text (finish reason: " + reason + ")"}
}
