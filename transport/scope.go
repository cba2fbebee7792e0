package transport

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// The dialling rule. Addresses reach a peer from the node's side only
// within a scope: a loopback address reaches this machine, a private one
// (RFC 1918, CGNAT, link-local, IPv6 ULA) this LAN, a public one anyone.
// A peer announces its addresses (by identify, in its signed card, in the
// DHT), and an address that names a scope the node is not in names
// something of the node's own instead: its own loopback ports, its LAN. So
// a host dials an address only within its own scope, which its own listen
// addresses give:
//
//   - a host with a public IPv4 address of its own (manet.IsPublicAddr,
//     which counts the ranges of AllowRoutable, that is --routable-cidr, as
//     public), or a public IPv6 address and no private IPv4 one, is on a
//     public mesh: it dials public addresses only (a machine at home or in
//     an office has a global IPv6 address beside its LAN's IPv4 one, and
//     stays on its LAN);
//   - any other host dials public addresses and the classes of its own
//     addresses: loopback when it listens on loopback (a lab on one
//     machine), private when it has a private address (a LAN), and the
//     reserved ranges that are neither (documentation, benchmarking) when
//     it has one;
//   - a host that listens on no IP address (a dial-only client) dials any
//     address: it learns addresses only from its user and from identify.
//
// A listen address on 0.0.0.0 or :: stands for every address of the
// machine's interfaces of its family, read again every scopeRefresh.
// Addresses without an IP (a DNS name, resolved before the dial and checked
// then; a relay circuit without the relay's address) are not judged.
// [WithDialScope] "public" fixes the first case whatever the addresses.
//
// go-libp2p v0.49.0 covers part of this alone: identify keeps, of the
// addresses a peer announces over a connection from a public address, only
// public ones (over a private one, all but loopback; over loopback, all),
// and the swarm never dials an unspecified address, its own listen
// addresses or IPv6 link-local. The DHT (kad-dht v0.42.2, built without an
// AddressFilter by discovery) adds the addresses of a FIND_NODE answer to
// the peerstore as they come, and a multiaddr given to Connect goes in as
// it is; nothing filters those. The connection gater below judges every
// dial, whatever the address's source.

// scopeRefresh is how long the classes of the host's own addresses are
// kept before the interfaces are read again.
const scopeRefresh = 30 * time.Second

// addrClass is the scope of one address, as a bit so that a set of them is
// a mask.
type addrClass uint8

const (
	classPublic addrClass = 1 << iota
	classLoopback
	classPrivate
	// classOther is an IP address that is neither public, private nor
	// loopback: documentation, benchmarking and other reserved ranges.
	classOther
)

func (c addrClass) String() string {
	switch c {
	case classPublic:
		return "public"
	case classLoopback:
		return "loopback"
	case classPrivate:
		return "private"
	case classOther:
		return "reserved"
	}
	return "none"
}

// classOf returns the class of an address that starts with an IP (an
// IPv4-mapped IPv6 address counts as its IPv4 address); ok is false for
// any other address.
func classOf(a ma.Multiaddr) (c addrClass, ok bool) {
	if len(a) == 0 {
		return 0, false
	}
	switch a[0].Code() {
	case ma.P_IP4:
	case ma.P_IP6:
		if ip, err := netip.ParseAddr(a[0].Value()); err == nil && ip.Is4In6() {
			a = ma.Join(ma.StringCast("/ip4/"+ip.Unmap().String()), a[1:])
		}
	case ma.P_IP6ZONE:
		// A zone is given only to link-local and other scoped addresses.
		return classPrivate, true
	default:
		return 0, false
	}
	switch {
	case manet.IsPublicAddr(a):
		return classPublic, true
	case manet.IsIPLoopback(a):
		return classLoopback, true
	case manet.IsPrivateAddr(a):
		return classPrivate, true
	}
	return classOther, true
}

// WithDialScope sets the scope the host dials within (see the dialling
// rule above): "auto", the default, derives it from the host's own listen
// addresses; "public" dials public addresses only (and the ranges of
// AllowRoutable), whatever the host's addresses, as a host on a public
// mesh does.
func WithDialScope(scope string) Option {
	return func(c *hostConfig) error {
		switch scope {
		case "", "auto":
			c.publicScope = false
		case "public":
			c.publicScope = true
		default:
			return fmt.Errorf("transport: dial scope %q: want auto or public", scope)
		}
		return nil
	}
}

// scopeGater is the host's connection gater: it refuses a dial to an
// address outside the host's scope, and gates nothing else. It is safe for
// concurrent use; mu guards allowed and at.
type scopeGater struct {
	listen []ma.Multiaddr
	public bool
	log    *slog.Logger
	// ifaces returns the machine's interface addresses (net.InterfaceAddrs
	// but for tests).
	ifaces func() ([]net.Addr, error)

	mu      sync.Mutex
	allowed addrClass // the classes dialled; 0 until computed
	all     bool      // no IP address of our own: every address is dialled
	at      time.Time
}

