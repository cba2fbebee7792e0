package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testKey = "sk-test-0123456789abcdefSECRET"

// recorded is one request a fakeServer received.
type recorded struct {
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	Body     []byte
}

// fakeServer is an httptest.Server that records requests and answers with a
// handler.
type fakeServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

func newFake(t *testing.T, h http.HandlerFunc) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
		f.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// count returns how many requests arrived.
func (f *fakeServer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

// only returns the single recorded request.
func (f *fakeServer) only(t *testing.T) recorded {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) != 1 {
		t.Fatalf("server got %d requests, want 1", len(f.reqs))
	}
	return f.reqs[0]
}

// reply answers every request with status and a JSON body.
func reply(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// assertJSON fails unless got and want are the same JSON value.
func assertJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("request body is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("request body:\n got %s\nwant %s", got, want)
	}
}

// conversation is a history with a system prompt and an earlier exchange.
var conversation = Request{
	System: "You are terse.",
	Messages: []Message{
		{Role: RoleUser, Content: "Hi"},
		{Role: RoleAssistant, Content: "Hello!"},
		{Role: RoleUser, Content: "What is 2+2?"},
	},
	MaxTokens: 64,
}

func TestNewKinds(t *testing.T) {
	for _, tc := range []struct {
		kind, base, want string
	}{
		{"local", "", KindLocal},
		{"LOCAL", "", KindLocal},
		{"openai", "http://127.0.0.1:1", KindOpenAI},
		{" Anthropic ", "http://127.0.0.1:1", KindAnthropic},
		{"gemini", "http://127.0.0.1:1", KindGemini},
	} {
		b, err := New(tc.kind, tc.base, "m1", "")
		if err != nil {
			t.Errorf("New(%q): %v", tc.kind, err)
			continue
		}
		if b.Name() != tc.want {
			t.Errorf("New(%q).Name() = %q, want %q", tc.kind, b.Name(), tc.want)
		}
	}
}

func TestNewUnknownKind(t *testing.T) {
	_, err := New("gpt5", "", "", "")
	if err == nil {
		t.Fatal("New(gpt5) succeeded")
	}
	for _, s := range []string{`"gpt5"`, "local", "openai", "anthropic", "gemini"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %s", err, s)
		}
	}
}

func TestNewLocalModel(t *testing.T) {
	b, err := New("local", "ignored", "my-local", "ignored")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.Complete(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "my-local" {
		t.Errorf("model = %q, want my-local", resp.Model)
	}
}

// TestOptionErrors: an option that refuses its value fails New for every
// kind, the local one included, and a nil option is skipped.
func TestOptionErrors(t *testing.T) {
	for _, kind := range Kinds() {
		if _, err := New(kind, "http://127.0.0.1:1", "m", "", WithMaxResponseBytes(-1)); err == nil || !strings.Contains(err.Error(), "max response bytes") {
			t.Errorf("%s: err = %v, want the max response bytes refused", kind, err)
		}
		if _, err := New(kind, "http://127.0.0.1:1", "m", "", nil, WithTimeout(0)); err != nil {
			t.Errorf("%s with a nil option and no timeout: %v", kind, err)
		}
	}
}

func TestRemoteConstructorErrors(t *testing.T) {
	ctors := map[string]func(string, string, string, ...Option) (Backend, error){
		KindOpenAI: NewOpenAI, KindAnthropic: NewAnthropic, KindGemini: NewGemini,
	}
	for kind, ctor := range ctors {
		for _, tc := range []struct {
			name, base, model, key string
			opts                   []Option
			want                   string
		}{
			{"no model", "http://127.0.0.1:1", " ", "", nil, "model name is required"},
			{"official needs key", "", "m", "", nil, "API key is required"},
			{"key with newline", "http://127.0.0.1:1", "m", "abc\ndef", nil, "white space"},
			{"bad scheme", "ftp://example.com", "m", "", nil, "scheme must be http or https"},
			{"no host", "http://", "m", "", nil, "no host"},
			{"unparsable", "http://[::1", "m", "", nil, "base URL"},
			{"negative timeout", "http://127.0.0.1:1", "m", "", []Option{WithTimeout(-time.Second)}, "timeout"},
			{"zero max bytes", "http://127.0.0.1:1", "m", "", []Option{WithMaxResponseBytes(0)}, "max response bytes"},
		} {
			_, err := ctor(tc.base, tc.model, tc.key, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), kind) {
				t.Errorf("%s %s: err = %v, want one naming %q and %s", kind, tc.name, err, tc.want, kind)
			}
			if err != nil && tc.key != "" && strings.Contains(err.Error(), tc.key) {
				t.Errorf("%s %s: error reveals the key: %v", kind, tc.name, err)
			}
		}
		// New fails the same way, whatever the kind.
		if _, err := New(kind, "http://127.0.0.1:1", "m", "", WithTimeout(-time.Second)); err == nil || !strings.Contains(err.Error(), "timeout") {
			t.Errorf("New(%s) with a negative timeout: err = %v", kind, err)
		}
		// The official endpoint with a key is fine, and so is a custom one without.
		if _, err := ctor("", "m", testKey); err != nil {
			t.Errorf("%s official with key: %v", kind, err)
		}
		if _, err := ctor("http://127.0.0.1:1", "m", ""); err != nil {
			t.Errorf("%s custom without key: %v", kind, err)
		}
	}
}

