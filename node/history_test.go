package node

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// historyOf returns n's history of p, and whether it has one.
func historyOf(n *Node, p peer.ID) (PeerHistory, bool) {
	for _, h := range n.PeerHistory() {
		if h.Peer == p.String() {
			return h, true
		}
	}
	return PeerHistory{}, false
}

// waitHistory waits (bounded polling, 10 s) until n's history of p
// satisfies ok, and returns it.
func waitHistory(t *testing.T, n *Node, p peer.ID, what string, ok func(PeerHistory) bool) PeerHistory {
	t.Helper()
	var h PeerHistory
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if h, _ = historyOf(n, p); ok(h) {
			return h
		}
	}
	t.Fatalf("history of %s never showed %s: %+v", p, what, h)
	return h
}

// kinds lists the kinds of events, with "/relayed" on relayed ones.
func kinds(es []PeerEvent) []string {
	var out []string
	for _, e := range es {
		k := e.Kind
		if e.Relayed {
			k += "/relayed"
		}
		out = append(out, k)
	}
	return out
}

// TestPeerHistoryConnectDisconnect: a connection opening and closing shows
// on both sides, with its transport, direction and remote address, the
// peer seen last first.
func TestPeerHistoryConnectDisconnect(t *testing.T) {
	a, b := pair(t, nil)
	c := newTestNode(t, nil)
	bAddr := tcpListenAddr(t, b)
	if err := a.Host().Connect(ctxT(t), peer.AddrInfo{ID: b.ID(), Addrs: []ma.Multiaddr{bAddr}}); err != nil {
		t.Fatal(err)
	}
	h := waitHistory(t, b, a.ID(), "a connected", func(h PeerHistory) bool { return len(h.Events) == 1 })
	if e := h.Events[0]; e.Kind != "connected" || e.Relayed || e.Transport != "tcp" || e.Direction != "inbound" || e.Remote == "" || e.At.IsZero() {
		t.Fatalf("b's event of a's connection: %+v", e)
	}
	ha, _ := historyOf(a, b.ID())
	if len(ha.Events) != 1 || ha.Events[0].Direction != "outbound" || ha.Events[0].Remote != bAddr.String() {
		t.Fatalf("a's history of b: %+v", ha)
	}
	if err := a.Host().Network().ClosePeer(b.ID()); err != nil {
		t.Fatal(err)
	}
	h = waitHistory(t, b, a.ID(), "a disconnected", func(h PeerHistory) bool { return len(h.Events) == 2 })
	if got := fmt.Sprint(kinds(h.Events)); got != "[connected disconnected]" {
		t.Fatalf("b's events of a: %s", got)
	}

	// c, seen after a, comes first.
	if err := c.Host().Connect(ctxT(t), peer.AddrInfo{ID: b.ID(), Addrs: []ma.Multiaddr{bAddr}}); err != nil {
		t.Fatal(err)
	}
	waitHistory(t, b, c.ID(), "c connected", func(h PeerHistory) bool { return len(h.Events) == 1 })
	if all := b.PeerHistory(); len(all) != 2 || all[0].Peer != c.ID().String() || all[1].Peer != a.ID().String() {
		t.Fatalf("b's history, want c then a: %+v", all)
	}
}

