package mcp

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestStandingStreamRefusedGET: a GET of a session that the go-sdk
// refuses (here 403, as for another caller naming the session; 409 for a
// second stream is alike) never becomes the session's standing stream,
// not even while it is served: the status notifications keep going to
// the stream the go-sdk began, and reach it as one server-sent event.
func TestStandingStreamRefusedGET(t *testing.T) {
	n := newTaskNotes(nil)
	current := func() *standingStream {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.streams["s1"]
	}

	rec := httptest.NewRecorder()
	begun, release, served := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(served)
		n.stream("s1", &statusWriter{ResponseWriter: rec}, func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			close(begun)
			<-release
		})
	}()
	<-begun
	owner := current()
	if owner == nil || !owner.open() {
		t.Fatalf("the begun stream is not the standing one: %v", owner)
	}

	refused := httptest.NewRecorder()
	n.stream("s1", &statusWriter{ResponseWriter: refused}, func(w http.ResponseWriter) {
		if got := current(); got != owner {
			t.Errorf("before the go-sdk answered, the refused GET took the session's notifications")
		}
		http.Error(w, "session user mismatch", http.StatusForbidden)
		if got := current(); got != owner {
			t.Errorf("the refused GET (403) took the session's notifications")
		}
		current().inject([]byte(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t1"}}`))
	})
	if got := current(); got != owner {
		t.Fatalf("after the refused GET the standing stream is %v, not the owner's", got)
	}
	close(release)
	<-served
	if got := current(); got != nil {
		t.Fatalf("an ended stream is still the standing one")
	}
	const want = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks/status\",\"params\":{\"taskId\":\"t1\"}}\n\n"
	if rec.Body.String() != want {
		t.Fatalf("the owner's stream carries %q, want %q", rec.Body.String(), want)
	}
	if refused.Code != http.StatusForbidden || refused.Body.String() != "session user mismatch\n" {
		t.Fatalf("the refused GET got %d %q", refused.Code, refused.Body.String())
	}
}
