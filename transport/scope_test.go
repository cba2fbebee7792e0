package transport

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

func TestClassOf(t *testing.T) {
	tests := []struct {
		addr string
		want addrClass // 0: not judged
	}{
		{"/ip4/127.0.0.1/tcp/1", classLoopback},
		{"/ip4/127.9.9.9/udp/1/quic-v1", classLoopback},
		{"/ip6/::1/tcp/1", classLoopback},
		{"/ip6/::ffff:127.0.0.1/tcp/1", classLoopback},
		{"/ip4/10.1.2.3/tcp/1", classPrivate},
		{"/ip4/172.16.0.1/tcp/1", classPrivate},
		{"/ip4/192.168.1.1/tcp/1", classPrivate},
		{"/ip4/100.64.0.1/tcp/1", classPrivate},
		{"/ip4/169.254.1.1/tcp/1", classPrivate},
		{"/ip6/::ffff:10.0.0.1/tcp/1", classPrivate},
		{"/ip6/fd00::2/tcp/1", classPrivate},
		{"/ip6/fe80::1/tcp/1", classPrivate},
		{"/ip6zone/eth0/ip6/fe80::1/tcp/1", classPrivate},
		{"/ip4/11.77.0.10/tcp/1", classPublic},
		{"/ip4/8.8.8.8/tcp/1/p2p/12D3KooWRm93TBci34EWQgZJ3EmaQSAKgg7VD5vq2emZQpLSUW6W/p2p-circuit", classPublic},
		{"/ip6/2606:4700::1/tcp/1", classPublic},
		{"/ip4/192.0.2.2/tcp/1", classOther},
		{"/ip4/0.0.0.0/tcp/1", classOther},
		{"/dns4/example.com/tcp/1", 0},
		{"/p2p/12D3KooWRm93TBci34EWQgZJ3EmaQSAKgg7VD5vq2emZQpLSUW6W/p2p-circuit", 0},
	}
	for _, tc := range tests {
		c, ok := classOf(ma.StringCast(tc.addr))
		if ok != (tc.want != 0) || c != tc.want {
			t.Errorf("classOf(%s) = %s, %v; want %s", tc.addr, c, ok, tc.want)
		}
	}
}

// fakeIfaces returns interface addresses as net.InterfaceAddrs does.
func fakeIfaces(cidrs ...string) func() ([]net.Addr, error) {
	return func() ([]net.Addr, error) {
		var out []net.Addr
		for _, s := range cidrs {
			ip, n, err := net.ParseCIDR(s)
			if err != nil {
				return nil, err
			}
			n.IP = ip
			out = append(out, n)
		}
		return out, nil
	}
}

