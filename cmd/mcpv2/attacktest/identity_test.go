package attacktest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// The attacks of issue 18's items 1, 2, 3 and 5, each from the attacker's
// side, against real nodes T (an edge) and U (none) that share --secret.

// idMeshHost is an attacker's own libp2p host: a peer of the mesh that
// runs no mcpv2 code, so that it can read what nodes send it and send
// what it likes.
func idMeshHost(t *testing.T) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// idConnect connects h to the node p.
func idConnect(t *testing.T, h host.Host, p *proc) peer.ID {
	t.Helper()
	info, err := peer.AddrInfoFromP2pAddr(ma.StringCast(p.p2pAddr(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Connect(ctx, *info); err != nil {
		t.Fatal(err)
	}
	return info.ID
}

// idMeshCall sends one slot (JSON) from h to the node pid over
// /mcpv2/rpc and returns its answer.
func idMeshCall(t *testing.T, h host.Host, pid peer.ID, slot string) rpcAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := h.NewStream(ctx, pid, protocol.RPCProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := transport.WriteFrame(s, []byte(slot)); err != nil {
		t.Fatal(err)
	}
	b, err := transport.NewFrameReader(s, 16<<20).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	var a rpcAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return a
}

// TestAttackReplayedMeshSession is item 1. A secret holder's call through
// T's gateway to the attacker's peer P carries T's mesh session; P keeps
// it and hands it to an anonymous HTTP caller, who asks T's gateway to run
// upload_file on U with that context.session. Before, T forwarded the slot
// as it was and U took it as T's: an anonymous upload. Now T refuses a
// caller's session (-32009, audited), and the token P saw names P as its
// audience, so no other peer would take it either.
func TestAttackReplayedMeshSession(t *testing.T) {
	u := startNode(t, "--secret", secret)
	tn := startNode(t, "--port", "0", "--public-ip", "127.0.0.1", "--secret", secret, "--bootstrap", u.p2pAddr(t))

	// P, the attacker's peer, serves /mcpv2/rpc and keeps the sessions it
	// is sent.
	p := idMeshHost(t)
	got := make(chan string, 8)
	p.SetStreamHandler(protocol.RPCProtocolID, func(s network.Stream) {
		defer s.Close()
		msg, err := transport.NewFrameReader(s, 1<<20).ReadFrame()
		if err != nil {
			return
		}
		var slot struct {
			ID      json.RawMessage `json:"id"`
			Context struct {
				Session string `json:"session"`
			} `json:"context"`
		}
		_ = json.Unmarshal(msg, &slot)
		select {
		case got <- slot.Context.Session:
		default:
		}
		_ = transport.WriteFrame(s, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"pong":true}}`, slot.ID)))
	})
	idConnect(t, p, tn)

	// A secret holder pings P through T's gateway: T adds its session.
	st, a := call(t, tn.base()+"/mcpv2/peers/"+p.ID().String(), secretSession(), "ping", map[string]any{}, "")
	if st != http.StatusOK || a.Error != nil {
		t.Fatalf("secret holder's ping of P through T: %d %+v", st, a.Error)
	}
	var stolen string
	select {
	case stolen = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("P got no call")
	}
	if stolen == "" {
		t.Fatal("T sent P no mesh session for a secret holder's call")
	}
	if tok, _, err := protocol.ParseToken(stolen); err == nil {
		t.Logf("the session P was sent names %q", tok.Subject)
		if !strings.Contains(tok.Subject, p.ID().String()) {
			t.Errorf("T's mesh session for P does not name P as its audience: %q", tok.Subject)
		}
	}

	// The anonymous caller replays it through T's gateway, to U.
	anon := tn.anonSession(t)
	st, a = call(t, tn.base()+"/mcpv2/peers/"+u.peerID(), anon, "upload_file",
		map[string]any{"filename": "replayed.txt", "content": "an anonymous upload"}, stolen)
	t.Logf("replayed session through the gateway: HTTP %d, error %+v, result %s", st, a.Error, a.Result)
	if a.Error == nil {
		t.Fatalf("U ran upload_file for an anonymous caller with a replayed mesh session: %s", a.Result)
	}
	if a.Error.Code != protocol.CodeNotPermitted || !strings.Contains(a.Error.Message, "context.session") {
		t.Errorf("want T's -32009 naming context.session, got %+v", a.Error)
	}
	waitFor(t, 5*time.Second, "T's audit line of the refusal", func() bool {
		for _, l := range auditLines(t, tn.dataDir) {
			if l["skill"] == "upload_file" && l["code"] == float64(protocol.CodeNotPermitted) && l["auth"] == "anonymous" {
				return true
			}
		}
		return false
	})
	for _, l := range auditLines(t, u.dataDir) {
		if l["skill"] == "upload_file" {
			t.Errorf("the replayed slot reached U: %v", l)
		}
	}
	// P itself presents the token to U directly: minted for P's audience
	// by T, it is T's, not P's, and not for U.
	uid := idConnect(t, p, u)
	r := idMeshCall(t, p, uid, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"upload_file","arguments":{"filename":"direct.txt","content":"x"}},"context":{"session":%q}}`, stolen))
	if r.Error == nil {
		t.Fatalf("U took T's session from P: %s", r.Result)
	}
	t.Logf("P presenting the session to U itself: %+v", r.Error)

	// An anonymous caller's call that T forwards arrives at U as a
	// forwarded caller, not as T: U's policy grants T's PeerID nothing
	// here, and the audit line says so.
	st, a = call(t, tn.base()+"/mcpv2/peers/"+u.peerID(), anon, "ping", map[string]any{"payload": "p"}, "")
	if st != http.StatusOK || a.Error != nil {
		t.Fatalf("anonymous ping of U through T: %d %+v", st, a.Error)
	}
	waitFor(t, 5*time.Second, "U's audit line of the forwarded ping", func() bool {
		for _, l := range auditLines(t, u.dataDir) {
			if l["skill"] == "ping" && l["auth"] == "forwarded" && l["caller"] == "via:"+tn.peerID() {
				return true
			}
		}
		return false
	})
}

// idA2A posts one A2A v1.0 JSON-RPC request to url with the bearer tok.
func idA2A(t *testing.T, url, tok, method string, params any) (int, rpcAnswer) {
	t.Helper()
	h := bearer(tok)
	h["A2A-Version"] = "1.0"
	st, b := do(t, http.MethodPost, url, h, map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	var a rpcAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("%s: %d %s", method, st, b)
	}
	return st, a
}

// idMCP posts one MCP message (2025-11-25 era) to url with tok and the
// session sid ("" for none), and returns the status, the session id the
// answer names and the body.
func idMCP(t *testing.T, method, url, tok, sid string, body any) (int, string, string) {
	t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	req, _ := http.NewRequest(method, url, strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil || sb.Len() > 1<<20 || strings.Contains(sb.String(), `"id":`) {
			break
		}
	}
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), sb.String()
}

// TestAttackSharedAnonymousIdentity is item 2: two anonymous sessions
// from one IP (two users behind one NAT). Before, they were one caller:
// the second listed and read the first's A2A tasks and used and deleted
// its MCP session. Now each token owns its own.
func TestAttackSharedAnonymousIdentity(t *testing.T) {
	policy := idWriteFile(t, "policy.json", `{"grants":{"http":["ping"]}}`)
	tn := startNode(t, "--port", "0", "--public-ip", "127.0.0.1", "--secret", secret, "--policy", policy)
	alice, mallory := tn.anonSession(t), tn.anonSession(t)

	// Alice's A2A task.
	msg := map[string]any{"message": map[string]any{"messageId": "m1", "role": "ROLE_USER",
		"parts": []any{map[string]any{"data": map[string]any{"skill": "ping", "arguments": map[string]any{"payload": "alice's secret payload"}}}}}}
	_, a := idA2A(t, tn.base()+"/a2a", alice, "SendMessage", msg)
	if a.Error != nil {
		t.Fatalf("alice's SendMessage: %+v", a.Error)
	}
	var sent struct {
		Task struct{ ID string } `json:"task"`
	}
	_ = json.Unmarshal(a.Result, &sent)
	if sent.Task.ID == "" {
		t.Fatalf("no task in %s", a.Result)
	}
	// Mallory lists and reads.
	_, a = idA2A(t, tn.base()+"/a2a", mallory, "ListTasks", map[string]any{})
	t.Logf("mallory's ListTasks: %s %+v", protocol.Clip(string(a.Result), 300), a.Error)
	if strings.Contains(string(a.Result), sent.Task.ID) {
		t.Errorf("another anonymous session of the same IP lists alice's task")
	}
	_, a = idA2A(t, tn.base()+"/a2a", mallory, "GetTask", map[string]any{"id": sent.Task.ID})
	t.Logf("mallory's GetTask of alice's task: %s %+v", protocol.Clip(string(a.Result), 200), a.Error)
	if a.Error == nil || strings.Contains(string(a.Result), "alice's secret payload") {
		t.Errorf("another anonymous session of the same IP reads alice's task")
	}
	// Alice still sees it.
	if _, a = idA2A(t, tn.base()+"/a2a", alice, "GetTask", map[string]any{"id": sent.Task.ID}); a.Error != nil {
		t.Errorf("alice's own GetTask: %+v", a.Error)
	}

	// Alice's MCP session.
	mcp := tn.base() + "/mcp"
	st, sid, body := idMCP(t, http.MethodPost, mcp, alice, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "alice", "version": "1"}}})
	if st != http.StatusOK || sid == "" {
		t.Fatalf("alice's initialize: %d %q %s", st, sid, body)
	}
	idMCP(t, http.MethodPost, mcp, alice, sid, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	st, _, body = idMCP(t, http.MethodPost, mcp, mallory, sid, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
	t.Logf("mallory uses alice's MCP session: HTTP %d %s", st, protocol.Clip(body, 120))
	if st == http.StatusOK {
		t.Errorf("another anonymous session of the same IP used alice's MCP session")
	}
	st, _, body = idMCP(t, http.MethodDelete, mcp, mallory, sid, nil)
	t.Logf("mallory deletes alice's MCP session: HTTP %d %s", st, protocol.Clip(body, 120))
	if st == http.StatusOK || st == http.StatusNoContent {
		t.Errorf("another anonymous session of the same IP deleted alice's MCP session")
	}
	if st, _, body = idMCP(t, http.MethodPost, mcp, alice, sid, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}); st != http.StatusOK {
		t.Errorf("alice's session after mallory's tries: %d %s", st, body)
	}
}

