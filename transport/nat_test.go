package transport

import (
	"context"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	"github.com/prometheus/client_golang/prometheus"
)

func TestSubtractNet(t *testing.T) {
	_, ten, _ := net.ParseCIDR("10.0.0.0/8")
	_, cut, _ := net.ParseCIDR("10.77.0.0/16")
	got := subtract(ten, cut)
	if len(got) != 8 {
		t.Fatalf("want 8 blocks, got %v", got)
	}
	for _, probe := range []string{"10.0.0.1", "10.76.255.255", "10.78.0.0", "10.255.255.255", "10.128.0.1"} {
		in := false
		for _, n := range got {
			in = in || n.Contains(net.ParseIP(probe))
		}
		if !in {
			t.Errorf("%s lost from 10/8 minus 10.77/16: %v", probe, got)
		}
	}
	for _, n := range got {
		if n.Contains(net.ParseIP("10.77.0.10")) || n.Contains(net.ParseIP("10.77.255.1")) {
			t.Errorf("%v still holds the cut range", n)
		}
	}
	_, other, _ := net.ParseCIDR("192.168.0.0/16")
	if got := subtract(other, cut); len(got) != 1 || got[0] != other {
		t.Errorf("unrelated range changed: %v", got)
	}
	_, big, _ := net.ParseCIDR("10.0.0.0/7")
	if got := subtract(ten, big); len(got) != 0 {
		t.Errorf("covering cut must remove the range: %v", got)
	}
}

