package custom

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/internal/netscope"
	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/node/a2aclient"
	"github.com/mcpv2/mcpv2/protocol"
)

// TestA2A forwards skills to a real @a2a-js/sdk agent (v0.3, polled)
// through "a2a" handlers: echo under another name, ask's two turns; the
// default scope refuses the agent on 127.0.0.1.
func TestA2A(t *testing.T) {
	agent := testenv.StartA2AAgent(t, "--version", "0.3", "--no-streaming")
	hc := netscope.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}).Client(0)
	t.Cleanup(hc.CloseIdleConnections)
	l, err := New(newTestRegistry(t), WithA2AHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv("MCPV2_TEST_AGENT_KEY", "k-1")
	sk, err := l.Parse([]byte(`{"skills": [
		{"name": "shout", "handler": {"type": "a2a", "url": "` + agent.URL + `", "skill": "echo", "headers": {"X-Api-Key": "${ENV:MCPV2_TEST_AGENT_KEY}"}}},
		{"name": "ask", "handler": {"type": "a2a", "url": "` + agent.URL + `", "timeout_s": 20, "card_ttl_s": 60}},
		{"name": "missing", "handler": {"type": "a2a", "url": "` + agent.URL + `", "skill": "nope"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	call := func(i int, args string) (a2aclient.Result, error) {
		t.Helper()
		out, err := sk[i].Handler(context.Background(), json.RawMessage(args))
		if err != nil {
			return a2aclient.Result{}, err
		}
		var r a2aclient.Result
		if err := json.Unmarshal(out.(json.RawMessage), &r); err != nil {
			t.Fatal(err)
		}
		return r, nil
	}
	r, err := call(0, `{"text":"hi there"}`)
	if err != nil || r.State != a2aclient.StateCompleted || r.Text != "hi there" {
		t.Fatalf("shout: %+v, %v", r, err)
	}
	r, err = call(1, `{"query":"?"}`)
	if err != nil || r.State != a2aclient.StateInputRequired {
		t.Fatalf("ask, first turn: %+v, %v", r, err)
	}
	r2, err := call(1, `{"text":"Grace","task_id":"`+r.TaskID+`","context_id":"`+r.ContextID+`"}`)
	if err != nil || r2.Text != "hello Grace" || r2.TaskID != r.TaskID {
		t.Fatalf("ask, second turn: %+v, %v", r2, err)
	}
	_, err = call(2, `{}`)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeToolExecution || strings.Contains(err.Error(), agent.URL) {
		t.Errorf("unknown remote skill: %v, want a tool error that does not name the agent's address", err)
	}

	// Without the node's client, the scope allows nothing: refused.
	l2, err := New(newTestRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	sk2, err := l2.Parse([]byte(`{"skills": [{"name": "echo", "handler": {"type": "a2a", "url": "` + agent.URL + `"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sk2[0].Handler(context.Background(), json.RawMessage(`{"text":"x"}`))
	if err == nil || !strings.Contains(err.Error(), "outbound scope") || !strings.Contains(err.Error(), netscope.Flag) {
		t.Errorf("default scope: %v, want the outbound scope's refusal", err)
	}
}

func TestA2AFileErrors(t *testing.T) {
	l, err := New(newTestRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, tc := range []struct{ handler, want string }{
		{`{"type":"a2a"}`, "handler.url: missing"},
		{`{"type":"a2a","url":"ftp://x"}`, `handler.url: scheme "ftp" is not allowed`},
		{`{"type":"a2a","url":"http://u:p@x"}`, "handler.url: credentials"},
		{`{"type":"a2a","url":"http://x","card_ttl_s":-1}`, "handler.card_ttl_s: -1 is out of range"},
		{`{"type":"a2a","url":"http://x","headers":{"Accept":"x"}}`, "handler.headers.Accept: may not be set"},
		{`{"type":"a2a","url":"http://x","headers":{"a2a-version":"x"}}`, "handler.headers.a2a-version: may not be set"},
		{`{"type":"a2a","url":"http://x","card_key":"nope"}`, "handler.card_key: card key"},
		{`{"type":"a2a","url":"http://x","method":"x"}`, "method"},
	} {
		_, err := l.Parse([]byte(`{"skills":[{"name":"x","handler":` + tc.handler + `}]}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.handler, err, tc.want)
		}
	}
}