// TestAttackDNSRebinding is item 3: a page whose DNS name the attacker
// rebinds to the edge reaches every endpoint, not only /mcp. Now every
// endpoint refuses a Host or Origin it does not serve (403), and serves a
// name of --allowed-hosts (--mcp-allowed-hosts, its older name).
func TestAttackDNSRebinding(t *testing.T) {
	tn := startNode(t, "--port", "0", "--public-ip", "127.0.0.1", "--secret", secret, "--mcp-allowed-hosts", "agents.example.test")
	tok := secretSession()
	for _, ep := range []struct{ method, path string }{
		{http.MethodGet, "/mcpv2/session"}, {http.MethodGet, "/mcpv2/health"}, {http.MethodGet, "/mcpv2/agent-card"},
		{http.MethodPost, "/mcpv2"}, {http.MethodPost, "/a2a"}, {http.MethodGet, "/.well-known/agent-card.json"},
	} {
		var body any
		if ep.method == http.MethodPost {
			body = map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": map[string]any{}}
		}
		for _, hdr := range []map[string]string{
			{"Host": "rebind.attacker.invalid", "Authorization": "Bearer " + tok},
			{"Origin": "http://rebind.attacker.invalid", "Authorization": "Bearer " + tok},
		} {
			st, b := do(t, ep.method, tn.base()+ep.path, hdr, body)
			if st != http.StatusForbidden {
				t.Errorf("%s %s with %v: HTTP %d %s", ep.method, ep.path, hdr, st, protocol.Clip(string(b), 100))
			}
		}
		st, b := do(t, ep.method, tn.base()+ep.path, map[string]string{"Host": "agents.example.test", "Origin": "http://agents.example.test",
			"Authorization": "Bearer " + tok}, body)
		if st != http.StatusOK {
			t.Errorf("%s %s for an allowed name: HTTP %d %s", ep.method, ep.path, st, protocol.Clip(string(b), 100))
		}
	}
}

