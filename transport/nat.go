package transport

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/autorelay"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	"github.com/libp2p/go-libp2p/x/rate"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	"github.com/prometheus/client_golang/prometheus"
)

// Relay service defaults. go-libp2p's own (2 minutes, 128 KiB per circuit)
// end an agent call or a file transfer half-way; these bound a circuit to
// half an hour and 512 MiB each way, 16 circuits per peer and 128
// reservations, so one relay still cannot be drained without limit.
const (
	DefaultRelayDuration           = 30 * time.Minute
	DefaultRelayData         int64 = 512 << 20
	DefaultRelayCircuits           = 16
	DefaultRelayReservations       = 128
)

// RelayLimits bound what a relay service carries; zero fields take the
// defaults above.
type RelayLimits struct {
	// Duration ends a relayed connection after this long.
	Duration time.Duration
	// Data ends a relayed connection after this many bytes in either direction.
	Data int64
	// Circuits is the most relayed connections per peer.
	Circuits int
	// Reservations is the most peers holding a reservation at once.
	Reservations int
}

func (l RelayLimits) withDefaults() RelayLimits {
	if l.Duration <= 0 {
		l.Duration = DefaultRelayDuration
	}
	if l.Data <= 0 {
		l.Data = DefaultRelayData
	}
	if l.Circuits <= 0 {
		l.Circuits = DefaultRelayCircuits
	}
	if l.Reservations <= 0 {
		l.Reservations = DefaultRelayReservations
	}
	return l
}

// WithRelayService makes the host a public helper for others: a circuit
// relay v2 service within limits, and an AutoNAT server (v1; v2 comes with
// WithNATTraversal). The host's reachability is forced to public: go-libp2p
// runs the relay only while AutoNAT says public, which takes other AutoNAT
// servers that a mesh's first helper does not have (then it never relays).
// New connections per IP address are rate limited less strictly than by
// go-libp2p's default (see natConfig).
func WithRelayService(limits RelayLimits) Option {
	return func(c *hostConfig) error {
		l := limits.withDefaults()
		res := relayv2.DefaultResources()
		res.Limit = &relayv2.RelayLimit{Duration: l.Duration, Data: l.Data}
		res.MaxCircuits = l.Circuits
		res.MaxReservations = l.Reservations
		c.extra = append(c.extra, libp2p.EnableRelayService(relayv2.WithResources(res)), libp2p.EnableNATService(), libp2p.ForceReachabilityPublic())
		c.connRate = true
		c.forcedReachability = true
		return nil
	}
}

// WithNATTraversal turns on what a node behind NAT needs: the AutoNAT v2
// client and server, UPnP/NAT-PMP port mapping, DCUtR hole punching, and
// AutoRelay with staticRelays (the bootstrap or relay nodes) as its relays
// when there are any. New connections per IP address are rate limited less
// strictly than by go-libp2p's default, and not at all from the IP
// addresses of staticRelays (see natConfig).
//
// A host whose own addresses are all private while a static relay is at a
// public address must be behind NAT: it starts as private (see
// presumePrivate) instead of waiting for AutoNAT, which takes 15 s to a
// minute, so it reserves a relay slot in its first second. AutoNAT still
// runs and corrects it: found public, the reservation is dropped.
// [WithReachability] "private" or "public" overrides both.
func WithNATTraversal(staticRelays []peer.AddrInfo) Option {
	return func(c *hostConfig) error {
		c.relaxFor(staticRelays)
		c.staticRelays = slices.Clone(staticRelays)
		c.extra = append(c.extra, libp2p.EnableAutoNATv2(), libp2p.NATPortMap())
		c.holePunching = true
		if len(staticRelays) > 0 {
			c.extra = append(c.extra, libp2p.EnableAutoRelayWithStaticRelays(staticRelays,
				autorelay.WithBootDelay(0), autorelay.WithMinInterval(5*time.Second)))
		}
		return nil
	}
}

// WithHolePunching is what a client behind NAT needs to reach a peer
// behind another NAT directly: DCUtR hole punching (the public address it
// needs comes from identify with the bootstrap peers), and the relaxed
// connection rates of WithNATTraversal towards bootstrapPeers. A client is
// not dialled by others, so it gets none of a node's reachability
// machinery: no relay reservation, no AutoNAT, no port mapping.
func WithHolePunching(bootstrapPeers []peer.AddrInfo) Option {
	return func(c *hostConfig) error {
		c.relaxFor(bootstrapPeers)
		c.holePunching = true
		return nil
	}
}

