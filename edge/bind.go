package edge

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// bindPlan is where the edge listens and what it advertises.
type bindPlan struct {
	bind      netip.Addr // may be unspecified (every interface)
	advertise string     // host part of PeerAddress
	// loopback: bind is a detected address (neither --bind-host nor
	// --public-ip), so the edge also serves 127.0.0.1 on the same port, for
	// the tools of this machine.
	loopback bool
}

// planBind decides the bind and advertised addresses of SPEC §5 and checks
// that the bind address belongs to this machine, so that a wrong
// --public-ip fails at once with a message that says what to do.
func planBind(cfg Config, log *slog.Logger) (bindPlan, error) {
	var public netip.Addr
	if cfg.PublicIP != "" {
		a, err := parseIP(cfg.PublicIP)
		if err != nil {
			return bindPlan{}, fmt.Errorf("edge: --public-ip %q is not an IP address", cfg.PublicIP)
		}
		if a.IsUnspecified() {
			return bindPlan{}, fmt.Errorf("edge: --public-ip %s cannot be advertised; to listen on every interface use --bind-host %s and give the machine's reachable address as --public-ip", a, a)
		}
		public = a
	}
	local, err := localAddrs()
	if err != nil {
		return bindPlan{}, fmt.Errorf("edge: list the addresses of this machine: %w", err)
	}

	var p bindPlan
	switch {
	case cfg.BindHost != "":
		a, err := parseIP(cfg.BindHost)
		if err != nil {
			return bindPlan{}, fmt.Errorf("edge: --bind-host %q is not an IP address (use 0.0.0.0 for every interface)", cfg.BindHost)
		}
		if !isLocal(a, local) {
			return bindPlan{}, fmt.Errorf("edge: --bind-host %s is not an address of this machine (its addresses: %s); use one of them, or 0.0.0.0 to listen on every interface", a, listAddrs(local))
		}
		p.bind = a
	case public.IsValid():
		if !isLocal(public, local) {
			return bindPlan{}, fmt.Errorf("edge: --public-ip %s is not an address of this machine; to listen on every interface and advertise %s, add --bind-host 0.0.0.0", public, public)
		}
		p.bind = public
	default:
		a, ok := pickPublic(local)
		if !ok {
			a = netip.MustParseAddr("127.0.0.1")
			log.Warn("no non-loopback address found on this machine: the HTTP edge listens on 127.0.0.1 only (set --public-ip or --bind-host)")
		} else {
			log.Debug("HTTP edge binds to the detected address of this machine, and to 127.0.0.1", "addr", a.String())
		}
		p.bind, p.loopback = a, ok
	}

	switch {
	case public.IsValid():
		p.advertise = public.String()
	case !p.bind.IsUnspecified():
		p.advertise = p.bind.String()
	default:
		// Every interface, and nothing to advertise: name a reachable one.
		a, ok := pickPublic(local)
		if !ok {
			a = netip.MustParseAddr("127.0.0.1")
		}
		p.advertise = a.String()
	}
	return p, nil
}

// parseIP parses an IP address without a zone, unmapping IPv4-in-IPv6.
func parseIP(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil {
		return netip.Addr{}, err
	}
	if a.Zone() != "" {
		return netip.Addr{}, errors.New("zones are not supported")
	}
	return a.Unmap(), nil
}

// localAddrs returns the IP addresses of this machine's interfaces.
func localAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		var ip net.IP
		switch v := a.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if na, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, na.Unmap())
		}
	}
	return out, nil
}

// isLocal reports whether a can be bound on this machine: unspecified,
// loopback (all of 127/8 on Linux), or an interface address.
func isLocal(a netip.Addr, local []netip.Addr) bool {
	if a.IsUnspecified() || a.IsLoopback() {
		return true
	}
	for _, l := range local {
		if l.WithZone("") == a {
			return true
		}
	}
	return false
}

// pickPublic chooses the address to bind by default: a public IPv4, then a
// private IPv4, then a global IPv6 (non-private first). Loopback and
// link-local addresses are never chosen.
func pickPublic(local []netip.Addr) (netip.Addr, bool) {
	rank := func(a netip.Addr) int {
		switch {
		case !a.IsGlobalUnicast() || a.IsLinkLocalUnicast():
			return 0
		case a.Is4() && !a.IsPrivate() && !isShared(a):
			return 5
		case a.Is4():
			return 4
		case !a.IsPrivate():
			return 3
		default:
			return 2
		}
	}
	var best netip.Addr
	bestRank := 0
	for _, a := range local {
		if r := rank(a); r > bestRank {
			best, bestRank = a, r
		}
	}
	return best, bestRank > 0
}

// isShared reports whether a is in 100.64.0.0/10 (carrier-grade NAT), which
// is not reachable from the internet either.
func isShared(a netip.Addr) bool {
	return netip.MustParsePrefix("100.64.0.0/10").Contains(a)
}

func listAddrs(as []netip.Addr) string {
	var s []string
	for _, a := range as {
		if !a.IsLinkLocalUnicast() {
			s = append(s, a.String())
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// listen binds ip:port. A busy port is an error naming it, unless fallback
// is set: then the next ports are tried, at most MaxPortFallback of them.
func listen(ip netip.Addr, port int, fallback bool, log *slog.Logger) (net.Listener, error) {
	tries := 1
	if fallback && port != 0 {
		tries = MaxPortFallback + 1
	}
	var firstErr error
	for i := 0; i < tries && port+i <= 65535; i++ {
		addr := net.JoinHostPort(ip.String(), strconv.Itoa(port+i))
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			if i > 0 {
				log.Warn("port busy: the HTTP edge moved to the next free port", "wanted", port, "bound", port+i)
			}
			return ln, nil
		}
		switch {
		case errors.Is(err, syscall.EADDRINUSE):
			if firstErr == nil {
				if fallback && port != 0 {
					firstErr = fmt.Errorf("edge: port %d is busy, and so are the next %d ports", port, tries-1)
				} else {
					firstErr = fmt.Errorf("edge: port %d on %s is already in use; stop what holds it, choose another --port, or add --port-fallback", port, ip)
				}
			}
			continue
		case errors.Is(err, syscall.EADDRNOTAVAIL):
			return nil, fmt.Errorf("edge: listen on %s: the address is not available on this machine; to listen on every interface, add --bind-host 0.0.0.0", addr)
		case errors.Is(err, syscall.EACCES):
			return nil, fmt.Errorf("edge: listen on %s: permission denied (ports below 1024 need privileges): %w", addr, err)
		default:
			return nil, fmt.Errorf("edge: listen on %s: %w", addr, err)
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("edge: no port from %d up is free", port)
	}
	return nil, firstErr
}

// writePortFile writes port to path atomically: a temporary file in the same
// directory, synced, then renamed over path.
func writePortFile(path string, port int) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("edge: write port file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.WriteString(strconv.Itoa(port) + "\n"); err != nil {
		return fmt.Errorf("edge: write port file: %w", err)
	}
	if err = f.Chmod(0o644); err != nil {
		return fmt.Errorf("edge: write port file: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("edge: write port file: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("edge: write port file: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("edge: write port file: %w", err)
	}
	return nil
}