func TestEndpoints(t *testing.T) {
	for _, tc := range []struct {
		kind, base, model, want string
	}{
		{KindOpenAI, "", "gpt-4o", "https://api.openai.com/v1/chat/completions"},
		{KindOpenAI, "http://localhost:8080", "m", "http://localhost:8080/v1/chat/completions"},
		{KindOpenAI, "http://localhost:8080/", "m", "http://localhost:8080/v1/chat/completions"},
		{KindOpenAI, "http://localhost:8080/v1", "m", "http://localhost:8080/v1/chat/completions"},
		{KindOpenAI, "http://localhost:8080/v1/", "m", "http://localhost:8080/v1/chat/completions"},
		{KindOpenAI, "http://localhost:11434/v1/chat/completions", "m", "http://localhost:11434/v1/chat/completions"},
		{KindOpenAI, "https://api.deepseek.com", "deepseek-chat", "https://api.deepseek.com/v1/chat/completions"},
		{KindOpenAI, "https://generativelanguage.googleapis.com/v1beta/openai/", "m", "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions"},
		{KindOpenAI, "https://proxy.example/v1?api-version=2024-06-01#frag", "m", "https://proxy.example/v1/chat/completions?api-version=2024-06-01"},
		{KindAnthropic, "", "claude-sonnet-4-20250514", "https://api.anthropic.com/v1/messages"},
		{KindAnthropic, "http://proxy:9000/", "m", "http://proxy:9000/v1/messages"},
		{KindAnthropic, "http://proxy:9000/v1", "m", "http://proxy:9000/v1/messages"},
		{KindAnthropic, "http://proxy:9000/v1/messages", "m", "http://proxy:9000/v1/messages"},
		{KindAnthropic, "http://proxy:9000/anthropic", "m", "http://proxy:9000/anthropic/v1/messages"},
		{KindGemini, "", "gemini-2.0-flash", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent"},
		{KindGemini, "", "models/gemini-2.5-pro", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:generateContent"},
		{KindGemini, "", "tunedModels/my-model-42", "https://generativelanguage.googleapis.com/v1beta/tunedModels/my-model-42:generateContent"},
		{KindGemini, "http://proxy/v1beta/", "gemini-2.0-flash", "http://proxy/v1beta/models/gemini-2.0-flash:generateContent"},
		{KindGemini, "http://proxy/v1", "gemini-2.0-flash", "http://proxy/v1/models/gemini-2.0-flash:generateContent"},
	} {
		b, err := New(tc.kind, tc.base, tc.model, testKey)
		if err != nil {
			t.Errorf("%s %q: %v", tc.kind, tc.base, err)
			continue
		}
		r := b.(*remote)
		got, err := r.p.endpoint(r.base, tc.model)
		if err != nil || got != tc.want {
			t.Errorf("%s %q %q: endpoint = %q, %v; want %q", tc.kind, tc.base, tc.model, got, err, tc.want)
		}
	}
}

func TestGeminiModelNameChecked(t *testing.T) {
	for _, m := range []string{"../../v1/files", "models/../x", "a/b", "gemini 2", "-x", "tunedModels/", "x?key=1"} {
		if _, err := NewGemini("http://127.0.0.1:1", m, ""); err == nil || !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("NewGemini model %q: err = %v, want ErrInvalidRequest", m, err)
		}
	}
	// A bad per-request model is refused before anything is sent.
	f := newFake(t, reply(200, `{}`))
	b, err := NewGemini(f.URL, "gemini-2.0-flash", "", WithHTTPClient(f.Client()))
	if err != nil {
		t.Fatal(err)
	}
	req := conversation
	req.Model = "../admin"
	if _, err := b.Complete(context.Background(), req); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("Complete with model ../admin: err = %v, want ErrInvalidRequest", err)
	}
	if n := f.count(); n != 0 {
		t.Errorf("server got %d requests, want 0", n)
	}
}