func TestScopeGaterScope(t *testing.T) {
	const (
		loop = "/ip4/127.0.0.1/tcp/4001"
		lan  = "/ip4/192.168.1.20/tcp/4001"
		ula  = "/ip6/fd00::20/tcp/4001"
		pub  = "/ip4/11.77.0.20/tcp/4001"
		doc  = "/ip4/192.0.2.20/tcp/4001"
	)
	home := fakeIfaces("127.0.0.1/8", "192.168.1.5/24", "::1/128", "fe80::1/64")
	server := fakeIfaces("127.0.0.1/8", "10.0.0.5/16", "11.77.0.10/16", "::1/128")
	tests := []struct {
		name   string
		listen []string
		ifaces func() ([]net.Addr, error)
		public bool
		dials  []string
		never  []string
	}{
		{name: "a lab on loopback", listen: []string{"/ip4/127.0.0.1/tcp/0"}, ifaces: server,
			dials: []string{loop, pub}, never: []string{lan, ula, doc}},
		{name: "a LAN host on every interface", listen: []string{"/ip4/0.0.0.0/tcp/0", "/ip6/::/tcp/0"}, ifaces: home,
			dials: []string{loop, lan, ula, pub, "/ip6/::1/tcp/1"}, never: []string{doc}},
		{name: "a LAN host on its LAN address", listen: []string{"/ip4/192.168.1.5/tcp/0"}, ifaces: home,
			dials: []string{lan, ula, pub}, never: []string{loop, doc}},
		{name: "a public host on every interface", listen: []string{"/ip4/0.0.0.0/tcp/0"}, ifaces: server,
			dials: []string{pub}, never: []string{loop, lan, ula, doc, "/ip6/::1/tcp/1", "/ip4/10.0.0.6/tcp/1"}},
		{name: "a LAN host with a global IPv6 address", listen: []string{"/ip4/0.0.0.0/tcp/0", "/ip6/::/tcp/0"},
			ifaces: fakeIfaces("127.0.0.1/8", "192.168.1.5/24", "::1/128", "fe80::1/64", "2606:4700::5/64"),
			dials:  []string{loop, lan, ula, pub}, never: []string{doc}},
		{name: "an IPv6-only public host", listen: []string{"/ip6/::/tcp/0"}, ifaces: fakeIfaces("::1/128", "fe80::1/64", "2606:4700::5/64"),
			dials: []string{"/ip6/2606:4700::9/tcp/1"}, never: []string{"/ip6/::1/tcp/1", ula, "/ip6/fe80::2/tcp/1"}},
		{name: "a public host on its public address", listen: []string{"/ip4/11.77.0.10/tcp/0"}, ifaces: home,
			dials: []string{pub}, never: []string{loop, lan, doc}},
		{name: "IPv4 wildcard: IPv6 interfaces do not count", listen: []string{"/ip4/0.0.0.0/tcp/0"},
			ifaces: fakeIfaces("127.0.0.1/8", "2606:4700::5/64"), dials: []string{loop, pub}, never: []string{lan}},
		{name: "a reserved range of its own", listen: []string{"/ip4/0.0.0.0/tcp/0"}, ifaces: fakeIfaces("127.0.0.1/8", "192.0.2.2/24"),
			dials: []string{loop, doc, pub}, never: []string{lan}},
		{name: "forced public", listen: []string{"/ip4/127.0.0.1/tcp/0"}, ifaces: home, public: true,
			dials: []string{pub}, never: []string{loop, lan, ula, doc}},
		{name: "a dial-only client", ifaces: server,
			dials: []string{loop, lan, ula, pub, doc}},
		{name: "unreadable interfaces", listen: []string{"/ip4/0.0.0.0/tcp/0"},
			ifaces: func() ([]net.Addr, error) { return nil, errors.New("no") },
			dials:  []string{pub}, never: []string{loop, lan}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var listen []ma.Multiaddr
			for _, s := range tc.listen {
				listen = append(listen, ma.StringCast(s))
			}
			g := newScopeGater(listen, tc.public, slog.New(slog.DiscardHandler))
			g.ifaces = tc.ifaces
			for _, a := range tc.dials {
				if !g.InterceptAddrDial("", ma.StringCast(a)) {
					t.Errorf("%s refused", a)
				}
			}
			for _, a := range tc.never {
				if g.InterceptAddrDial("", ma.StringCast(a)) {
					t.Errorf("%s dialled", a)
				}
			}
			// Names are resolved, and their addresses judged, before the dial.
			if !g.InterceptAddrDial("", ma.StringCast("/dns4/localhost/tcp/1")) {
				t.Error("a DNS address refused")
			}
		})
	}
}

// TestScopeRoutable: --routable-cidr (AllowRoutable) widens a public host's
// scope by the ranges it names, and only by them.
func TestScopeRoutable(t *testing.T) {
	saved4 := manet.Private4
	t.Cleanup(func() { manet.Private4 = saved4 })
	g := newScopeGater(nil, true, slog.New(slog.DiscardHandler))
	lab, other := ma.StringCast("/ip4/10.77.0.10/tcp/1"), ma.StringCast("/ip4/10.78.0.10/tcp/1")
	loop := ma.StringCast("/ip4/127.0.0.1/tcp/1")
	if g.InterceptAddrDial("", lab) || g.InterceptAddrDial("", loop) {
		t.Fatal("private or loopback dialled by a public host before AllowRoutable")
	}
	if err := AllowRoutable([]string{"10.77.0.0/16", "127.0.0.0/8"}); err != nil {
		t.Fatal(err)
	}
	if !g.InterceptAddrDial("", lab) || !g.InterceptAddrDial("", loop) {
		t.Error("a routable range refused")
	}
	if g.InterceptAddrDial("", other) {
		t.Error("a range that was not made routable dialled")
	}
}

// honeypot is a TCP listener on loopback that counts the connections made
// to it: an address that must never be dialled.
type honeypot struct {
	addr  ma.Multiaddr
	count *atomic.Int32
}