// TestPeerHistoryRelayedThenDirect: a peer first reached through a circuit
// relay, then directly, shows a relayed connection and then a direct one.
func TestPeerHistoryRelayedThenDirect(t *testing.T) {
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	rh, err := transport.NewHost(transport.WithIdentity(key), transport.WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rh.Close() })
	rl, err := relayv2.New(rh)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Close() })

	a, b := pair(t, nil)
	rinfo := peer.AddrInfo{ID: rh.ID(), Addrs: rh.Addrs()}
	if err := b.Host().Connect(ctxT(t), rinfo); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Reserve(ctxT(t), b.Host(), rinfo); err != nil {
		t.Fatalf("reserve: %v", err)
	}
	circuit := ma.StringCast(rh.Addrs()[0].String() + "/p2p/" + rh.ID().String() + "/p2p-circuit")
	if err := a.Host().Connect(network.WithAllowLimitedConn(ctxT(t), "test"), peer.AddrInfo{ID: b.ID(), Addrs: []ma.Multiaddr{circuit}}); err != nil {
		t.Fatalf("connect through the relay: %v", err)
	}
	waitHistory(t, b, a.ID(), "a relayed", func(h PeerHistory) bool { return len(h.Events) == 1 })
	direct := tcpListenAddr(t, b)
	if err := a.Host().Connect(network.WithForceDirectDial(ctxT(t), "test"), peer.AddrInfo{ID: b.ID(), Addrs: []ma.Multiaddr{direct}}); err != nil {
		t.Fatalf("connect directly: %v", err)
	}
	h := waitHistory(t, b, a.ID(), "a direct", func(h PeerHistory) bool { return len(h.Events) >= 2 })
	if got := fmt.Sprint(kinds(h.Events[:2])); got != "[connected/relayed connected]" {
		t.Fatalf("b's events of a: %s (%+v)", got, h.Events)
	}
	if e := h.Events[0]; e.Transport != "relay" || !isCircuit(ma.StringCast(e.Remote)) {
		t.Fatalf("relayed event: %+v", e)
	}
	if e := h.Events[1]; e.Transport == "relay" || isCircuit(ma.StringCast(e.Remote)) {
		t.Fatalf("direct event: %+v", e)
	}
}

// TestPeerHistoryPunches: the hole-punch tracer counts one attempt per
// punch that ended, either side's, and the successes; the bounds hold.
func TestPeerHistoryPunches(t *testing.T) {
	at := time.Unix(1000, 0)
	ph := newPeerHistory(func() time.Time { return at })
	p := peer.ID("peer-1")
	end := func(ok bool, err string) *holepunch.Event {
		return &holepunch.Event{Remote: p, Type: holepunch.EndHolePunchEvtT, Evt: &holepunch.EndHolePunchEvt{Success: ok, Error: err}}
	}
	ph.Trace(&holepunch.Event{Remote: p, Type: holepunch.StartHolePunchEvtT, Evt: &holepunch.StartHolePunchEvt{}})
	ph.Trace(&holepunch.Event{Remote: p, Type: holepunch.DirectDialEvtT, Evt: &holepunch.DirectDialEvt{}})
	if got := ph.list(); len(got) != 0 {
		t.Fatalf("events other than a punch's end recorded: %+v", got)
	}
	ph.Trace(end(false, "all retries failed"))
	ph.Trace(end(true, ""))
	ph.Trace(end(false, "timeout"))
	got := ph.list()
	want := PunchStats{Attempts: 3, Successes: 1, Last: at, LastError: "timeout"}
	if len(got) != 1 || got[0].Punch != want || got[0].Peer != p.String() {
		t.Fatalf("punch stats %+v, want %+v", got, want)
	}
	ph.Trace(end(true, ""))
	if s := ph.list()[0].Punch; s.Successes != 2 || s.LastError != "" {
		t.Fatalf("after a success: %+v", s)
	}

	for i := range maxHistoryPeers {
		ph.Trace(&holepunch.Event{Remote: peer.ID(fmt.Sprint("other-", i)), Evt: &holepunch.EndHolePunchEvt{}})
	}
	all := ph.list()
	if len(all) != maxHistoryPeers || all[0].Peer != peer.ID(fmt.Sprint("other-", maxHistoryPeers-1)).String() {
		t.Fatalf("%d peers, first %s", len(all), all[0].Peer)
	}
	if _, ok := func() (PeerHistory, bool) {
		for _, h := range all {
			if h.Peer == p.String() {
				return h, true
			}
		}
		return PeerHistory{}, false
	}(); ok {
		t.Fatal("the peer seen longest ago was kept past the bound")
	}
}