// relaxFor relaxes the rate of new connections per IP address, and lifts
// it for the addresses of peers (see natConfig).
func (c *hostConfig) relaxFor(peers []peer.AddrInfo) {
	c.connRate = true
	for _, ai := range peers {
		for _, a := range ai.Addrs {
			if ip, err := manet.ToIP(a); err == nil {
				if addr, ok := netip.AddrFromSlice(ip); ok {
					addr = addr.Unmap()
					c.relayPrefixes = append(c.relayPrefixes, netip.PrefixFrom(addr, addr.BitLen()))
				}
			}
		}
	}
}

// Connection limits per IP address with NAT traversal or a relay service.
// go-libp2p's resource manager allows an IP address (IPv6: a /56) one new
// connection per 5 s after a burst of 16, and 8 connections at once. That
// refuses the agents behind one NAT, which share an address, after a few
// short-lived client commands; and a node behind NAT, whose relayed
// connections all come from its relay's address, after 16 relayed peers.
const (
	// connRatePerIP and connBurstPerIP replace go-libp2p's per-address rate.
	connRatePerIP  = 2
	connBurstPerIP = 64
	// relayedConnsPerRelay is how many connections at once a static relay's
	// address may carry (its relayed peers'); the relay bounds them too.
	relayedConnsPerRelay = 256
)

// natConfig is what the NAT options add to a hostConfig.
type natConfig struct {
	// connRate relaxes the rate of new connections per IP address.
	connRate bool
	// staticRelays are WithNATTraversal's relays: with them the host may
	// start as private (presumePrivate).
	staticRelays []peer.AddrInfo
	// forcedReachability is set when an option fixed the reachability
	// (WithReachability "private"/"public", WithRelayService): AutoNAT's
	// answer is then final, and nothing is presumed.
	forcedReachability bool
	// relayPrefixes are the addresses of the static relays (one-address
	// prefixes): no rate limit, relayedConnsPerRelay connections at once.
	relayPrefixes []netip.Prefix
	// holePunching turns DCUtR on (WithNATTraversal, WithHolePunching);
	// punchTracer, from WithHolePunchTracer, sees its events.
	holePunching bool
	punchTracer  holepunch.EventTracer
}

// WithHolePunchTracer gives et every event of the host's DCUtR hole
// punching (each side's start and end of a punch with a peer, its direct
// dials), as go-libp2p's holepunch.WithTracer does, while go-libp2p's hole
// punching metrics (WithMetrics) keep counting. It does nothing unless
// [WithNATTraversal] or [WithHolePunching] turns hole punching on. et's
// Trace is called on libp2p's goroutines: it must not block.
func WithHolePunchTracer(et holepunch.EventTracer) Option {
	return func(c *hostConfig) error {
		if et == nil {
			return errors.New("WithHolePunchTracer: nil tracer")
		}
		c.punchTracer = et
		return nil
	}
}

// holePunchOptions are libp2p's option turning hole punching on, with
// punchTracer and go-libp2p's metrics tracer on reg (the host's metrics
// registerer) when there is a tracer; none when hole punching is off.
// go-libp2p installs its metrics tracer first and a later tracer option
// replaces it: both go in one option so that neither is lost.
func (n natConfig) holePunchOptions(reg prometheus.Registerer) []libp2p.Option {
	switch {
	case !n.holePunching:
		return nil
	case n.punchTracer == nil:
		return []libp2p.Option{libp2p.EnableHolePunching()}
	}
	mt := holepunch.NewMetricsTracer(holepunch.WithRegisterer(reg))
	return []libp2p.Option{libp2p.EnableHolePunching(holepunch.WithMetricsAndEventTracer(mt, n.punchTracer))}
}

