package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// dialLog is a concurrency-safe buffer for a node's log.
type dialLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *dialLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *dialLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// dialListener is a TCP listener on loopback that speaks no libp2p: it
// accepts, counts, and closes. Closed when the test ends.
type dialListener struct {
	addr  ma.Multiaddr
	count *atomic.Int32
}

func newDialListener(t *testing.T) *dialListener {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a, err := manet.FromNetAddr(ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return &dialListener{addr: a, count: testenv.CountConns(t, ln, nil)}
}

// closedPort returns a loopback TCP address nothing listens on.
func closedPort(t *testing.T) ma.Multiaddr {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := manet.FromNetAddr(ln.Addr())
	_ = ln.Close()
	return a
}

func randomPeer(t *testing.T) peer.ID {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestGatewayUnreachablePeerSaysNothingOfTheDial: the gateway's Forward to
// a peer behind an open port that speaks no libp2p, a closed port, or no
// known address at all fails with a PeerError whose text is the same but
// for the PeerID and tells nothing of the dial, which goes to the node's
// log (issue 18: no port scan through the gateway).
func TestGatewayUnreachablePeerSaysNothingOfTheDial(t *testing.T) {
	logs := &dialLog{}
	n := newTestNode(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	open := newDialListener(t)
	closed := closedPort(t)
	caller := Caller{ID: "ip:127.0.0.1", Via: "http", Kind: protocol.CallerAnonymous}
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"agent/card"}`)
	var texts []string
	for _, tc := range []struct {
		name  string
		addrs []ma.Multiaddr
		inLog string
	}{
		{"open port", []ma.Multiaddr{open.addr}, open.addr.String()},
		{"closed port", []ma.Multiaddr{closed}, "connection refused"},
		{"no address", nil, "no route"},
	} {
		pid := randomPeer(t)
		n.host.Peerstore().AddAddrs(pid, tc.addrs, peerstore.TempAddrTTL)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := n.Forward(ctx, caller, pid.String(), msg)
		cancel()
		var pe *PeerError
		if !errors.As(err, &pe) || pe.Peer != pid || pe.Reason != ReasonUnreachable || pe.Err == nil {
			t.Fatalf("%s: Forward = %v, want a PeerError, unreachable, with its cause", tc.name, err)
		}
		text := strings.ReplaceAll(err.Error(), pid.String(), "<peer>")
		texts = append(texts, text)
		for _, leak := range []string{"dial", "refused", "127.0.0.1", "tcp", "route", "EOF", "security"} {
			if strings.Contains(text, leak) {
				t.Errorf("%s: %q in the error a caller sees: %s", tc.name, leak, err)
			}
		}
		if l := logs.String(); !strings.Contains(l, pid.String()) || !strings.Contains(l, tc.inLog) {
			t.Errorf("%s: the log does not name the peer and the cause %q:\n%s", tc.name, tc.inLog, l)
		}
	}
	if texts[0] != texts[1] || texts[1] != texts[2] {
		t.Errorf("the errors differ: %q", texts)
	}
	if open.count.Load() == 0 {
		t.Error("the open port was never dialled: the test tested nothing")
	}
}

// TestGatewayPeerThatDoesNotAnswer: a peer reached that resets the call's
// stream is a PeerError with the reason no_answer, and the text says no
// more.
func TestGatewayPeerThatDoesNotAnswer(t *testing.T) {
	n := newTestNode(t, nil)
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h, err := transport.NewHost(transport.WithIdentity(key), transport.WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	h.SetStreamHandler(libp2pproto.ID(protocol.RPCProtocolID), func(s network.Stream) { _ = s.Reset() })
	n.host.Peerstore().AddAddrs(h.ID(), h.Addrs(), peerstore.TempAddrTTL)
	_, err = n.Forward(ctxT(t), Caller{ID: "ip:127.0.0.1", Via: "http", Kind: protocol.CallerAnonymous}, h.ID().String(),
		[]byte(`{"jsonrpc":"2.0","id":1,"method":"agent/card"}`))
	var pe *PeerError
	if !errors.As(err, &pe) || pe.Reason != ReasonNoAnswer || err.Error() != "node: could not reach peer "+h.ID().String()+" (no_answer)" {
		t.Fatalf("Forward = %v, want a PeerError, no_answer", err)
	}
}

// TestDialScopeDHTAndCard: a node whose scope is public (as on a public
// mesh: transport.WithDialScope("public")) never dials the loopback
// addresses a peer announced, learnt from the DHT (a FIND_NODE answer of a
// DHT server that knows them) or from the peer's signed card found there.
// A node in loopback scope, the control, reaches the peer the same way.
func TestDialScopeDHTAndCard(t *testing.T) {
	hp := newDialListener(t)
	mesh := func(boot ...string) func(*Config) {
		return func(c *Config) {
			c.Mesh = &MeshConfig{Bootstrap: boot, NoMDNS: true, NoNAT: true}
			c.ListenAddrs = []string{"/ip4/127.0.0.1/tcp/0"}
		}
	}
	server := newTestNode(t, mesh())
	boot := server.P2PAddrs()[0]
	// The peer announces its addresses and the honeypot's.
	p := newTestNode(t, func(c *Config) {
		mesh(boot)(c)
		c.HostOptions = append(c.HostOptions, transport.WithLibp2pOptions(libp2p.AddrsFactory(func(a []ma.Multiaddr) []ma.Multiaddr {
			return append(a, hp.addr)
		})))
	})
	skills.Add(p.Registry(), "scopetest", "A skill only the peer offers", nil, func(context.Context, struct{}) (map[string]string, error) {
		return map[string]string{}, nil
	})
	p.CardChanged()

	for _, scope := range []string{"public", "auto"} {
		t.Run(scope, func(t *testing.T) {
			// No bootstrap: the DHT server calls in, which the gater lets
			// through (it gates dials only), and is the node's one DHT peer.
			// A DHT client, so that the server never tells the peer of it,
			// and the peer never calls in (identify would then tell it the
			// addresses, a source TestDialScopeSources holds).
			self := newTestNode(t, func(c *Config) {
				mesh()(c)
				c.Mesh.Mode = "client"
				c.HostOptions = append(c.HostOptions, transport.WithDialScope(scope))
			})
			if err := server.host.Connect(ctxT(t), peer.AddrInfo{ID: self.ID(), Addrs: self.host.Addrs()}); err != nil {
				t.Fatal(err)
			}
			// The card, found through the DHT.
			var card *protocol.AgentCard
			deadline := time.Now().Add(60 * time.Second)
			for card == nil && time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				res, _ := self.Find(ctx, "scopetest", 5)
				cancel()
				for i := range res {
					if res[i].Card.PeerID == p.ID().String() {
						card = &res[i].Card
					}
				}
				if card == nil {
					time.Sleep(200 * time.Millisecond)
				}
			}
			if card == nil {
				t.Fatal("the peer's card was never found")
			}
			if !slices.Contains(card.Addrs, hp.addr.String()+"/p2p/"+p.ID().String()) {
				t.Fatalf("the card does not announce the honeypot: %v", card.Addrs)
			}
			if scope == "auto" {
				// The control: the peer's announced addresses are dialled.
				if _, err := self.Client().Connect(ctxT(t), protocol.Address{Kind: protocol.AddrMesh, PeerID: p.ID().String()}); err != nil {
					t.Fatalf("a node in loopback scope: connect by PeerID: %v", err)
				}
				return
			}
			// By PeerID: the DHT gives the addresses.
			_, err := self.Client().Connect(ctxT(t), protocol.Address{Kind: protocol.AddrMesh, PeerID: p.ID().String()})
			if err == nil || !errors.Is(err, swarm.ErrGaterDisallowedConnection) && !errors.Is(err, ErrNoRoute) {
				t.Errorf("connect by PeerID: %v, want a refusal", err)
			}
			if !slices.Contains(multiaddrStrings(self.host.Peerstore().Addrs(p.ID())), hp.addr.String()) {
				t.Errorf("the DHT never gave the peer's addresses (%v): the test tested nothing", self.host.Peerstore().Addrs(p.ID()))
			}
			// By the card's addresses.
			for _, a := range card.Addrs {
				addr, perr := protocol.ParseAddress(a)
				if perr != nil {
					t.Fatal(perr)
				}
				if _, err := self.Client().Connect(ctxT(t), addr); !errors.Is(err, swarm.ErrGaterDisallowedConnection) {
					t.Errorf("connect to the card's %s: %v, want the gater's refusal", a, err)
				}
			}
			if self.host.Network().Connectedness(p.ID()) == network.Connected || hp.count.Load() != 0 {
				t.Fatalf("a public node dialled a loopback address announced through the DHT (connected: %v, honeypot dialled %d times)",
					self.host.Network().Connectedness(p.ID()), hp.count.Load())
			}
		})
	}
}

func multiaddrStrings(as []ma.Multiaddr) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}