// TestPeerHistoryEventBound: a peer's history keeps its newest
// maxPeerEvents events, oldest first.
func TestPeerHistoryEventBound(t *testing.T) {
	ph := newPeerHistory(time.Now)
	c := fakeConn{remote: ma.StringCast("/ip4/192.0.2.1/tcp/4001"), peer: "peer-1"}
	for i := range maxPeerEvents + 5 {
		c.remote = ma.StringCast(fmt.Sprintf("/ip4/192.0.2.1/tcp/%d", 4000+i))
		ph.Connected(nil, c)
	}
	h := ph.list()[0]
	if len(h.Events) != maxPeerEvents || h.Events[0].Remote != "/ip4/192.0.2.1/tcp/4005" || h.Events[maxPeerEvents-1].Remote != fmt.Sprintf("/ip4/192.0.2.1/tcp/%d", 4000+maxPeerEvents+4) {
		t.Fatalf("%d events, first %+v", len(h.Events), h.Events[0])
	}
}

// fakeConn is the little of a network.Conn that peerHistory reads.
type fakeConn struct {
	network.Conn
	remote ma.Multiaddr
	peer   peer.ID
}

func (c fakeConn) RemoteMultiaddr() ma.Multiaddr { return c.remote }
func (c fakeConn) RemotePeer() peer.ID           { return c.peer }
func (c fakeConn) Stat() network.ConnStats       { return network.ConnStats{} }
func (c fakeConn) ConnState() network.ConnectionState {
	return network.ConnectionState{Transport: "tcp"}
}

// tcpListenAddr returns n's TCP listen address (without /p2p).
func tcpListenAddr(t *testing.T, n *Node) ma.Multiaddr {
	t.Helper()
	for _, a := range n.Host().Network().ListenAddresses() {
		if _, err := a.ValueForProtocol(ma.P_TCP); err == nil {
			return a
		}
	}
	t.Fatalf("no tcp listen address: %v", n.Host().Network().ListenAddresses())
	return nil
}

// TestNodeSubscribeAudit: a call's audit record reaches a subscriber; a
// subscriber whose buffer is full does not hold up the next call, and
// counts the record it lost.
func TestNodeSubscribeAudit(t *testing.T) {
	a, b := pair(t, nil)
	recs, dropped, cancel, err := b.SubscribeAudit(1)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	addr := addrOf(t, b)
	if _, err := a.Client().CallSkill(ctxT(t), addr, "ping", nil, protocol.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	r := waitFor(t, recs, "the audit record of the call")
	if r.Caller != a.ID().String() || r.Skill != "ping" || r.Outcome != "ok" || r.Via != "mesh" {
		t.Fatalf("record %+v", r)
	}
	// Fill the one slot, then call again: the call completes, a record is lost.
	for range 2 {
		if _, err := a.Client().CallSkill(ctxT(t), addr, "ping", nil, protocol.CallOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); dropped() == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	if d := dropped(); d != 1 {
		t.Fatalf("dropped %d, want 1", d)
	}
	if r := <-recs; r.Skill != "ping" {
		t.Fatalf("buffered record %+v", r)
	}
}

// punchTracerGoroutines counts the gc goroutines of go-libp2p's hole-punch
// tracers that carry an event tracer: one per host whose hole punching
// reports to a PeerHistory.
func punchTracerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "holepunch.(*tracer).gc(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestPeerHistoryTracerInstalled: a node with hole punching on gives it the
// history's tracer (its goroutine runs while the node does, and ends with
// it); a node without hole punching has none. (transport.WithHolePunching
// turns on what WithNATTraversal does for hole punching, without the port
// mapping, whose UPnP search outlives the host by seconds.)
func TestPeerHistoryTracerInstalled(t *testing.T) {
	before := punchTracerGoroutines()
	newTestNode(t, func(c *Config) { c.Mesh = &MeshConfig{NoMDNS: true, NoNAT: true} })
	if got := punchTracerGoroutines(); got != before {
		t.Fatalf("without hole punching: %d tracers, want %d", got, before)
	}
	n := newTestNode(t, func(c *Config) {
		c.Mesh = &MeshConfig{NoMDNS: true, NoNAT: true}
		c.HostOptions = append(c.HostOptions, transport.WithHolePunching(nil))
	})
	if got := punchTracerGoroutines(); got != before+1 {
		t.Fatalf("with hole punching: %d tracers, want %d", got, before+1)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if got := punchTracerGoroutines(); got != before {
		t.Fatalf("after Close: %d tracers, want %d", got, before)
	}
}