// rcmgrOptions returns the resource manager options of natConfig.
func (n natConfig) rcmgrOptions() []rcmgr.Option {
	if !n.connRate {
		return nil
	}
	exempt := []rate.PrefixLimit{{Prefix: netip.MustParsePrefix("127.0.0.0/8")}, {Prefix: netip.MustParsePrefix("::1/128")}}
	v4 := slices.Clone(rcmgr.DefaultNetworkPrefixLimitV4)
	v6 := slices.Clone(rcmgr.DefaultNetworkPrefixLimitV6)
	for _, p := range n.relayPrefixes {
		exempt = append(exempt, rate.PrefixLimit{Prefix: p})
		l := rcmgr.NetworkPrefixLimit{Network: p, ConnCount: relayedConnsPerRelay}
		if p.Addr().Is4() {
			v4 = append(v4, l)
		} else {
			v6 = append(v6, l)
		}
	}
	per := rate.Limit{RPS: connRatePerIP, Burst: connBurstPerIP}
	return []rcmgr.Option{
		rcmgr.WithConnRateLimiters(&rate.Limiter{
			NetworkPrefixLimits: exempt,
			SubnetRateLimiter: rate.SubnetLimiter{
				IPv4SubnetLimits: []rate.SubnetLimit{{PrefixLength: 32, Limit: per}},
				IPv6SubnetLimits: []rate.SubnetLimit{{PrefixLength: 56, Limit: per}},
				GracePeriod:      time.Minute,
			},
		}),
		rcmgr.WithNetworkPrefixLimit(v4, v6),
	}
}

// WithReachability fixes the host's reachability instead of AutoNAT:
// "private" (behind NAT: reserve a slot on the static relays at once and
// keep it) or "public"; "" and "auto" leave it to AutoNAT, which a host of
// WithNATTraversal starts from private when its addresses say it is behind
// NAT (see presumePrivate).
func WithReachability(r string) Option {
	return func(c *hostConfig) error {
		switch r {
		case "", "auto":
		case "private":
			c.extra = append(c.extra, libp2p.ForceReachabilityPrivate())
			c.forcedReachability = true
		case "public":
			c.extra = append(c.extra, libp2p.ForceReachabilityPublic())
			c.forcedReachability = true
		default:
			return fmt.Errorf("transport: reachability %q: want auto, public or private", r)
		}
		return nil
	}
}

// AllowRoutable makes the given private ranges count as public addresses for
// go-libp2p (private overlays spanning VPCs, labs). go-libp2p decides with
// manet.IsPublicAddr, e.g. whether DCUtR may punch, and no option changes
// it; so this removes the ranges from manet.Private4. Only IPv4 ranges can
// be made routable: for IPv6, go-libp2p counts only global unicast
// (2000::/3) as public, whatever Private6 says. It changes process-wide
// state: call it at start, before any host exists.
func AllowRoutable(cidrs []string) error {
	for _, s := range cidrs {
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			return fmt.Errorf("transport: routable range %q: %w", s, err)
		}
		if n.IP.To4() == nil {
			return fmt.Errorf("transport: routable range %q: only IPv4 ranges can be made routable (go-libp2p counts only 2000::/3 as public IPv6)", s)
		}
		manet.Private4 = subtractNet(manet.Private4, n)
	}
	return nil
}

// subtractNet returns nets with every address of cut removed, splitting a
// range that contains cut into the CIDR blocks around it.
func subtractNet(nets []*net.IPNet, cut *net.IPNet) []*net.IPNet {
	var out []*net.IPNet
	for _, n := range nets {
		out = append(out, subtract(n, cut)...)
	}
	return out
}

func subtract(n, cut *net.IPNet) []*net.IPNet {
	nOnes, bits := n.Mask.Size()
	cOnes, cBits := cut.Mask.Size()
	if bits != cBits || !(n.Contains(cut.IP) || cut.Contains(n.IP)) {
		return []*net.IPNet{n}
	}
	if cOnes <= nOnes { // cut covers n
		return nil
	}
	// Split n in halves until the half holding cut is cut itself.
	var out []*net.IPNet
	cur := n
	for ones := nOnes; ones < cOnes; ones++ {
		lo, hi := halves(cur, bits)
		if lo.Contains(cut.IP) {
			out, cur = append(out, hi), lo
		} else {
			out, cur = append(out, lo), hi
		}
	}
	return out
}

// halves splits n (of bits address bits) into its two sub-blocks.
func halves(n *net.IPNet, bits int) (*net.IPNet, *net.IPNet) {
	ones, _ := n.Mask.Size()
	ip := n.IP.Mask(n.Mask)
	if bits == 32 {
		ip = ip.To4()
	}
	mask := net.CIDRMask(ones+1, bits)
	v := new(big.Int).SetBytes(ip)
	v.SetBit(v, bits-ones-1, 1)
	b := v.FillBytes(make([]byte, len(ip)))
	return &net.IPNet{IP: ip, Mask: mask}, &net.IPNet{IP: net.IP(b), Mask: mask}
}

