package a2aclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/internal/netscope"
	"github.com/mcpv2/mcpv2/internal/testenv"
)

// loopbackOK is a client scoped to allow the test agents on 127.0.0.1.
func loopbackOK(t *testing.T, opts ...Option) *Client {
	t.Helper()
	hc := netscope.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}).Client(0)
	t.Cleanup(hc.CloseIdleConnections)
	c, err := New(append([]Option{WithHTTPClient(hc)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func result(t *testing.T, c *Client, card *Card, skill string, args json.RawMessage) Result {
	t.Helper()
	raw, err := c.Call(context.Background(), card, skill, args)
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return r
}

// TestAgent calls a real @a2a-js/sdk agent in each protocol version, by
// stream and by polls: card (signed, in v1.0), echo, add, and ask's two
// turns.
func TestAgent(t *testing.T) {
	for _, version := range []string{"1.0", "0.3"} {
		t.Run(version, func(t *testing.T) {
			args := []string{"--version", version}
			if version == "1.0" {
				args = append(args, "--sign")
			}
			agent := testenv.StartA2AAgent(t, args...)
			ctx := context.Background()
			cl := loopbackOK(t)
			card, err := cl.Card(ctx, agent.URL)
			if err != nil {
				t.Fatal(err)
			}
			if card.ProtocolVersion != version || !card.Streaming || len(card.Skills) != 3 || card.Name != "js-agent" ||
				card.Endpoint != agent.URL+"/a2a/jsonrpc" || card.Signed != (version == "1.0") || card.Signed && card.Key != KeyEmbedded || !strings.HasSuffix(card.CardURL, CardPath) {
				t.Fatalf("card: %+v", card)
			}
			for _, mode := range []string{"stream", "poll"} {
				t.Run(mode, func(t *testing.T) {
					c := cl
					if mode == "poll" {
						c = loopbackOK(t, WithStreaming(false))
					}
					r := result(t, c, card, "echo", json.RawMessage(`{"text":"hello from go"}`))
					if r.State != StateCompleted || r.Text != "hello from go" || r.TaskID == "" || r.ContextID == "" || len(r.Artifacts) != 1 {
						t.Errorf("echo: %+v", r)
					}
					r = result(t, c, card, "add", json.RawMessage(`{"a":2,"b":40}`))
					if r.State != StateCompleted || string(r.Data) != `{"sum":42}` || r.Text != "2+40=42" {
						t.Errorf("add: %+v data %s", r, r.Data)
					}
					r = result(t, c, card, "ask", json.RawMessage(`{"prompt":"greet me"}`))
					if r.State != StateInputRequired || r.Text != "what is your name?" || r.TaskID == "" {
						t.Fatalf("ask, first turn: %+v", r)
					}
					next, _ := json.Marshal(map[string]string{"task_id": r.TaskID, "context_id": r.ContextID, "text": "Ada"})
					r2 := result(t, c, card, "ask", next)
					if r2.State != StateCompleted || r2.Text != "hello Ada" || r2.TaskID != r.TaskID {
						t.Errorf("ask, second turn: %+v", r2)
					}
					_, err := c.Call(ctx, card, "nope", nil)
					if err == nil || !strings.Contains(err.Error(), `no skill "nope"`) || !strings.Contains(err.Error(), "echo") {
						t.Errorf("unknown skill: %v", err)
					}
				})
			}
			// A JSON-RPC error of the agent names it: the task to continue
			// does not exist.
			_, err = cl.Call(ctx, card, "echo", json.RawMessage(`{"task_id":"no-such-task","text":"x"}`))
			var re *RPCError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), card.Endpoint) {
				t.Errorf("unknown task: %v, want an RPCError naming %s", err, card.Endpoint)
			}
			// An HTTP error names the agent and the status.
			bad := *card
			bad.Endpoint = agent.URL + "/nope"
			if _, err := cl.Call(ctx, &bad, "echo", nil); err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), bad.Endpoint) {
				t.Errorf("404 endpoint: %v", err)
			}
		})
	}
}

// TestScope: the default client refuses the agent on 127.0.0.1, naming the
// address and the flag.
func TestScope(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Card(context.Background(), srv.URL)
	if !errors.Is(err, netscope.ErrRefused) || !strings.Contains(err.Error(), "--outbound-allow 127.0.0.1/32") {
		t.Fatalf("Card of a loopback agent: %v, want the scope's refusal", err)
	}
}

// TestTamperedCard: a signed card of the SDK verifies as served and fails
// once a field is changed; an unsigned card of the v0.3 agent is not
// Signed.
func TestTamperedCard(t *testing.T) {
	agent := testenv.StartA2AAgent(t, "--sign")
	resp, err := http.Get(agent.URL + CardPath)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, tc := range []struct {
		name string
		card string
		ok   bool
	}{
		{"as served", string(raw), true},
		{"renamed", strings.Replace(string(raw), `"js-agent"`, `"evil-agent"`, 1), false},
		{"endpoint moved", strings.Replace(string(raw), `/a2a/jsonrpc"`, `/a2a/evil"`, 1), false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != CardPath {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, tc.card)
		}))
		card, err := loopbackOK(t).Card(context.Background(), srv.URL)
		srv.Close()
		if tc.ok && (err != nil || !card.Signed) {
			t.Errorf("%s: %v (card %+v)", tc.name, err, card)
		}
		if !tc.ok && !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", tc.name, err)
		}
	}
}
