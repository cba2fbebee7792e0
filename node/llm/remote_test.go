package llm

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// backends lists each remote kind with its real 401 body and the provider
// message and type that must surface from it.
var backends = []struct {
	kind, unauthorized, msg, typ, ok string
}{
	{KindOpenAI, openAI401, "Incorrect API key provided", "invalid_request_error", openAIOK},
	{KindAnthropic, anthropic401, "invalid x-api-key", "authentication_error", anthropicOK},
	{KindGemini, gemini401, "Request had invalid authentication credentials", "UNAUTHENTICATED", geminiOK},
}

// backendError asserts that err is an *Error of kind wrapping ErrBackend and
// not revealing testKey, and returns it.
func backendError(t *testing.T, kind string, err error) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", kind)
	}
	if !errors.Is(err, ErrBackend) {
		t.Errorf("%s: %v does not wrap ErrBackend", kind, err)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: %T is not *Error", kind, err)
	}
	if e.Backend != kind || !strings.Contains(err.Error(), kind) {
		t.Errorf("%s: error does not name its backend: %v", kind, err)
	}
	if strings.Contains(err.Error(), testKey) || strings.Contains(e.Message, testKey) {
		t.Errorf("%s: error reveals the API key: %v", kind, err)
	}
	return e
}

func newBackend(t *testing.T, kind string, f *fakeServer, opts ...Option) Backend {
	t.Helper()
	b, err := New(kind, f.URL, "test-model", testKey, append([]Option{WithHTTPClient(f.Client())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var hello = Request{Messages: []Message{{Role: RoleUser, Content: "Hello"}}}

func TestRemoteUnauthorized(t *testing.T) {
	for _, bk := range backends {
		f := newFake(t, reply(http.StatusUnauthorized, bk.unauthorized))
		_, err := newBackend(t, bk.kind, f).Complete(context.Background(), hello)
		e := backendError(t, bk.kind, err)
		if e.StatusCode != 401 || !strings.Contains(err.Error(), "HTTP 401") {
			t.Errorf("%s: status not reported: %v", bk.kind, err)
		}
		if !strings.Contains(e.Message, bk.msg) || e.Type != bk.typ || !strings.Contains(err.Error(), bk.msg) {
			t.Errorf("%s: provider message lost: %+v", bk.kind, e)
		}
	}
}

func TestRemoteServerErrors(t *testing.T) {
	for _, bk := range backends {
		for _, tc := range []struct {
			name, ctype, body string
			status            int
			want              []string
		}{
			{"500 plain", "text/plain", "upstream connect error or disconnect/reset before headers", 500, []string{"HTTP 500 Internal Server Error", "upstream connect error"}},
			{"502 html", "text/html", "<html><body><h1>502 Bad Gateway</h1></body></html>", 502, []string{"HTTP 502", "502 Bad Gateway"}},
			{"503 empty", "text/plain", "", 503, []string{"HTTP 503", "empty response body"}},
			{"529 overloaded", "application/json", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 529, []string{"HTTP 529", "Overloaded (overloaded_error)"}},
			{"429 gemini array", "application/json", `[{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}]`, 429, []string{"HTTP 429 Too Many Requests", "Resource has been exhausted", "RESOURCE_EXHAUSTED"}},
			{"key echoed", "application/json", `{"error":{"message":"bad key ` + testKey + `","type":"invalid_request_error"}}`, 401, []string{"bad key [redacted]"}},
		} {
			f := newFake(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			_, err := newBackend(t, bk.kind, f).Complete(context.Background(), hello)
			e := backendError(t, bk.kind, err)
			if e.StatusCode != tc.status {
				t.Errorf("%s %s: status = %d", bk.kind, tc.name, e.StatusCode)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s %s: %q lacks %q", bk.kind, tc.name, err, w)
				}
			}
		}
	}
}

func TestRemoteOversizedBody(t *testing.T) {
	const limit = 1024
	for _, bk := range backends {
		for _, status := range []int{200, 500} {
			f := newFake(t, reply(status, `{"pad":"`+strings.Repeat("x", 4*limit)+`"}`))
			_, err := newBackend(t, bk.kind, f, WithMaxResponseBytes(limit)).Complete(context.Background(), hello)
			e := backendError(t, bk.kind, err)
			if !strings.Contains(e.Message, "exceeds the limit of 1024 bytes") || e.StatusCode != status {
				t.Errorf("%s %d: %v", bk.kind, status, err)
			}
		}
		// Exactly at the limit is fine.
		f := newFake(t, reply(200, bk.ok))
		if _, err := newBackend(t, bk.kind, f, WithMaxResponseBytes(int64(len(bk.ok)))).Complete(context.Background(), hello); err != nil {
			t.Errorf("%s: body of exactly the limit refused: %v", bk.kind, err)
		}
	}
}

func TestRemoteInvalidJSON(t *testing.T) {
	for _, bk := range backends {
		for _, body := range []string{`{"choices":[`, `<html>ok</html>`, `"just a string"`} {
			f := newFake(t, reply(200, body))
			_, err := newBackend(t, bk.kind, f).Complete(context.Background(), hello)
			e := backendError(t, bk.kind, err)
			if !strings.Contains(e.Message, "invalid JSON") || e.StatusCode != 200 {
				t.Errorf("%s %q: %v", bk.kind, body, err)
			}
		}
	}
}

// stall answers only when the request is abandoned (or after 10 s).
func stall(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

func TestRemoteContextDeadline(t *testing.T) {
	for _, bk := range backends {
		f := newFake(t, stall)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		start := time.Now()
		_, err := newBackend(t, bk.kind, f).Complete(ctx, hello)
		cancel()
		backendError(t, bk.kind, err)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v is not DeadlineExceeded", bk.kind, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v to honour the deadline", bk.kind, d)
		}
	}
}

func TestRemoteContextCancel(t *testing.T) {
	for _, bk := range backends {
		f := newFake(t, stall)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(30*time.Millisecond, cancel)
		_, err := newBackend(t, bk.kind, f).Complete(ctx, hello)
		backendError(t, bk.kind, err)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v is not Canceled", bk.kind, err)
		}
	}
}

func TestRemoteOwnTimeout(t *testing.T) {
	for _, bk := range backends {
		f := newFake(t, stall)
		_, err := newBackend(t, bk.kind, f, WithTimeout(50*time.Millisecond)).Complete(context.Background(), hello)
		e := backendError(t, bk.kind, err)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(e.Message, "no answer within 50ms") {
			t.Errorf("%s: %v", bk.kind, err)
		}
	}
}

func TestRemoteTimeoutDuringBody(t *testing.T) {
	// Headers arrive at once, the body never finishes.
	for _, bk := range backends {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(200)
			io.WriteString(w, `{"candidates":[`)
			w.(http.Flusher).Flush()
			stall(w, r)
		})
		_, err := newBackend(t, bk.kind, f, WithTimeout(100*time.Millisecond)).Complete(context.Background(), hello)
		backendError(t, bk.kind, err)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v is not DeadlineExceeded", bk.kind, err)
		}
	}
}

