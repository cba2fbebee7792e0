package transport

import (
	"fmt"
	"math/big"
	"net"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/autorelay"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	manet "github.com/multiformats/go-multiaddr/net"
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
// WithNATTraversal).
func WithRelayService(limits RelayLimits) Option {
	return func(c *hostConfig) error {
		l := limits.withDefaults()
		res := relayv2.DefaultResources()
		res.Limit = &relayv2.RelayLimit{Duration: l.Duration, Data: l.Data}
		res.MaxCircuits = l.Circuits
		res.MaxReservations = l.Reservations
		c.extra = append(c.extra, libp2p.EnableRelayService(relayv2.WithResources(res)), libp2p.EnableNATService())
		return nil
	}
}

// WithNATTraversal turns on what a node behind NAT needs: the AutoNAT v2
// client and server, UPnP/NAT-PMP port mapping, DCUtR hole punching, and
// AutoRelay with staticRelays (the bootstrap or relay nodes) as its relays
// when there are any.
func WithNATTraversal(staticRelays []peer.AddrInfo) Option {
	return func(c *hostConfig) error {
		c.extra = append(c.extra, libp2p.EnableAutoNATv2(), libp2p.NATPortMap(), libp2p.EnableHolePunching())
		if len(staticRelays) > 0 {
			c.extra = append(c.extra, libp2p.EnableAutoRelayWithStaticRelays(staticRelays,
				autorelay.WithBootDelay(0), autorelay.WithMinInterval(5*time.Second)))
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
