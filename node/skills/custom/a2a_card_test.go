package custom

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/netscope"
	"github.com/mcpv2/mcpv2/node/a2aclient"
	"github.com/mcpv2/mcpv2/node/skills"
)

// cardAgent is a Go A2A v0.3 agent (no streaming) whose card requests are
// counted, and which can fail them, hold them, or hold messages.
type cardAgent struct {
	*httptest.Server
	cardGets    atomic.Int32
	cardFails   atomic.Bool
	holdCard    chan struct{} // non-nil: card requests wait for it to close
	cardHeld    chan struct{} // a held card request arrived
	holdMessage atomic.Bool   // messages wait for their request to end
	msgHeld     chan struct{}
}

func newCardAgent(t *testing.T) *cardAgent {
	a := &cardAgent{cardHeld: make(chan struct{}, 8), msgHeld: make(chan struct{}, 8)}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			a.cardGets.Add(1)
			if a.holdCard != nil {
				a.cardHeld <- struct{}{}
				<-a.holdCard
			}
			if a.cardFails.Load() {
				http.Error(w, "down", http.StatusInternalServerError)
				return
			}
			fmt.Fprintf(w, `{"name":"go-agent","url":%q,"protocolVersion":"0.3","skills":[]}`, a.URL+"/rpc")
			return
		}
		io.Copy(io.Discard, r.Body)
		if a.holdMessage.Load() {
			a.msgHeld <- struct{}{}
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":"1","result":{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","text":"ok"}]}}`)
	}))
	t.Cleanup(a.Close)
	return a
}

// a2aHandler is one a2a skill of the agent at url.
func a2aHandler(t *testing.T, url string) skills.Handler {
	t.Helper()
	hc := netscope.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}).Client(0)
	t.Cleanup(hc.CloseIdleConnections)
	l, err := New(newTestRegistry(t), WithA2AHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	sk, err := l.Parse([]byte(`{"skills": [{"name": "echo", "handler": {"type": "a2a", "url": "` + url + `", "timeout_s": 20}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return sk[0].Handler
}

// TestA2ACardFailureCached: a card that cannot be read is not fetched
// again by the next call at once (review item 14).
func TestA2ACardFailureCached(t *testing.T) {
	a := newCardAgent(t)
	a.cardFails.Store(true)
	h := a2aHandler(t, a.URL)
	if _, err := h(context.Background(), json.RawMessage(`{"text":"x"}`)); err == nil {
		t.Fatal("call with a failing card: no error")
	}
	first := a.cardGets.Load()
	if _, err := h(context.Background(), json.RawMessage(`{"text":"x"}`)); err == nil || !strings.Contains(err.Error(), "card") {
		t.Fatalf("second call: %v, want the cached card failure", err)
	}
	if got := a.cardGets.Load(); got != first {
		t.Errorf("card GETs: %d after the first call, %d after the second; want no new fetch", first, got)
	}
}

// TestA2ACardFetchDoesNotBlock: while one call fetches the card, another
// call whose caller gives up returns at once instead of queueing behind
// the fetch; the fetch is shared (review item 14).
func TestA2ACardFetchDoesNotBlock(t *testing.T) {
	a := newCardAgent(t)
	a.holdCard = make(chan struct{})
	h := a2aHandler(t, a.URL)
	first := make(chan error, 1)
	go func() {
		_, err := h(context.Background(), json.RawMessage(`{"text":"x"}`))
		first <- err
	}()
	<-a.cardHeld
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		_, err := h(ctx, json.RawMessage(`{"text":"x"}`))
		second <- err
	}()
	cancel()
	select {
	case err := <-second:
		if err == nil || !strings.Contains(err.Error(), "canceled") {
			t.Errorf("canceled call: %v, want canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("a canceled call waited behind another call's card fetch")
	}
	close(a.holdCard)
	if err := <-first; err != nil {
		t.Fatalf("first call: %v", err)
	}
	if got := a.cardGets.Load(); got != 1 {
		t.Errorf("%d card GETs, want 1 (shared)", got)
	}
}

// TestA2ACardKeptOnCancel: a call its caller cancels keeps the card
// cached (review item 14).
func TestA2ACardKeptOnCancel(t *testing.T) {
	a := newCardAgent(t)
	h := a2aHandler(t, a.URL)
	a.holdMessage.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h(ctx, json.RawMessage(`{"text":"x"}`))
		done <- err
	}()
	<-a.msgHeld
	cancel()
	if err := <-done; err == nil {
		t.Fatal("canceled call: no error")
	}
	a.holdMessage.Store(false)
	out, err := h(context.Background(), json.RawMessage(`{"text":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	var r a2aclient.Result
	if err := json.Unmarshal(out.(json.RawMessage), &r); err != nil || r.Text != "ok" {
		t.Fatalf("result %s: %v", out, err)
	}
	if got := a.cardGets.Load(); got != 1 {
		t.Errorf("%d card GETs, want 1 (the card kept after the cancel)", got)
	}
}