// presumePrivate starts h as private when natConfig's addresses say it is
// behind NAT: every address h listens on is private (or loopback) and some
// static relay is at a public address, so that relay can only be reached
// through a NAT. AutoNAT v1 starts from "unknown" and, with a 15 s boot
// delay and several failed dial-backs to go, takes 15 s to a minute to say
// "private"; until then AutoRelay reserves nothing and the host cannot be
// reached. This emits the private reachability on the event bus at once,
// which starts AutoRelay's reservation on the static relays (boot delay 0)
// and keeps the DHT in client mode. AutoNAT keeps probing and emits its own
// verdict when it has one: public stops AutoRelay and drops the
// reservation. It returns the public relay address that decided, or nil.
func (n natConfig) presumePrivate(h host.Host) (ma.Multiaddr, error) {
	if n.forcedReachability || len(n.staticRelays) == 0 {
		return nil, nil
	}
	own, err := h.Network().InterfaceListenAddresses()
	if err != nil {
		return nil, fmt.Errorf("transport: the host's addresses: %w", err)
	}
	relay := behindNAT(own, n.staticRelays)
	if relay == nil {
		return nil, nil
	}
	em, err := h.EventBus().Emitter(new(event.EvtLocalReachabilityChanged), eventbus.Stateful)
	if err != nil {
		return nil, fmt.Errorf("transport: presume private reachability: %w", err)
	}
	defer em.Close()
	if err := em.Emit(event.EvtLocalReachabilityChanged{Reachability: network.ReachabilityPrivate}); err != nil {
		return nil, fmt.Errorf("transport: presume private reachability: %w", err)
	}
	return relay, nil
}

// behindNAT returns a public address of relays when every one of own is
// private, and nil otherwise (a public address of our own, no address, or
// only private relays: on the same private network as us, no NAT between).
func behindNAT(own []ma.Multiaddr, relays []peer.AddrInfo) ma.Multiaddr {
	if len(own) == 0 || slices.ContainsFunc(own, manet.IsPublicAddr) {
		return nil
	}
	for _, ai := range relays {
		for _, a := range ai.Addrs {
			if manet.IsPublicAddr(a) {
				return a
			}
		}
	}
	return nil
}

// HolePunchReady reports whether h serves DCUtR. go-libp2p serves it only
// once the host knows a public address of its own (its listen address, or
// the one identify's peers observe behind NAT); a peer behind NAT starts
// hole punching once, when our relayed connection arrives, and that fails
// while we do not serve DCUtR.
func HolePunchReady(h host.Host) bool {
	return slices.Contains(h.Mux().Protocols(), holepunch.Protocol)
}

// WaitHolePunchReady waits until h serves DCUtR (see [HolePunchReady]) or
// ctx ends, on the event bus's protocol updates; it reports whether it does.
func WaitHolePunchReady(ctx context.Context, h host.Host) bool {
	sub, err := h.EventBus().Subscribe(new(event.EvtLocalProtocolsUpdated))
	if err != nil {
		return HolePunchReady(h)
	}
	defer sub.Close()
	for !HolePunchReady(h) {
		select {
		case <-ctx.Done():
			return false
		case _, ok := <-sub.Out():
			if !ok {
				return HolePunchReady(h)
			}
		}
	}
	return true
}

// WaitDirect waits until h has a direct (not relayed) connection to p, or
// ctx ends, on the event bus's connectedness changes, and returns that
// connection, nil when there is none. It returns at once when one is open.
func WaitDirect(ctx context.Context, h host.Host, p peer.ID) network.Conn {
	sub, err := h.EventBus().Subscribe(new(event.EvtPeerConnectednessChanged))
	if err != nil {
		return DirectConn(h, p)
	}
	defer sub.Close()
	for {
		if c := DirectConn(h, p); c != nil {
			return c
		}
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-sub.Out():
			if !ok {
				return DirectConn(h, p)
			}
		}
	}
}

// DirectConn returns an open direct (not limited, not relayed) connection
// of h to p, nil when there is none.
func DirectConn(h host.Host, p peer.ID) network.Conn {
	for _, c := range h.Network().ConnsToPeer(p) {
		if !c.Stat().Limited && !c.IsClosed() {
			return c
		}
	}
	return nil
}
