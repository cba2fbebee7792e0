package node

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// TestDispatchGrantsByCallerKind is SPEC §6 as a table: what each kind of
// caller may run with and without a policy, with one audit line per slot.
func TestDispatchGrantsByCallerKind(t *testing.T) {
	peerA := "12D3KooWGRUVh2jVdvyEtjWrDJeGaYmcV5JwgeR3mAU7zmG1oCbV"
	for _, tc := range []struct {
		name   string
		grants map[string][]string
		caller Caller
		skill  string
		want   int // 0: served
	}{
		{"anonymous ping", nil, Caller{ID: "ip:10.0.0.1", Via: "http", Kind: protocol.CallerAnonymous}, "ping", 0},
		{"anonymous upload", nil, Caller{ID: "ip:10.0.0.1", Via: "http", Kind: protocol.CallerAnonymous}, "list_files", protocol.CodeNotPermitted},
		{"anonymous ask", nil, Caller{ID: "ip:10.0.0.1", Via: "http", Kind: protocol.CallerAnonymous}, "ask", protocol.CodeNotPermitted},
		{"anonymous granted to http", map[string][]string{"http": {"list_files"}}, Caller{ID: "ip:10.0.0.1", Via: "http", Kind: protocol.CallerAnonymous}, "list_files", 0},
		{"anonymous granted to *", map[string][]string{"*": {"list_files"}}, Caller{ID: "ip:10.0.0.1", Via: "http", Kind: protocol.CallerAnonymous}, "list_files", 0},
		{"http grant is not a peer grant", map[string][]string{"http": {"list_files"}}, Caller{ID: peerA, Via: "mesh", Kind: protocol.CallerPeer}, "list_files", protocol.CodeNotPermitted},
		{"peer grant is not an http grant", map[string][]string{peerA: {"*"}}, Caller{ID: "ip:10.0.0.1", Via: "http", Kind: protocol.CallerAnonymous}, "list_files", protocol.CodeNotPermitted},
		{"secret holder", nil, Caller{ID: "ip:10.0.0.1", Via: "http", Kind: protocol.CallerSecretHolder}, "list_files", 0},
		{"granted peer", map[string][]string{peerA: {"list_files"}}, Caller{ID: peerA, Via: "mesh", Kind: protocol.CallerPeer}, "list_files", 0},
		{"zero Caller is anonymous", nil, Caller{ID: "ip:10.0.0.1"}, "list_files", protocol.CodeNotPermitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNode(t, func(c *Config) {
				if tc.grants != nil {
					c.PolicyFile = writePolicy(t, tc.grants)
				}
			})
			before := len(readAudit(t, n))
			out, refused := n.Handle(ctxT(t), tc.caller, []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+tc.skill+`","arguments":{}}}`))
			if refused != nil {
				t.Fatalf("refused whole: %v", refused)
			}
			var r protocol.Response
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatal(err)
			}
			got := 0
			if r.Error != nil {
				got = r.Error.Code
			}
			if got != tc.want {
				t.Fatalf("code %d, want %d: %s", got, tc.want, out)
			}
			if got == protocol.CodeNotPermitted && !strings.Contains(r.Error.Message, "policy file") {
				t.Errorf("a refusal must say how to grant: %q", r.Error.Message)
			}
			lines := readAudit(t, n)[before:]
			if len(lines) != 1 || lines[0]["skill"] != tc.skill || lines[0]["auth"] != tc.caller.Kind.String() {
				t.Errorf("audit lines %v", lines)
			}
		})
	}
}

