package protocol

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// AddressKind tells how a peer is reached.
type AddressKind int

const (
	// AddrMesh is a libp2p peer: a multiaddr ending in /p2p/<PeerID>, or a
	// PeerID alone (mcpv2://<PeerID> or bare) to be found through the DHT.
	AddrMesh AddressKind = iota + 1
	// AddrHTTP is an HTTP edge: mcpv2://host:port/mcpv2[?sessionId=…] or
	// http://host:port.
	AddrHTTP
)

// ErrBadAddress is wrapped by every ParseAddress failure.
var ErrBadAddress = errors.New("malformed address")

// maxAddressLen caps what ParseAddress reads.
const maxAddressLen = 2048

// Address is a parsed peer address.
type Address struct {
	Kind AddressKind
	// PeerID is set for mesh addresses.
	PeerID string
	// Multiaddr is the full multiaddr for mesh addresses given as one (empty
	// for a PeerID alone).
	Multiaddr string
	// URL is the HTTP base of an edge (scheme http or https, host:port, path
	// /mcpv2).
	URL string
	// Host and Port name an edge's host and port.
	Host string
	Port int
	// SessionID is the session token carried in the address, if any.
	SessionID string
}

// String renders the address in its canonical form.
func (a Address) String() string {
	switch a.Kind {
	case AddrMesh:
		if a.Multiaddr != "" {
			return a.Multiaddr
		}
		return "mcpv2://" + a.PeerID
	case AddrHTTP:
		// An https edge keeps its scheme: mcpv2:// means plain http.
		scheme := "mcpv2"
		if strings.HasPrefix(a.URL, "https://") {
			scheme = "https"
		}
		s := scheme + "://" + hostPort(a.Host, a.Port) + "/mcpv2"
		if a.SessionID != "" {
			s += "?sessionId=" + url.QueryEscape(a.SessionID)
		}
		return s
	}
	return ""
}

// ParseAddress parses any address form of SPEC §1. PeerIDs are checked for
// their shape (base58btc or base32 multibase characters and length) here;
// the node decodes them fully.
func ParseAddress(s string) (Address, error) {
	s = strings.TrimSpace(s)
	bad := func(format string, args ...any) (Address, error) {
		return Address{}, fmt.Errorf("%w %q: %s", ErrBadAddress, Clip(s, 80), fmt.Sprintf(format, args...))
	}
	if s == "" {
		return bad("empty")
	}
	if len(s) > maxAddressLen {
		return bad("longer than %d bytes", maxAddressLen)
	}
	if strings.ContainsAny(s, "\x00\r\n\t ") {
		return bad("contains whitespace or control characters")
	}
	switch {
	case strings.HasPrefix(s, "/"):
		i := strings.LastIndex(s, "/p2p/")
		if i < 0 {
			return bad("a multiaddr must end in /p2p/<PeerID>")
		}
		id := s[i+len("/p2p/"):]
		if !LooksLikePeerID(id) {
			return bad("%q is not a PeerID", Clip(id, 60))
		}
		return Address{Kind: AddrMesh, PeerID: id, Multiaddr: s}, nil
	case strings.HasPrefix(s, "mcpv2://"), strings.HasPrefix(s, "http://"), strings.HasPrefix(s, "https://"):
		u, err := url.Parse(s)
		if err != nil {
			return bad("%v", err)
		}
		if u.Scheme == "mcpv2" && u.Port() == "" && (u.Path == "" || u.Path == "/") && u.RawQuery == "" && LooksLikePeerID(u.Host) {
			return Address{Kind: AddrMesh, PeerID: u.Host}, nil
		}
		return parseHTTP(u, bad)
	default:
		if LooksLikePeerID(s) {
			return Address{Kind: AddrMesh, PeerID: s}, nil
		}
		return bad("want a multiaddr ending in /p2p/<PeerID>, mcpv2://<PeerID>, a PeerID, or mcpv2://host:port/mcpv2")
	}
}

func parseHTTP(u *url.URL, bad func(string, ...any) (Address, error)) (Address, error) {
	if u.User != nil {
		return bad("user info is not allowed")
	}
	host, portStr := u.Hostname(), u.Port()
	if host == "" {
		return bad("no host")
	}
	if strings.Contains(host, ":") && !strings.HasPrefix(u.Host, "[") {
		return bad("IPv6 host %q must be in brackets, as in mcpv2://[::1]:8000/mcpv2", Clip(host, 60))
	}
	if !validHost(host) {
		return bad("host %q is neither an IP address nor a DNS name", Clip(host, 60))
	}
	if portStr == "" {
		switch u.Scheme {
		case "https":
			portStr = "443"
		case "http":
			portStr = "80"
		default:
			if u.Path == "" || u.Path == "/" {
				return bad("no port, and %q is not a PeerID (want mcpv2://<PeerID> or mcpv2://host:port/mcpv2)", Clip(host, 60))
			}
			return bad("no port (want mcpv2://host:port/mcpv2)")
		}
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return bad("port %q out of range", portStr)
	}
	switch u.Path {
	case "", "/", "/mcpv2", "/mcpv2/":
	default:
		return bad("path %q: an edge address ends in /mcpv2", u.Path)
	}
	scheme := "http"
	if u.Scheme == "https" {
		scheme = "https"
	}
	a := Address{
		Kind:      AddrHTTP,
		Host:      host,
		Port:      port,
		URL:       scheme + "://" + hostPort(host, port) + "/mcpv2",
		SessionID: u.Query().Get("sessionId"),
	}
	return a, nil
}

// validHost reports whether host is an IP address (IPv6 with an optional
// zone) or a DNS name of letters, digits, '-', '_' and '.'. url.Parse alone
// lets through hosts such as ":" (from mcpv2://::10) that cannot be dialled.
func validHost(host string) bool {
	ip, zone, hasZone := strings.Cut(host, "%")
	if a, err := netip.ParseAddr(ip); err == nil {
		return !hasZone || a.Is6() && zone != "" && strings.Trim(zone, hostChars) == ""
	}
	return !hasZone && len(host) <= 253 && strings.Trim(host, hostChars) == ""
}

const hostChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."

// hostPort joins host and port for a URL, escaping the "%" of an IPv6 zone
// (fe80::1%eth0 becomes [fe80::1%25eth0], RFC 6874) so that it parses back.
func hostPort(host string, port int) string {
	return net.JoinHostPort(strings.ReplaceAll(host, "%", "%25"), strconv.Itoa(port))
}

const (
	base58Chars = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
	base32Chars = "abcdefghijklmnopqrstuvwxyz234567"
)

// LooksLikePeerID reports whether s has the shape of a libp2p PeerID: a
// base58btc multihash (Qm…, 12D3Koo…, 16Uiu2…) or a base32 CIDv1 (b…). It
// does not decode the multihash.
func LooksLikePeerID(s string) bool {
	if len(s) < 40 || len(s) > 128 {
		return false
	}
	chars := base58Chars
	if s[0] == 'b' && !strings.ContainsAny(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ01") {
		chars = base32Chars
	}
	for _, c := range s {
		if !strings.ContainsRune(chars, c) {
			return false
		}
	}
	return true
}

// Clip returns s cut to n bytes with "…" when it is longer: a caller's
// input quoted in an error message, bounded.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