func TestAllowRoutable(t *testing.T) {
	saved4 := manet.Private4
	t.Cleanup(func() { manet.Private4 = saved4 })
	lab := ma.StringCast("/ip4/10.77.0.10/tcp/4001")
	other := ma.StringCast("/ip4/10.78.1.2/tcp/4001")
	if manet.IsPublicAddr(lab) {
		t.Fatal("10.77.0.10 public before AllowRoutable")
	}
	if err := AllowRoutable([]string{"10.77.0.0/16"}); err != nil {
		t.Fatal(err)
	}
	if !manet.IsPublicAddr(lab) {
		t.Error("10.77.0.10 still private")
	}
	if manet.IsPublicAddr(other) {
		t.Error("10.78.1.2 became public")
	}
	for _, bad := range []string{"10.77.0.0", "fd00:77::/32"} {
		if err := AllowRoutable([]string{bad}); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}

func TestBehindNAT(t *testing.T) {
	m := func(ss ...string) []ma.Multiaddr {
		var out []ma.Multiaddr
		for _, s := range ss {
			out = append(out, ma.StringCast(s))
		}
		return out
	}
	relay := func(ss ...string) []peer.AddrInfo { return []peer.AddrInfo{{Addrs: m(ss...)}} }
	for _, c := range []struct {
		name   string
		own    []ma.Multiaddr
		relays []peer.AddrInfo
		want   string
	}{
		{"private node, public relay", m("/ip4/10.78.2.2/tcp/4001", "/ip4/127.0.0.1/tcp/4001"), relay("/ip4/10.0.0.9/tcp/4001", "/ip4/11.77.0.10/udp/4001/quic-v1"), "/ip4/11.77.0.10/udp/4001/quic-v1"},
		{"public address of our own", m("/ip4/10.78.2.2/tcp/4001", "/ip4/11.77.0.22/tcp/4001"), relay("/ip4/11.77.0.10/tcp/4001"), ""},
		{"relay on our private network", m("/ip4/192.168.1.5/tcp/4001"), relay("/ip4/192.168.1.1/tcp/4001"), ""},
		{"loopback mesh", m("/ip4/127.0.0.1/tcp/4001"), relay("/ip4/127.0.0.1/tcp/4002"), ""},
		{"no address", nil, relay("/ip4/11.77.0.10/tcp/4001"), ""},
		{"no relay", m("/ip4/10.78.2.2/tcp/4001"), nil, ""},
		{"public IPv6 of our own", m("/ip4/10.78.2.2/tcp/4001", "/ip6/2001:4860::1/tcp/4001"), relay("/ip4/11.77.0.10/tcp/4001"), ""},
	} {
		got := behindNAT(c.own, c.relays)
		if (got == nil && c.want != "") || (got != nil && got.String() != c.want) {
			t.Errorf("%s: behindNAT = %v, want %q", c.name, got, c.want)
		}
	}
}

// subscribedHost is a host whose event bus closes subscribed after its
// first Subscribe returned.
type subscribedHost struct {
	host.Host
	subscribed chan struct{}
	once       sync.Once
}

func (h *subscribedHost) EventBus() event.Bus { return subscribedBus{Bus: h.Host.EventBus(), h: h} }

type subscribedBus struct {
	event.Bus
	h *subscribedHost
}

func (b subscribedBus) Subscribe(eventType any, opts ...event.SubscriptionOpt) (event.Subscription, error) {
	sub, err := b.Bus.Subscribe(eventType, opts...)
	b.h.once.Do(func() { close(b.h.subscribed) })
	return sub, err
}

// TestWaitDirect: WaitDirect returns a direct connection that opens while
// it waits (on the event bus, not by polling), at once when one is open,
// and nil when ctx ends first; WaitHolePunchReady reports false for a
// host that never learns a public address.
func TestWaitDirect(t *testing.T) {
	a := newTestHost(t, "/ip4/127.0.0.1/tcp/0")
	b := newTestHost(t, "/ip4/127.0.0.1/tcp/0")

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if c := WaitDirect(ctx, a, b.ID()); c != nil {
		t.Fatalf("WaitDirect with no connection returned %v", c)
	}

	got := make(chan network.Conn, 1)
	waiting := &subscribedHost{Host: a, subscribed: make(chan struct{})}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got <- WaitDirect(ctx, waiting, b.ID())
	}()
	<-waiting.subscribed // WaitDirect listens on the event bus: connect now
	connect(t, a, b)
	select {
	case c := <-got:
		if c == nil || c.RemotePeer() != b.ID() {
			t.Fatalf("WaitDirect returned %v, want the connection to b", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitDirect did not return after the connection opened")
	}
	start := time.Now()
	if c := WaitDirect(context.Background(), a, b.ID()); c == nil || time.Since(start) > time.Second {
		t.Fatalf("WaitDirect with a direct connection open: %v after %v, want it at once", c, time.Since(start))
	}

	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if HolePunchReady(a) || WaitHolePunchReady(ctx, a) {
		t.Fatal("a loopback host without hole punching reports DCUtR ready")
	}
}

// punchTracer is a holepunch.EventTracer that drops what it sees.
type punchTracer struct{}

func (punchTracer) Trace(*holepunch.Event) {}

// tracerGCs counts the goroutines of go-libp2p's hole-punch tracers that
// carry an event tracer (each runs one gc goroutine; a metrics-only tracer
// runs none).
func tracerGCs() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "holepunch.(*tracer).gc(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestWithHolePunchTracer: the tracer is installed on the hole punching
// service (its gc goroutine runs while the host does), only with hole
// punching on, and go-libp2p's hole punching metrics stay on the
// registerer of WithMetrics; a nil tracer is refused.
func TestWithHolePunchTracer(t *testing.T) {
	if err := CheckOptions(WithHolePunchTracer(nil)); err == nil || !strings.Contains(err.Error(), "WithHolePunchTracer") {
		t.Fatalf("a nil tracer: %v", err)
	}
	before := tracerGCs()
	newTestHost(t, "/ip4/127.0.0.1/tcp/0", WithHolePunchTracer(punchTracer{}))
	if got := tracerGCs(); got != before {
		t.Fatalf("a tracer without hole punching: %d tracer goroutines, want %d", got, before)
	}
	reg := prometheus.NewRegistry()
	h := newTestHost(t, "/ip4/127.0.0.1/tcp/0", WithHolePunching(nil), WithMetrics(reg), WithHolePunchTracer(punchTracer{}))
	if got := tracerGCs(); got != before+1 {
		t.Fatalf("with hole punching: %d tracer goroutines, want %d", got, before+1)
	}
	if got := gatheredNames(t, reg, "libp2p_holepunch_"); len(got) == 0 {
		t.Fatal("no hole punching metrics on the registerer of WithMetrics")
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if got := tracerGCs(); got != before {
		t.Fatalf("after Close: %d tracer goroutines, want %d", got, before)
	}
}