// TestGatewayForwardsWithCallersGrants is the confused deputy from the
// attacker's side: an anonymous HTTP caller asks gateway node G to call
// peer P, which trusts G (shared secret). Before, G added its own mesh
// session and P served the anonymous caller everything. Now the slots G's
// policy does not grant the caller are refused by G (and audited there),
// the rest go to P without G's session, and a secret holder's slots go with
// it.
func TestGatewayForwardsWithCallersGrants(t *testing.T) {
	secret := []byte("gw-secret")
	g := newTestNode(t, func(c *Config) { c.Secret = secret })
	p := newTestNode(t, func(c *Config) { c.Secret = secret })
	if _, err := g.Client().Connect(ctxT(t), addrOf(t, p)); err != nil {
		t.Fatal(err)
	}
	batch := `[{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"list_files","arguments":{}}},` +
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping","arguments":{"payload":"p1"}}},` +
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"ping"}},` +
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`
	anon := Caller{ID: "ip:10.1.1.1", Via: "http", Kind: protocol.CallerAnonymous}
	gBefore, pBefore := len(readAudit(t, g)), len(readAudit(t, p))
	out, err := g.Forward(ctxT(t), anon, p.PeerID(), []byte(batch))
	if err != nil {
		t.Fatal(err)
	}
	rs := decodeBatch(t, out, 3)
	if string(rs[0].ID) != `"x"` || rs[0].Error == nil || rs[0].Error.Code != protocol.CodeNotPermitted {
		t.Errorf("list_files for an anonymous caller: %+v", rs[0])
	}
	if string(rs[1].ID) != "1" || rs[1].Error != nil || !strings.Contains(string(rs[1].Result), `"payload":"p1"`) {
		t.Errorf("ping: %+v", rs[1])
	}
	if string(rs[2].ID) != "1" || rs[2].Error != nil || !strings.Contains(string(rs[2].Result), `"tools"`) {
		t.Errorf("tools/list: %+v", rs[2])
	}
	gl := readAudit(t, g)[gBefore:]
	if len(gl) != 1 || gl[0]["skill"] != "list_files" || gl[0]["code"] != float64(protocol.CodeNotPermitted) || gl[0]["auth"] != "anonymous" {
		t.Errorf("gateway audit %v", gl)
	}
	for _, l := range readAudit(t, p)[pBefore:] {
		if l["skill"] == "list_files" {
			t.Errorf("the refused slot reached the peer: %v", l)
		}
	}
	// Granted on G to "http", list_files goes on, but without G's session
	// P grants G's PeerID nothing: P refuses it. No deputy.
	g2 := newTestNode(t, func(c *Config) {
		c.Secret = secret
		c.PolicyFile = writePolicy(t, map[string][]string{"http": {"list_files"}})
	})
	if _, err := g2.Client().Connect(ctxT(t), addrOf(t, p)); err != nil {
		t.Fatal(err)
	}
	one := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"list_files","arguments":{}}}`
	out, err = g2.Forward(ctxT(t), anon, p.PeerID(), []byte(one))
	if err != nil {
		t.Fatal(err)
	}
	var r protocol.Response
	if err := json.Unmarshal(out, &r); err != nil || string(r.ID) != "5" || r.Error == nil || r.Error.Code != protocol.CodeNotPermitted ||
		!strings.Contains(r.Error.Message, g2.PeerID()) {
		t.Errorf("anonymous list_files through a gateway granting http: %s", out)
	}
	// P grants G2's own PeerID list_files: still refused to the callers G2
	// forwards (never the forwarder's own grants). Granted to
	// "via:<G2>", they run it.
	for _, tc := range []struct {
		key  string
		want bool
	}{{g2.PeerID(), false}, {protocol.PolicyVia + g2.PeerID(), true}, {"http", true}} {
		p2 := newTestNode(t, func(c *Config) {
			c.Secret = secret
			c.PolicyFile = writePolicy(t, map[string][]string{tc.key: {"list_files"}})
		})
		if _, err := g2.Client().Connect(ctxT(t), addrOf(t, p2)); err != nil {
			t.Fatal(err)
		}
		out, err = g2.Forward(ctxT(t), anon, p2.PeerID(), []byte(one))
		if err != nil {
			t.Fatal(err)
		}
		var r protocol.Response
		if err := json.Unmarshal(out, &r); err != nil || (r.Error == nil) != tc.want {
			t.Errorf("P grants %s list_files; a forwarded anonymous caller got %s", tc.key, out)
		}
		l := readAudit(t, p2)
		if last := l[len(l)-1]; last["auth"] != "forwarded" || last["caller"] != protocol.PolicyVia+g2.PeerID() {
			t.Errorf("P's audit line of a forwarded call: %v", last)
		}
	}
	// A secret holder's slot carries G's session: P serves it. A slot
	// with its own session (forged, or another peer's) is refused by G
	// and never leaves it.
	holder := Caller{ID: "ip:10.1.1.2", Via: "http", Kind: protocol.CallerSecretHolder}
	two := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_files","arguments":{}}},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_files","arguments":{}},"context":{"session":"forged.00"}}]`
	out, err = g.Forward(ctxT(t), holder, p.PeerID(), []byte(two))
	if err != nil {
		t.Fatal(err)
	}
	rs = decodeBatch(t, out, 2)
	if rs[0].Error != nil || string(rs[0].ID) != "1" {
		t.Errorf("secret holder's slot: %+v", rs[0])
	}
	if rs[1].Error == nil || rs[1].Error.Code != protocol.CodeNotPermitted || string(rs[1].ID) != "2" || !strings.Contains(rs[1].Error.Message, "context.session") {
		t.Errorf("a slot's own session: %+v", rs[1])
	}
	// Only notifications: nothing comes back.
	if out, err := g.Forward(ctxT(t), anon, p.PeerID(), []byte(`[{"jsonrpc":"2.0","method":"tools/call","params":{"name":"ping"}}]`)); err != nil || out != nil {
		t.Errorf("notifications: %s, %v", out, err)
	}
}