func TestFormatHidesKey(t *testing.T) {
	for _, kind := range []string{KindOpenAI, KindAnthropic, KindGemini} {
		b, err := New(kind, "", "m", testKey)
		if err != nil {
			t.Fatal(err)
		}
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			s := fmt.Sprintf(verb, b)
			if strings.Contains(s, testKey) || !strings.Contains(s, kind) {
				t.Errorf("%s %s = %q: reveals key or misses kind", kind, verb, s)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	b := NewLocal()
	for _, tc := range []struct {
		name string
		msgs []Message
	}{
		{"empty", nil},
		{"bad role", []Message{{Role: "system", Content: "x"}, {Role: RoleUser, Content: "hi"}}},
		{"ends with assistant", []Message{{Role: RoleUser, Content: "hi"}, {Role: RoleAssistant, Content: "yo"}}},
	} {
		if _, err := b.Complete(context.Background(), Request{Messages: tc.msgs}); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: err = %v, want ErrInvalidRequest", tc.name, err)
		}
	}
	// Remote backends refuse the same requests without sending them.
	f := newFake(t, reply(200, `{}`))
	for _, kind := range []string{KindOpenAI, KindAnthropic, KindGemini} {
		r, err := New(kind, f.URL, "m", "", WithHTTPClient(f.Client()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Complete(context.Background(), Request{}); !errors.Is(err, ErrInvalidRequest) || errors.Is(err, ErrBackend) {
			t.Errorf("%s empty request: err = %v, want ErrInvalidRequest only", kind, err)
		}
	}
	if n := f.count(); n != 0 {
		t.Errorf("server got %d requests for invalid input", n)
	}
}

func TestKeyFromEnv(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "  sk-from-file-123\n")
	empty := write("empty", " \n\t")
	twoLines := write("two", "sk-one\nsk-two\n")
	big := write("big", strings.Repeat("k", maxKeyFileBytes+1))

	for _, tc := range []struct {
		name, key, file, want, wantErr string
	}{
		{name: "neither", want: ""},
		{name: "env", key: " sk-env-456 \n", want: "sk-env-456"},
		{name: "file", file: good, want: "sk-from-file-123"},
		{name: "both", key: "sk-env", file: good, wantErr: "set only one"},
		{name: "missing file", file: filepath.Join(dir, "nope"), wantErr: "no such file"},
		{name: "empty file", file: empty, wantErr: "is empty"},
		{name: "two lines", file: twoLines, wantErr: "white space"},
		{name: "env with space", key: "sk one", wantErr: "white space"},
		{name: "big file", file: big, wantErr: "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvAPIKey, tc.key)
			t.Setenv(EnvAPIKeyFile, tc.file)
			got, err := KeyFromEnv()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				for _, secret := range []string{"sk-one", "sk-two", "sk-env", "sk one"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error reveals key material %q: %v", secret, err)
					}
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("KeyFromEnv() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	e := &Error{Backend: "openai", StatusCode: 401, Type: "invalid_request_error", Message: "Incorrect API key provided"}
	want := "llm: backend error: openai: HTTP 401 Unauthorized: Incorrect API key provided (invalid_request_error)"
	if e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
	if !errors.Is(e, ErrBackend) {
		t.Error("not ErrBackend")
	}
	e2 := &Error{Backend: "gemini", Message: "x", Err: context.DeadlineExceeded}
	if !errors.Is(e2, ErrBackend) || !errors.Is(e2, context.DeadlineExceeded) {
		t.Error("Unwrap misses a cause")
	}
}

func TestParseErrorBody(t *testing.T) {
	for _, tc := range []struct{ body, typ, msg string }{
		{`{"error":{"message":"Incorrect API key provided: sk-te***","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, "invalid_request_error", "Incorrect API key provided: sk-te***"},
		{`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_1"}`, "authentication_error", "invalid x-api-key"},
		{`{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}`, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."},
		{`[{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}]`, "RESOURCE_EXHAUSTED", "Resource has been exhausted"},
		{`{"object":"error","message":"The model does not exist.","type":"NotFoundError","param":null,"code":404}`, "NotFoundError", "The model does not exist."},
		{`{"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}`, "authentication_error", "Invalid API Key"},
		{`{"error":"model 'llama9' not found"}`, "", "model 'llama9' not found"},
		{`{"detail":"Not Found"}`, "", "Not Found"},
		{`<html>502 Bad Gateway</html>`, "", ""},
		{`{"unrelated":true}`, "", ""},
		{``, "", ""},
	} {
		typ, msg := parseErrorBody([]byte(tc.body))
		if typ != tc.typ || msg != tc.msg {
			t.Errorf("parseErrorBody(%s) = %q, %q; want %q, %q", tc.body, typ, msg, tc.typ, tc.msg)
		}
	}
}

func TestSanitize(t *testing.T) {
	in := "line one\n\tline\x00 two\x1b[31m " + strings.Repeat("x", 2*maxErrorMessageRunes)
	got := sanitize(in)
	if strings.ContainsAny(got, "\n\t\x00\x1b") {
		t.Errorf("sanitize left control characters: %q", got)
	}
	if !strings.HasPrefix(got, "line one line two[31m x") || !strings.HasSuffix(got, "…") {
		t.Errorf("sanitize = %q", got[:40])
	}
	if n := len([]rune(got)); n > maxErrorMessageRunes+1 {
		t.Errorf("sanitize kept %d runes", n)
	}
}

func FuzzParseErrorBody(f *testing.F) {
	f.Add([]byte(`{"error":{"message":"m","type":"t"}}`))
	f.Add([]byte(`[{"error":{"message":"m","status":"S"}}]`))
	f.Add([]byte(`{"message":"m"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseErrorBody(b)
		snippet(b)
	})
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(openAIOK))
	f.Add([]byte(anthropicOK))
	f.Add([]byte(geminiOK))
	f.Add([]byte(`{"choices":[{"message":{"content":[{"type":"text","text":"a"}]}}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, w := range []provider{openAIWire{}, anthropicWire{}, geminiWire{}} {
			resp, e := w.decode(b)
			if e == nil && resp.Text == "" {
				t.Errorf("%T decoded an empty answer without error", w)
			}
		}
	})
}
