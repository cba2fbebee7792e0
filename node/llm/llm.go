// Package llm holds the pluggable language-model backends behind the `ask` skill.
//
// A [Backend] answers one chat request: a system prompt and a conversation
// history that ends with the new user message. Four kinds exist:
//
//   - "local" ([NewLocal]): an embedded, deterministic responder that needs no
//     network and no key. It says that it is a local responder in every answer,
//     and it answers a question about an earlier turn from that turn.
//   - "openai" ([NewOpenAI]): any OpenAI-compatible chat completions server
//     (OpenAI, DeepSeek, llama.cpp, vLLM, Ollama, …).
//   - "anthropic" ([NewAnthropic]): the Anthropic Messages API.
//   - "gemini" ([NewGemini]): the Gemini API's generateContent method.
//
// Every backend is immutable after construction and safe for concurrent use.
// Remote failures wrap [ErrBackend] and are reported as an [*Error]; malformed
// requests wrap [ErrInvalidRequest]. API keys never appear in errors, logs, or
// the formatted value of a backend; [KeyFromEnv] reads a key from the
// environment or from a file.
package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Role values of a [Message].
const (
	// RoleUser marks a message written by the person or agent asking.
	RoleUser = "user"
	// RoleAssistant marks a message written by the model.
	RoleAssistant = "assistant"
)

// Backend kinds accepted by [New], and returned by [Backend.Name].
const (
	// KindLocal names the embedded deterministic responder.
	KindLocal = "local"
	// KindOpenAI names the OpenAI-compatible chat completions backend.
	KindOpenAI = "openai"
	// KindAnthropic names the Anthropic Messages backend.
	KindAnthropic = "anthropic"
	// KindGemini names the Gemini generateContent backend.
	KindGemini = "gemini"
)

// Defaults applied by the constructors when no [Option] overrides them.
const (
	// DefaultTimeout bounds one Complete call of a remote backend.
	DefaultTimeout = 120 * time.Second
	// DefaultMaxResponseBytes caps the body read from a remote backend.
	DefaultMaxResponseBytes int64 = 8 << 20
)

// ErrBackend is wrapped by every failure of a remote backend: a transport
// error, a timeout, a non-2xx status, an oversized or undecodable body, or an
// answer without text. The concrete error is an [*Error].
var ErrBackend = errors.New("llm: backend error")

// ErrInvalidRequest is wrapped when a [Request] cannot be sent: it has no
// messages, a message has a role other than "user" or "assistant", or the
// last message is not the user's.
var ErrInvalidRequest = errors.New("llm: invalid request")

// Message is one turn of a conversation.
type Message struct {
	// Role is "user" or "assistant".
	Role string `json:"role"`
	// Content is the message text.
	Content string `json:"content"`
}

// Request is one chat completion request.
type Request struct {
	// Model overrides the backend's configured model when not empty.
	Model string
	// System is the system prompt; empty means none.
	System string
	// Messages is the history, oldest first, ending with the new user message.
	Messages []Message
	// MaxTokens caps the length of the answer; zero or less leaves the
	// provider's default, except for Anthropic, which requires a value and
	// gets 4096.
	MaxTokens int
}

// Response is a backend's answer.
type Response struct {
	// Text is the answer.
	Text string
	// Model is the model that answered, as the server reported it (the
	// requested model when the server reported none).
	Model string
}

// Backend answers chat requests. Implementations are safe for concurrent use.
type Backend interface {
	// Name reports the backend kind: "local", "openai", "anthropic" or "gemini".
	Name() string
	// Complete answers req. It honours ctx's cancellation and deadline; the
	// errors of a remote backend wrap [ErrBackend].
	Complete(ctx context.Context, req Request) (Response, error)
}

// Error describes a failed call to a remote backend. It wraps [ErrBackend]
// and, where there is one, the underlying cause (for example
// [context.DeadlineExceeded]). It never holds the API key.
type Error struct {
	// Backend is the backend kind, such as "openai".
	Backend string
	// StatusCode is the HTTP status, or 0 when no response arrived.
	StatusCode int
	// Type is the provider's error type or status (for example
	// "authentication_error" or "UNAUTHENTICATED"), if it sent one.
	Type string
	// Message is the provider's own error message, or a description of what
	// went wrong.
	Message string
	// Err is the underlying cause, or nil.
	Err error
}

// Error formats e as "llm: backend error: <backend>: HTTP <status>: <message> (<type>)".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(ErrBackend.Error())
	b.WriteString(": ")
	b.WriteString(e.Backend)
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.StatusCode)
		if t := http.StatusText(e.StatusCode); t != "" {
			b.WriteString(" " + t)
		}
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Type != "" {
		b.WriteString(" (" + e.Type + ")")
	}
	return b.String()
}

// Unwrap returns [ErrBackend] and, when set, the underlying cause, so that
// errors.Is matches both.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrBackend, e.Err}
	}
	return []error{ErrBackend}
}