func TestRemoteConnectionRefused(t *testing.T) {
	for _, bk := range backends {
		f := newFake(t, reply(200, bk.ok))
		b := newBackend(t, bk.kind, f)
		f.Close()
		_, err := b.Complete(context.Background(), hello)
		e := backendError(t, bk.kind, err)
		if e.StatusCode != 0 || e.Err == nil {
			t.Errorf("%s: %+v", bk.kind, e)
		}
	}
}

func TestRemoteDefaultClient(t *testing.T) {
	// Without WithHTTPClient the backend uses http.DefaultTransport.
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	for _, bk := range backends {
		f := newFake(t, reply(200, bk.ok))
		b, err := New(bk.kind, f.URL, "test-model", testKey)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Complete(context.Background(), hello); err != nil {
			t.Errorf("%s: %v", bk.kind, err)
		}
	}
}

func TestRemoteConcurrent(t *testing.T) {
	for _, bk := range backends {
		f := newFake(t, reply(200, bk.ok))
		b := newBackend(t, bk.kind, f)
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for range 32 {
			wg.Go(func() {
				resp, err := b.Complete(context.Background(), conversation)
				if err == nil && resp.Text != "2 + 2 = 4." {
					err = errors.New("wrong text " + resp.Text)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("%s: %v", bk.kind, err)
			}
		}
		if n := f.count(); n != 32 {
			t.Errorf("%s: server got %d requests, want 32", bk.kind, n)
		}
	}
}

func TestRemoteModelFallback(t *testing.T) {
	// A server that reports no model: the requested one is returned.
	bodies := map[string]string{
		KindOpenAI:    `{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`,
		KindAnthropic: `{"type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn"}`,
		KindGemini:    `{"candidates":[{"content":{"parts":[{"text":"ok"}],"role":"model"},"finishReason":"STOP"}]}`,
	}
	for kind, body := range bodies {
		f := newFake(t, reply(200, body))
		resp, err := newBackend(t, kind, f).Complete(context.Background(), hello)
		if err != nil || resp.Text != "ok" || resp.Model != "test-model" {
			t.Errorf("%s: %+v, %v", kind, resp, err)
		}
	}
}

func TestRemoteRefusesCrossHostRedirect(t *testing.T) {
	for _, bk := range backends {
		other := newFake(t, reply(200, bk.ok))
		f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
		})
		client := f.Client()
		_, err := newBackend(t, bk.kind, f).Complete(context.Background(), hello)
		e := backendError(t, bk.kind, err)
		if !strings.Contains(e.Message, "refusing redirect") {
			t.Errorf("%s: %v", bk.kind, err)
		}
		if n := other.count(); n != 0 {
			t.Errorf("%s: the other host got %d requests (and the key)", bk.kind, n)
		}
		if client.CheckRedirect != nil {
			t.Errorf("%s: the caller's client was modified", bk.kind)
		}
	}
	// A redirect on the same host is followed, with the body.
	for _, bk := range backends {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("moved") == "" {
				http.Redirect(w, r, r.URL.Path+"?moved=1", http.StatusPermanentRedirect)
				return
			}
			reply(200, bk.ok)(w, r)
		})
		if _, err := newBackend(t, bk.kind, f).Complete(context.Background(), hello); err != nil {
			t.Errorf("%s: same-host redirect: %v", bk.kind, err)
		}
		f.mu.Lock()
		if len(f.reqs) != 2 || len(f.reqs[1].Body) == 0 {
			t.Errorf("%s: redirected request lost its body: %d requests", bk.kind, len(f.reqs))
		}
		f.mu.Unlock()
	}
}