// TestPooledStreamsNeverCrossCalls is defect 2 of issue 7: a
// notification-only batch that the target refuses (rate limit) is still
// answered; the client used to pool that stream, and the next call on it
// read the stale answer — another user's. Now the stream is closed after a
// notification-only send, and every answer is checked against its ids.
func TestPooledStreamsNeverCrossCalls(t *testing.T) {
	g := newTestNode(t, nil)
	p := newTestNode(t, func(c *Config) {
		c.RateLimit = 400 // a burst of 400: some floods pass, some are refused
		c.PolicyFile = writePolicy(t, map[string][]string{"*": {"list_files"}})
	})
	if _, err := g.Client().Connect(ctxT(t), addrOf(t, p)); err != nil {
		t.Fatal(err)
	}
	users := []Caller{
		{ID: "ip:10.0.0.1", Via: "http", Kind: protocol.CallerAnonymous},
		{ID: "ip:10.0.0.2", Via: "http", Kind: protocol.CallerAnonymous},
	}
	notes := make([]string, 0, 100)
	for range 100 {
		notes = append(notes, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"ping"}}`)
	}
	flood := "[" + strings.Join(notes, ",") + "]" // 100 slots: P's bucket runs dry after four
	var wg sync.WaitGroup
	var mu sync.Mutex
	wrong, answered := 0, 0
	for u, c := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if _, err := g.Forward(ctxT(t), c, p.PeerID(), []byte(flood)); err != nil {
					t.Errorf("notification flood: %v", err)
				}
				payload := fmt.Sprintf("user%d-call%d", u, i)
				msg := `{"jsonrpc":"2.0","id":"` + payload + `","method":"tools/call","params":{"name":"ping","arguments":{"payload":"` + payload + `"}}}`
				out, err := g.Forward(ctxT(t), c, p.PeerID(), []byte(msg))
				if err != nil {
					t.Errorf("call: %v", err)
					continue
				}
				var r protocol.Response
				if err := json.Unmarshal(out, &r); err != nil {
					t.Errorf("answer %s: %v", out, err)
					continue
				}
				mu.Lock()
				switch {
				case r.Error != nil && r.Error.Code == protocol.CodeRateLimited && string(r.ID) != "null" && string(r.ID) != `"`+payload+`"`:
					wrong++
				case r.Error != nil && r.Error.Code == protocol.CodeRateLimited:
					// P's refusal of this very call: honest.
				case string(r.ID) != `"`+payload+`"` || !strings.Contains(string(r.Result), `"payload":"`+payload+`"`):
					wrong++
					t.Errorf("%s got %s", payload, out)
				default:
					answered++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wrong != 0 {
		t.Fatalf("%d answers went to the wrong call", wrong)
	}
	refused := 0
	for _, l := range readAudit(t, p) {
		if l["code"] == float64(protocol.CodeRateLimited) {
			refused++
		}
	}
	if answered == 0 || refused == 0 {
		t.Fatalf("%d calls answered, %d messages refused by P: the test needs both to prove anything", answered, refused)
	}
	t.Logf("%d of 40 calls answered with their own payload, the rest rate limited", answered)
}

// TestOutOfStepAnswerFailsOnlyThatCall: a peer that answers with the wrong
// id gets that call failed with ErrOutOfStep and the stream reset; the next
// call works.
func TestOutOfStepAnswerFailsOnlyThatCall(t *testing.T) {
	a := newTestNode(t, nil)
	b := newTestNode(t, nil)
	pid, err := a.Client().Connect(ctxT(t), addrOf(t, b))
	if err != nil {
		t.Fatal(err)
	}
	// Raw Send checks the answer against the message's own ids: asking
	// with id 1 and reading an answer for id 2 is out of step.
	resps := []protocol.Response{{JSONRPC: "2.0", ID: json.RawMessage("2"), Result: json.RawMessage("{}")}}
	if err := matchIDs(resps, []json.RawMessage{json.RawMessage("1")}); err == nil {
		t.Fatal("an answer with another id matched")
	}
	if err := matchIDs([]protocol.Response{protocol.ErrorResponse(nil, protocol.Errorf(protocol.CodeRateLimited, "x"))}, []json.RawMessage{json.RawMessage("1"), json.RawMessage("2")}); err != nil {
		t.Fatalf("a whole refusal must match any request: %v", err)
	}
	if err := matchIDs(resps[:0], []json.RawMessage{json.RawMessage("1")}); err == nil {
		t.Fatal("no answers matched one request")
	}
	out, err := a.Client().Send(ctxT(t), pid, []byte(`{"jsonrpc":"2.0","id":"s1","method":"tools/list"}`), true)
	if err != nil || !strings.Contains(string(out), `"s1"`) {
		t.Fatalf("raw send: %s %v", out, err)
	}
}

func decodeBatch(t *testing.T, out []byte, n int) []protocol.Response {
	t.Helper()
	var rs []protocol.Response
	if err := json.Unmarshal(out, &rs); err != nil || len(rs) != n {
		t.Fatalf("want a batch of %d answers: %s (%v)", n, out, err)
	}
	return rs
}

// TestCancelledCallNeverPoisonsThePool: a call whose context ends just as
// its answer arrives used to put its stream back in the pool while the
// context's hook was setting a past deadline on it; the next call on that
// stream (another user's, through the gateway) then failed with "deadline
// reached". Calls with a fresh context must never fail.
func TestCancelledCallNeverPoisonsThePool(t *testing.T) {
	a := newTestNode(t, nil)
	b := newTestNode(t, func(c *Config) { c.RateLimit = -1 })
	addr := addrOf(t, b)
	if _, err := a.Client().Connect(ctxT(t), addr); err != nil {
		t.Fatal(err)
	}
	// Find how long a call takes, so the short deadlines land around it.
	start := time.Now()
	for range 20 {
		if _, err := a.Client().CallMethod(ctxT(t), addr, protocol.MethodToolsList, protocol.CallOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rtt := time.Since(start) / 20
	failed := 0
	for i := range 1500 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%40)*rtt/20)
		_, _ = a.Client().CallMethod(ctx, addr, protocol.MethodToolsList, protocol.CallOptions{})
		cancel()
		if _, err := a.Client().CallMethod(ctxT(t), addr, protocol.MethodToolsList, protocol.CallOptions{}); err != nil {
			failed++
			t.Errorf("call %d with a fresh context: %v", i, err)
			if failed > 3 {
				t.FailNow()
			}
		}
	}
}