// Option configures a remote backend; it returns an error for a value it
// refuses, and the constructor then fails with it. The local backend checks
// and otherwise ignores options.
type Option func(*config) error

type config struct {
	client   *http.Client
	timeout  time.Duration
	maxBytes int64
}

func defaultConfig() config {
	return config{
		client:   &http.Client{},
		timeout:  DefaultTimeout,
		maxBytes: DefaultMaxResponseBytes,
	}
}

// apply applies opts over the defaults; nil options are skipped, and the
// first option that refuses its value ends it with that error.
func (c *config) apply(opts []Option) error {
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(c); err != nil {
			return err
		}
	}
	if c.client == nil {
		c.client = &http.Client{}
	}
	c.client = sameHostRedirects(c.client)
	return nil
}

// WithHTTPClient makes the backend send its requests through c. A nil c
// selects the default, a fresh client on [http.DefaultTransport]. The backend
// uses a copy of c that refuses redirects to another host (Go forwards custom
// headers such as x-api-key across hosts); c itself is not modified.
func WithHTTPClient(c *http.Client) Option {
	return func(cfg *config) error {
		cfg.client = c
		return nil
	}
}

// WithTimeout bounds each Complete call by d, in addition to the caller's
// context. The default is [DefaultTimeout] (120 s); zero disables the bound;
// a negative d makes the constructor fail.
func WithTimeout(d time.Duration) Option {
	return func(cfg *config) error {
		if d < 0 {
			return fmt.Errorf("llm: timeout must not be negative, got %v", d)
		}
		cfg.timeout = d
		return nil
	}
}

// WithMaxResponseBytes caps the response body the backend will read at n
// bytes; a larger body fails the call with [ErrBackend]. The default is
// [DefaultMaxResponseBytes] (8 MiB); n must be positive, or the constructor
// fails.
func WithMaxResponseBytes(n int64) Option {
	return func(cfg *config) error {
		if n <= 0 {
			return fmt.Errorf("llm: max response bytes must be positive, got %d", n)
		}
		cfg.maxBytes = n
		return nil
	}
}

// Kinds returns the backend kinds [New] accepts, sorted.
func Kinds() []string {
	k := []string{KindLocal, KindOpenAI, KindAnthropic, KindGemini}
	sort.Strings(k)
	return k
}

// New builds the backend of the given kind: "local", "openai", "anthropic" or
// "gemini" (case-insensitive). An unknown kind is an error that names it and
// the valid ones, and so is an option that refuses its value. For "local",
// baseURL, apiKey and the options' values are ignored (the options are still
// checked) and a non-empty model replaces the default model name
// "local-echo-1".
func New(kind, baseURL, model, apiKey string, opts ...Option) (Backend, error) {
	switch strings.ToLower(strings.TrimSpace(kind)) {
	case KindLocal:
		cfg := defaultConfig()
		if err := cfg.apply(opts); err != nil {
			return nil, fmt.Errorf("llm: %s: %w", KindLocal, err)
		}
		return newLocal(model), nil
	case KindOpenAI:
		return NewOpenAI(baseURL, model, apiKey, opts...)
	case KindAnthropic:
		return NewAnthropic(baseURL, model, apiKey, opts...)
	case KindGemini:
		return NewGemini(baseURL, model, apiKey, opts...)
	default:
		return nil, fmt.Errorf("llm: unknown backend kind %q (valid: %s)", kind, strings.Join(Kinds(), ", "))
	}
}

// validate checks the shape every backend relies on.
func validate(req Request) error {
	if len(req.Messages) == 0 {
		return fmt.Errorf("%w: no messages", ErrInvalidRequest)
	}
	for i, m := range req.Messages {
		if m.Role != RoleUser && m.Role != RoleAssistant {
			return fmt.Errorf("%w: message %d has role %q (want %q or %q)", ErrInvalidRequest, i, m.Role, RoleUser, RoleAssistant)
		}
	}
	if last := req.Messages[len(req.Messages)-1]; last.Role != RoleUser {
		return fmt.Errorf("%w: the last message must be the user's, got %q", ErrInvalidRequest, last.Role)
	}
	return nil
}

// SameOrigin reports whether a and b have the same scheme, host and port
// (case-insensitive, a scheme's default port made explicit): the test of
// every redirect that may carry a credential, here and in the http custom
// skills.
func SameOrigin(a, b *url.URL) bool { return origin(a) == origin(b) }

func origin(u *url.URL) string {
	scheme, port := strings.ToLower(u.Scheme), u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// sameHostRedirects returns a copy of c that refuses to follow a redirect
// away from the original request's scheme and host, so that an API key sent
// in a custom header never reaches another server. Other redirects go to c's
// own policy, or Go's default of at most 10.
func sameHostRedirects(c *http.Client) *http.Client {
	cc := *c
	next := c.CheckRedirect
	cc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if o := via[0].URL; !SameOrigin(o, req.URL) {
			return fmt.Errorf("refusing redirect from %s://%s to %s://%s", o.Scheme, o.Host, req.URL.Scheme, req.URL.Host)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &cc
}