// TestAttackA2ACardForAnyURL is item 5: agent/a2a-card signed a card
// naming any URL for any caller, so the attacker got a card signed by T's
// key that points to the attacker's host. Now only a mesh peer is
// answered, for its own face of the node (…/peers/<PeerID>), and the card
// names that peer inside its signed body.
func TestAttackA2ACardForAnyURL(t *testing.T) {
	u := startNode(t, "--secret", secret)
	tn := startNode(t, "--port", "0", "--public-ip", "127.0.0.1", "--secret", secret, "--bootstrap", u.p2pAddr(t))
	slot := `{"jsonrpc":"2.0","id":1,"method":"agent/a2a-card","params":{"base":"https://attacker.invalid:8443","version":"1.0"}}`
	for _, path := range []string{"/mcpv2", "/mcpv2/peers/" + u.peerID()} {
		for _, tok := range []string{tn.anonSession(t), secretSession()} {
			st, b := do(t, http.MethodPost, tn.base()+path, bearer(tok), slot)
			t.Logf("POST %s agent/a2a-card for the attacker's base: HTTP %d %s", path, st, protocol.Clip(string(b), 160))
			if strings.Contains(string(b), "attacker.invalid") && strings.Contains(string(b), "signatures") {
				t.Errorf("POST %s: a card signed for the attacker's URL", path)
			}
		}
	}
	// A mesh peer of its own, asking U directly: only for its face of U.
	m := idMeshHost(t)
	uid := idConnect(t, m, u)
	r := idMeshCall(t, m, uid, slot)
	if r.Error == nil {
		t.Errorf("U signed a card for a base that is not a face of it: %s", protocol.Clip(string(r.Result), 200))
	}
	base := "https://edge.example.test:8443/peers/" + u.peerID()
	r = idMeshCall(t, m, uid, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"agent/a2a-card","params":{"base":%q,"version":"1.0"}}`, base))
	if r.Error != nil || !strings.Contains(string(r.Result), m.ID().String()) {
		t.Errorf("U's card for the asking edge's face must name that edge's PeerID: %+v %s", r.Error, protocol.Clip(string(r.Result), 300))
	}
}

// idWriteFile writes data to a new file name in a temporary directory and
// returns its path.
func idWriteFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
