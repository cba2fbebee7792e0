// Package netscope is the outbound address scope of a node's requests to
// the world outside the mesh (issue 23: a2a skills, agent discovery,
// health checks): a dialer whose Control refuses, after DNS resolution,
// loopback, link-local, private (RFC 1918, ULA, CGNAT 100.64.0.0/10),
// unspecified, broadcast, multicast and reserved (198.18.0.0/15,
// 192.0.0.0/24, 240.0.0.0/4) targets, and NAT64 (64:ff9b::/96) or 6to4
// (2002::/16) addresses whose embedded IPv4 address is one of those, unless
// an allow-list of prefixes covers them. Since the check runs on the address actually
// dialed, it also covers redirects and DNS answers that change between
// lookups. The standard library only.
package netscope

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Flag is the mcpv2 node flag that widens the scope; errors name it.
const Flag = "--outbound-allow"

// Bounds of the scoped HTTP client.
const (
	dialTimeout    = 10 * time.Second
	tlsTimeout     = 10 * time.Second
	maxHeaderBytes = 64 << 10
)

var (
	cgnat     = netip.MustParsePrefix("100.64.0.0/10")
	thisNet   = netip.MustParsePrefix("0.0.0.0/8")
	broadcast = netip.MustParseAddr("255.255.255.255")
	benchmark = netip.MustParsePrefix("198.18.0.0/15")  // RFC 2544
	ietfProto = netip.MustParsePrefix("192.0.0.0/24")   // RFC 6890
	reserved4 = netip.MustParsePrefix("240.0.0.0/4")    // RFC 1112 "future use"
	nat64     = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052
	nat64Loc  = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215 local use
	sixToFour = netip.MustParsePrefix("2002::/16")      // RFC 3056
)

// embedded4 is the IPv4 address a NAT64 (64:ff9b::/96) or 6to4
// (2002::/16) address carries, and which of the two it is; ok is false
// for any other address.
func embedded4(a netip.Addr) (v4 netip.Addr, via string, ok bool) {
	b := a.As16()
	switch {
	case !a.Is6():
		return netip.Addr{}, "", false
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), "NAT64", true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), "6to4", true
	}
	return netip.Addr{}, "", false
}

// ErrRefused is wrapped by every *Error, for errors.Is.
var ErrRefused = errors.New("outbound address refused")

// Error is a dial the scope refused: the address and why.
type Error struct {
	Addr  netip.Addr
	Class string // "loopback", "private", "link-local", ...
}

// Error names the address, its class and the flag that allows it.
func (e *Error) Error() string {
	bits := 32
	if e.Addr.Is6() {
		bits = 128
	}
	return fmt.Sprintf("outbound scope: %s is a %s address: refused (allow it with %s %s/%d)", e.Addr, e.Class, Flag, e.Addr, bits)
}

// Unwrap is ErrRefused.
func (e *Error) Unwrap() error { return ErrRefused }

// Scope is an allow-list over the default refusal. The zero value and nil
// refuse every non-public address.
type Scope struct {
	allow []netip.Prefix
}

// New returns a scope that lets the addresses of allow through; every
// other non-public address is refused.
func New(allow []netip.Prefix) *Scope {
	a := make([]netip.Prefix, 0, len(allow))
	for _, p := range allow {
		a = append(a, p.Masked())
	}
	return &Scope{allow: a}
}

// Allowed is the scope's allow-list.
func (s *Scope) Allowed() []netip.Prefix {
	if s == nil {
		return nil
	}
	return append([]netip.Prefix(nil), s.allow...)
}

// Classify names why a is not public ("loopback", "private", ...), or ""
// for a public address. A NAT64 or 6to4 address is classified by the IPv4
// address it carries ("private (NAT64 of 10.1.2.3)"): a DNS64/NAT64
// gateway or a 6to4 relay would reach that address.
func Classify(a netip.Addr) string {
	a = a.Unmap()
	if v4, via, ok := embedded4(a); ok {
		if c := Classify(v4); c != "" {
			return fmt.Sprintf("%s (%s of %s)", c, via, v4)
		}
		return ""
	}
	switch {
	case !a.IsValid():
		return "invalid"
	case a.IsUnspecified() || a.Is4() && thisNet.Contains(a):
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsMulticast() || a.IsInterfaceLocalMulticast():
		return "multicast"
	case a == broadcast:
		return "broadcast"
	case a.IsPrivate():
		return "private"
	case a.Is4() && cgnat.Contains(a):
		return "shared (CGNAT)"
	case a.Is4() && benchmark.Contains(a):
		return "reserved (benchmarking)"
	case a.Is4() && ietfProto.Contains(a):
		return "reserved (IETF protocol assignments)"
	case a.Is4() && reserved4.Contains(a):
		return "reserved"
	case nat64Loc.Contains(a):
		return "private (local-use NAT64)"
	}
	return ""
}

// Check returns nil when a may be dialed: it is public, or the allow-list
// covers it (or, for a NAT64 or 6to4 address, the IPv4 address it
// carries). Else an *Error.
func (s *Scope) Check(a netip.Addr) error {
	a = a.Unmap()
	class := Classify(a)
	if class == "" {
		return nil
	}
	v4, _, embedded := embedded4(a)
	if s != nil {
		for _, p := range s.allow {
			if p.Contains(a) || embedded && p.Contains(v4) {
				return nil
			}
		}
	}
	return &Error{Addr: a, Class: class}
}

// Control is a net.Dialer Control: it checks the resolved address about
// to be dialed.
func (s *Scope) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("outbound scope: %s address %q is not an IP and port: %w", network, address, ErrRefused)
	}
	return s.Check(ap.Addr())
}

// Dialer returns a dialer that checks every address it dials.
func (s *Scope) Dialer() *net.Dialer {
	return &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second, Control: s.Control}
}

// Client returns an HTTP client whose every connection (redirects
// included) keeps to the scope. It uses no proxy: a proxy would dial the
// target for it, out of the check's reach. timeout, when positive, bounds
// each request (Client.Timeout).
func (s *Scope) Client(timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	d := s.Dialer()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	tr.TLSHandshakeTimeout = tlsTimeout
	tr.MaxResponseHeaderBytes = maxHeaderBytes
	return &http.Client{Transport: tr, Timeout: max(timeout, 0)}
}

// ParseAllow reads --outbound-allow values: each a CIDR prefix or a single
// address, several comma-separated in one value. Errors name the bad
// entry.
func ParseAllow(values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range values {
		for _, e := range strings.Split(v, ",") {
			e = strings.TrimSpace(e)
			if e == "" {
				continue
			}
			if p, err := netip.ParsePrefix(e); err == nil {
				out = append(out, p.Masked())
				continue
			}
			a, err := netip.ParseAddr(e)
			if err != nil {
				return nil, fmt.Errorf("%s %q: not a CIDR prefix (10.0.0.0/8, fd00::/8) or an address", Flag, e)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		}
	}
	return out, nil
}
