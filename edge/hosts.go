package edge

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/mcpv2/mcpv2/protocol"
)

// DNS-rebinding protection, on every endpoint of the edge: a web page on
// attacker.example whose DNS name the attacker rebinds to the edge's
// address sends requests that name attacker.example in Host (and Origin).
// The edge serves a request only when its Host, and its Origin when there
// is one, name an IP literal, localhost, or a name of Config.AllowedHosts.

// hostSet is the set of names a request may name: localhost and names,
// lower-cased, without a trailing dot.
func hostSet(names []string) map[string]bool {
	m := map[string]bool{"localhost": true}
	for _, n := range names {
		if n = normalHost(n); n != "" {
			m[n] = true
		}
	}
	return m
}

// normalHost lower-cases a host name and drops brackets and a trailing dot.
func normalHost(h string) string {
	return strings.ToLower(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
}

// AllowsHost reports whether the edge serves requests that name host (no
// port) in Host or Origin: an IP literal, localhost, or a name of
// Config.AllowedHosts.
func (s *Server) AllowsHost(host string) bool {
	h := normalHost(host)
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	return s.hosts[h]
}

// badHost returns the host that r's Host header, or else its Origin header
// when present, names and that the edge does not serve, with the header's
// name; "" when both pass.
func (s *Server) badHost(r *http.Request) (host, header string) {
	if h := hostOnly(r.Host); !s.AllowsHost(h) {
		return h, "Host"
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host == "" {
			return o, "Origin"
		}
		if h := hostOnly(u.Host); !s.AllowsHost(h) {
			return h, "Origin"
		}
	}
	return "", ""
}

// checkHost answers 403 (-32009, audited) for a request that names a host
// the edge does not serve, and reports whether it did.
func (s *Server) checkHost(w http.ResponseWriter, r *http.Request) (refused bool) {
	bad, what := s.badHost(r)
	if bad == "" && what == "" {
		return false
	}
	s.refuse(w, r, s.newRequest(r), http.StatusForbidden, protocol.Errorf(protocol.CodeNotPermitted,
		"forbidden: the %s header names %q, which this edge does not serve (DNS rebinding protection); use its IP address, localhost, or a name of --allowed-hosts", what, protocol.Clip(bad, 100)))
	return true
}

func hostOnly(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	return normalHost(h)
}