func newHoneypot(t *testing.T) *honeypot {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a, err := manet.FromNetAddr(ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return &honeypot{addr: a, count: testenv.CountConns(t, ln, nil)}
}

// TestDialScopeSources: a host whose scope is public never dials the
// loopback addresses a peer announces, whichever way it learnt them: by
// identify, given to Connect (the addresses of a signed card), or put in
// the peerstore (as the DHT puts those of a FIND_NODE answer). The DHT's
// own path is held in the node package (TestDialScopeDHT). A host in
// loopback scope dials the same addresses: the refusal is the scope's.
func TestDialScopeSources(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		source string
		// dial makes self learn p's addresses (announced, with hp's) by
		// the source, and dials p.
		dial func(t *testing.T, self, p host.Host, hp *honeypot) error
	}{
		{"identify", func(t *testing.T, self, p host.Host, hp *honeypot) error {
			// The peer calls in (an inbound connection is not gated),
			// identify tells self its addresses, and it leaves.
			connect(t, p, self)
			waitAddr(t, self, p.ID(), hp.addr)
			_ = self.Network().ClosePeer(p.ID())
			waitGone(t, self, p.ID())
			return self.Connect(ctx, peer.AddrInfo{ID: p.ID()})
		}},
		{"card", func(t *testing.T, self, p host.Host, hp *honeypot) error {
			return self.Connect(ctx, peer.AddrInfo{ID: p.ID(), Addrs: append(p.Addrs(), hp.addr)})
		}},
		{"peerstore", func(t *testing.T, self, p host.Host, hp *honeypot) error {
			self.Peerstore().AddAddrs(p.ID(), append(p.Addrs(), hp.addr), peerstore.TempAddrTTL)
			return self.Connect(ctx, peer.AddrInfo{ID: p.ID()})
		}},
	} {
		t.Run(tc.source, func(t *testing.T) {
			hp := newHoneypot(t)
			// The peer announces its own addresses and the honeypot's.
			p := newTestHost(t, "/ip4/127.0.0.1/tcp/0", WithLibp2pOptions(libp2p.AddrsFactory(func(addrs []ma.Multiaddr) []ma.Multiaddr {
				return append(addrs, hp.addr)
			})))
			public := newTestHost(t, "/ip4/127.0.0.1/tcp/0", WithDialScope("public"))
			if err := tc.dial(t, public, p, hp); !errors.Is(err, swarm.ErrGaterDisallowedConnection) {
				t.Errorf("public host: connect = %v, want the gater's refusal", err)
			}
			if public.Network().Connectedness(p.ID()) == network.Connected || hp.count.Load() != 0 {
				t.Fatalf("a public host dialled an announced loopback address (connected: %v, honeypot dialled %d times)",
					public.Network().Connectedness(p.ID()), hp.count.Load())
			}
			// The control: a host in loopback scope dials them.
			lab := newTestHost(t, "/ip4/127.0.0.1/tcp/0")
			if err := tc.dial(t, lab, p, hp); err != nil {
				t.Fatalf("lab host: connect: %v", err)
			}
		})
	}
}

// waitBus waits, at most 10 s, until cond holds: it looks again at every
// event on h's event bus (identify's, connectedness changes), and reports
// whether cond came to hold.
func waitBus(t *testing.T, h host.Host, cond func() bool) bool {
	t.Helper()
	sub, err := h.EventBus().Subscribe(event.WildcardSubscription)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-sub.Out():
		case <-deadline.C:
			return cond()
		}
	}
	return true
}

// waitAddr waits until h's peerstore holds a for p (identify updates the
// peerstore before it emits its event).
func waitAddr(t *testing.T, h host.Host, p peer.ID, a ma.Multiaddr) {
	t.Helper()
	if !waitBus(t, h, func() bool { return ma.Contains(h.Peerstore().Addrs(p), a) }) {
		t.Fatalf("identify never told %s of %s (has %v)", h.ID(), a, h.Peerstore().Addrs(p))
	}
}

// waitGone waits until h has no connection to p (an
// EvtPeerConnectednessChanged).
func waitGone(t *testing.T, h host.Host, p peer.ID) {
	t.Helper()
	if !waitBus(t, h, func() bool { return h.Network().Connectedness(p) != network.Connected }) {
		t.Fatalf("%s still connected to %s", h.ID(), p)
	}
}
