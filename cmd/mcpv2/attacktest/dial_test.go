package attacktest

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// TestAttackDialErrors is issue 18, item 4, from the attacker's side: in a
// mesh on loopback (a lab), peers that announced /ip4/127.0.0.1/tcp/N
// leave, and an anonymous caller asks T's gateway, and T's MCP and A2A
// faces, to reach them. Before, the answer carried the dial error, which
// told a local port that is open (a handshake that failed) from one that
// is closed (connection refused): a port scan of T's host for anyone. Now
// every route answers the same bytes, but for the PeerID, for an open
// port, a closed one, a peer that stopped and a peer never seen: "could not
// reach peer <PeerID>" (the gateway: 502, -32004, data.reason
// "unreachable"), and the dial error goes to T's log.
func TestAttackDialErrors(t *testing.T) {
	tn := startNode(t, "--port", "0", "--public-ip", "127.0.0.1", "--log-level", "debug")
	tok := tn.anonSession(t)
	boot := tn.p2pAddr(t)

	// Three peers T learns by identify (each bootstraps from T), on ports
	// of the attacker's choosing, then loses: one killed, its port then
	// taken by a local service that speaks no libp2p (the open port); one
	// killed (a closed port); one stopped (a dead peer, which may have told
	// T on its way out that it has no address left).
	openPort, closedPort, stoppedPort := dialFreePort(t), dialFreePort(t), dialFreePort(t)
	pOpen := dialStartPeer(t, openPort, boot)
	pClosed := dialStartPeer(t, closedPort, boot)
	pStopped := dialStartPeer(t, stoppedPort, boot)
	for _, p := range []*proc{pOpen, pClosed, pStopped} {
		waitFor(t, 30*time.Second, "T to reach "+p.peerID()+" through its gateway", func() bool {
			st, _, err := tryDo(http.MethodPost, tn.base()+"/mcpv2/peers/"+p.peerID(), bearer(tok), dialCard)
			return err == nil && st == http.StatusOK
		})
	}
	// Killed, not stopped: a node that stops closes its listeners first,
	// and identify may tell T that it has no address left. The service
	// takes the open port as soon as the peer is gone: T may dial a peer
	// that left on its own (its DHT refills its routing table from the
	// peers it cached), and a dial to a closed port would put the address
	// in T's dial backoff.
	dialKill(pOpen)
	service := dialService(t, openPort)
	dialKill(pClosed)
	pStopped.stop(t)

	cases := []struct{ name, peer string }{
		{"open port", pOpen.peerID()},
		{"closed port", pClosed.peerID()},
		{"stopped peer", pStopped.peerID()},
		{"never seen", dialRandomPeer(t)},
	}
	// T learns that they left when their processes end: their connections
	// close. Nothing is asked before the attack (a failed dial would put
	// the address in T's dial backoff, and the attack would see that).
	leaks := []string{"refused", "dial", "127.0.0.1", "tcp", "EOF", "security", "handshake", "negotiat", "reset", "route", "addresses",
		strconv.Itoa(openPort), strconv.Itoa(closedPort), strconv.Itoa(stoppedPort)}

	routes := []struct {
		name string
		ask  func(peer string) (int, []byte)
	}{
		{"gateway", func(peer string) (int, []byte) {
			return do(t, http.MethodPost, tn.base()+"/mcpv2/peers/"+peer, bearer(tok), dialCard)
		}},
		{"peer's MCP face", func(peer string) (int, []byte) {
			return dialMCPCall(t, tn.base()+"/peers/"+peer+"/mcp", tok, "ping", map[string]any{})
		}},
		{"peer's A2A face", func(peer string) (int, []byte) {
			return dialPost(t, tn.base()+"/peers/"+peer+"/a2a", tok, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"ping"}]}}}`,
				map[string]string{"A2A-Version": "0.3"})
		}},
		{"mesh_call", func(peer string) (int, []byte) {
			return dialMCPCall(t, tn.base()+"/mcp", tok, "mesh_call", map[string]any{"peer": peer, "skill": "ping"})
		}},
	}
	var gatewayFirst string
	for _, r := range routes {
		var first string
		for i, c := range cases {
			st, body := r.ask(c.peer)
			got := dialCheck(t, r.name, c.name, c.peer, st, body, leaks)
			if i == 0 {
				first = got
			} else if got != first {
				t.Errorf("%s: %s and %s answer differently, which tells them apart:\n  %s\n  %s", r.name, cases[0].name, c.name, dialClip(first), dialClip(got))
			}
		}
		if gatewayFirst == "" {
			gatewayFirst = first
		}
	}

	// T dials on its own too (its DHT republishes and refills its routing
	// table from the peers it knew), so the attack's dials may have met
	// T's dial backoff. Past it, the open port and the closed one are
	// dialled for real, and the answers are still the same.
	realDials := func() bool {
		return service.count.Load() > 0 && strings.Contains(tn.Log.String(), fmt.Sprintf("127.0.0.1:%d: connect: connection refused", closedPort))
	}
	for end := time.Now().Add(30 * time.Second); !realDials(); time.Sleep(500 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("in 30 s, T never dialled the open port (%d connections) or the closed one (log:\n%s)", service.count.Load(), tn.Log.String())
		}
		for _, c := range cases[:2] {
			st, body := routes[0].ask(c.peer)
			if got := dialCheck(t, "gateway", c.name, c.peer, st, body, leaks); got != gatewayFirst {
				t.Errorf("gateway, %s, past the dial backoff: %s; before, %s", c.name, dialClip(got), dialClip(gatewayFirst))
			}
		}
	}
	// The dial errors are in T's log, for its operator.
	log := tn.Log.String()
	for _, c := range cases {
		if !strings.Contains(log, c.peer) {
			t.Errorf("T's log does not name %s (%s)", c.peer, c.name)
		}
	}
}

// dialCheck checks one answer of route to the attacker about peer (the
// case name): it says "could not reach peer <PeerID>" and nothing in
// leaks; on the gateway, 502 with -32004 and the reason. It returns the
// status and body with the PeerID replaced, to compare.
func dialCheck(t *testing.T, route, name, peer string, st int, body []byte, leaks []string) string {
	t.Helper()
	got := strings.ReplaceAll(string(body), peer, "<peer>")
	t.Logf("%s, %s: %d %s", route, name, st, dialClip(got))
	if !strings.Contains(got, "could not reach peer <peer>") {
		t.Errorf("%s, %s: the answer does not say \"could not reach peer <PeerID>\": %d %s", route, name, st, dialClip(got))
	}
	for _, l := range leaks {
		if strings.Contains(strings.ToLower(got), strings.ToLower(l)) {
			t.Errorf("%s, %s: the answer tells the attacker %q of the dial: %s", route, name, l, dialClip(got))
		}
	}
	if route == "gateway" {
		var a rpcAnswer
		if st != http.StatusBadGateway || json.Unmarshal(body, &a) != nil || a.Error == nil || a.Error.Code != -32004 ||
			string(a.Error.Data) != `{"reason":"unreachable"}` {
			t.Errorf("gateway, %s: %d %s; want 502, -32004, data {\"reason\":\"unreachable\"}", name, st, dialClip(got))
		}
	}
	return fmt.Sprintf("%d %s", st, got)
}

// dialCard is an agent/card request: what the attacker's ping asks.
var dialCard = map[string]any{"jsonrpc": "2.0", "id": 1, "method": "agent/card"}

// dialKill kills the node at once (SIGKILL) and waits for it.
func dialKill(p *proc) {
	_ = p.Cmd.Process.Kill()
	<-p.Exited
}

// dialFreePort returns a TCP port on loopback that is free now.
func dialFreePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// dialStartPeer runs `mcpv2 node` listening on 127.0.0.1:port alone,
// bootstrapped from boot.
func dialStartPeer(t *testing.T, port int, boot string) *proc {
	t.Helper()
	return startExact(t, nil, "--data-dir", t.TempDir(), "--listen", fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port),
		"--no-mdns", "--no-nat", "--bootstrap", boot)
}

// dialCounter is a local TCP service that speaks no libp2p: it accepts,
// answers a line and closes, and counts the connections.
type dialCounter struct {
	count *atomic.Int32
}

// dialService listens on 127.0.0.1:port until the test ends.
func dialService(t *testing.T, port int) *dialCounter {
	t.Helper()
	var ln net.Listener
	var err error
	// The peer that held the port has just exited.
	waitFor(t, 10*time.Second, "the open port to be free", func() bool {
		ln, err = net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
		return err == nil
	})
	return &dialCounter{count: testenv.CountConns(t, ln, []byte("HTTP/1.0 400 Bad Request\r\n\r\n"))}
}

// dialRandomPeer returns a PeerID no one has.
func dialRandomPeer(t *testing.T) string {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}

// dialPost POSTs body to url with the session tok as a bearer, as MCP and
// A2A clients do, and returns the status and body (an SSE answer's data
// lines joined).
func dialPost(t *testing.T, url, tok, body string, hdr map[string]string) (int, []byte) {
	t.Helper()
	st, _, b := postFace(t, url, tok, body, hdr)
	return st, b
}

// dialMCPCall runs one tools/call of tool with args on the MCP face at url
// in a session of its own (the 2025-11-25 era) and returns the status and
// body of the call, or of the initialize when that was refused.
func dialMCPCall(t *testing.T, url, tok, tool string, args any) (int, []byte) {
	t.Helper()
	ver := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	st, hdr, b := postFace(t, url, tok, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"attacker","version":"1"}}}`, ver)
	sid := hdr.Get("Mcp-Session-Id")
	if st != http.StatusOK || sid == "" {
		return st, b
	}
	ver["Mcp-Session-Id"] = sid
	if st, b := dialPost(t, url, tok, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, ver); st/100 != 2 {
		t.Fatalf("notifications/initialized: %d %s", st, b)
	}
	call, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	return dialPost(t, url, tok, string(call), ver)
}

// dialClip shortens an answer for a message.
func dialClip(s string) string {
	s = regexp.MustCompile(`\s+`).ReplaceAllString(s, " ")
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}