func newScopeGater(listen []ma.Multiaddr, public bool, log *slog.Logger) *scopeGater {
	return &scopeGater{listen: listen, public: public, log: log, ifaces: net.InterfaceAddrs}
}

// scope returns the classes of address the host dials, and whether it
// dials any address at all.
func (g *scopeGater) scope() (addrClass, bool) {
	if g.public {
		return classPublic, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.allowed != 0 && time.Since(g.at) < scopeRefresh {
		return g.allowed, g.all
	}
	v4, v6 := g.ownClasses()
	own := v4 | v6
	switch {
	case own == 0:
		g.allowed, g.all = classPublic, true
	case v4&classPublic != 0 || (v6&classPublic != 0 && v4&classPrivate == 0):
		g.allowed, g.all = classPublic, false
	default:
		g.allowed, g.all = own|classPublic, false
	}
	g.at = time.Now()
	return g.allowed, g.all
}

// ownClasses returns the classes of the host's IPv4 and IPv6 listen
// addresses, an unspecified one standing for every interface address of
// its family.
func (g *scopeGater) ownClasses() (v4own, v6own addrClass) {
	var ifaces []net.Addr
	read := false
	for _, a := range g.listen {
		if len(a) == 0 {
			continue
		}
		v4 := a[0].Code() == ma.P_IP4 || isMapped4(a)
		if !manet.IsIPUnspecified(a) {
			if c, ok := classOf(a); ok {
				if v4 {
					v4own |= c
				} else {
					v6own |= c
				}
			}
			continue
		}
		if !read {
			var err error
			if ifaces, err = g.ifaces(); err != nil {
				g.log.Warn("transport: the interfaces' addresses cannot be read: this host dials public addresses only", "err", err)
				return classPublic, 0
			}
			read = true
		}
		for _, ia := range ifaces {
			n, ok := ia.(*net.IPNet)
			if !ok {
				continue
			}
			if (n.IP.To4() != nil) != v4 {
				continue
			}
			m, err := manet.FromIP(n.IP)
			if err != nil {
				continue
			}
			if c, ok := classOf(m); ok {
				if v4 {
					v4own |= c
				} else {
					v6own |= c
				}
			}
		}
	}
	return v4own, v6own
}

// isMapped4 reports whether a starts with an IPv4-mapped IPv6 address.
func isMapped4(a ma.Multiaddr) bool {
	if a[0].Code() != ma.P_IP6 {
		return false
	}
	ip, err := netip.ParseAddr(a[0].Value())
	return err == nil && ip.Is4In6()
}

// allows reports whether the host dials a, and the class of a.
func (g *scopeGater) allows(a ma.Multiaddr) (bool, addrClass) {
	c, ok := classOf(a)
	if !ok {
		return true, 0
	}
	allowed, all := g.scope()
	return all || allowed&c != 0, c
}

// InterceptPeerDial allows every peer; the addresses are judged.
func (g *scopeGater) InterceptPeerDial(peer.ID) bool { return true }

// InterceptAddrDial refuses an address outside the host's scope.
func (g *scopeGater) InterceptAddrDial(p peer.ID, a ma.Multiaddr) bool {
	ok, c := g.allows(a)
	if !ok {
		g.log.Debug("transport: not dialling an address outside this host's scope (--routable-cidr widens it)", "peer", p, "addr", a, "class", c.String())
	}
	return ok
}

// InterceptAccept allows every inbound connection.
func (g *scopeGater) InterceptAccept(network.ConnMultiaddrs) bool { return true }

// InterceptSecured allows every connection.
func (g *scopeGater) InterceptSecured(network.Direction, peer.ID, network.ConnMultiaddrs) bool {
	return true
}

// InterceptUpgraded allows every connection.
func (g *scopeGater) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) {
	return true, 0
}

// warnOutOfScope logs a warning for each address of a static relay (the
// bootstrap peers of WithNATTraversal) that the host will not dial: the
// operator named it, so the refusal is a configuration mistake.
func (c *hostConfig) warnOutOfScope(g *scopeGater) {
	for _, ai := range c.staticRelays {
		for _, a := range ai.Addrs {
			if ok, class := g.allows(a); !ok {
				c.logger.Warn("transport: a bootstrap address is outside this host's scope and is not dialled: a host with a public address dials public addresses only; --routable-cidr makes a private IPv4 range dialled", "peer", ai.ID, "addr", a, "class", class.String())
			}
		}
	}
}
