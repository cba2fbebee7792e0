package edge

import (
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/protocol"
)

func TestPublicIPNotLocalFailsFast(t *testing.T) {
	start := time.Now()
	s, err := New(&fakeBackend{}, Config{PublicIP: "203.0.113.10", Port: 0})
	if err == nil {
		s.Close()
		t.Fatal("New succeeded with a --public-ip that is not on this machine")
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("took %v; must fail at once", d)
	}
	for _, want := range []string{"edge: ", "203.0.113.10", "not an address of this machine", "--bind-host 0.0.0.0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestBindHostNotLocal(t *testing.T) {
	_, err := New(&fakeBackend{}, Config{BindHost: "198.51.100.7"})
	if err == nil || !strings.Contains(err.Error(), "198.51.100.7") || !strings.Contains(err.Error(), "0.0.0.0") {
		t.Fatalf("err = %v", err)
	}
	for _, bad := range []Config{{PublicIP: "not-an-ip"}, {BindHost: "nope"}, {PublicIP: "0.0.0.0"}, {Port: 70000}, {Port: -1}} {
		if s, err := New(&fakeBackend{}, bad); err == nil {
			s.Close()
			t.Errorf("New(%+v) succeeded", bad)
		} else if !strings.HasPrefix(err.Error(), "edge: ") {
			t.Errorf("error %q lacks the edge: prefix", err)
		}
	}
}

func TestPublicIPWithBindAll(t *testing.T) {
	s, err := New(&fakeBackend{}, Config{PublicIP: "203.0.113.10", BindHost: "0.0.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Addr().IP.IsUnspecified() {
		t.Errorf("listens on %v, want every interface", s.Addr())
	}
	want := "mcpv2://203.0.113.10:" + strconv.Itoa(s.BoundPort()) + "/mcpv2"
	if s.PeerAddress() != want {
		t.Errorf("PeerAddress = %q, want %q", s.PeerAddress(), want)
	}
	// The same-host demo goes through loopback.
	if a := s.DemoSessionAddress(); !strings.HasPrefix(a, "mcpv2://127.0.0.1:"+strconv.Itoa(s.BoundPort())+"/mcpv2?sessionId=") {
		t.Errorf("DemoSessionAddress = %q", a)
	}
}

func TestDefaultBindIsNeverEveryInterface(t *testing.T) {
	s, err := New(&fakeBackend{}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ip, _ := netip.AddrFromSlice(s.Addr().IP)
	if ip.IsUnspecified() {
		t.Fatalf("default bind is %v", s.Addr())
	}
	local, err := localAddrs()
	if err != nil {
		t.Fatal(err)
	}
	want, ok := pickPublic(local)
	if !ok {
		want = netip.MustParseAddr("127.0.0.1")
	}
	if ip.Unmap() != want {
		t.Errorf("bound to %v, want the detected address %v", ip, want)
	}
	if strings.Contains(s.PeerAddress(), "0.0.0.0") || !strings.Contains(s.PeerAddress(), want.String()) {
		t.Errorf("PeerAddress = %q", s.PeerAddress())
	}
	// The default address is reachable from this machine, and the demo
	// session works from it.
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	c := newClient(t)
	defer c.Close()
	addr, err := protocol.ParseAddress(s.DemoSessionAddress())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallSkill(t.Context(), addr, "ping", nil, protocol.CallOptions{}); err != nil {
		t.Errorf("ping through the demo session address %s: %v", addr, err)
	}
}

func TestPickPublic(t *testing.T) {
	p := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	tests := []struct {
		in   []netip.Addr
		want string
	}{
		{p("127.0.0.1", "::1"), ""},
		{p("127.0.0.1", "fe80::1", "169.254.1.1"), ""},
		{p("127.0.0.1", "10.0.0.5"), "10.0.0.5"},
		{p("10.0.0.5", "198.51.100.20", "2001:db8::1"), "198.51.100.20"},
		{p("100.64.1.1", "10.0.0.5"), "100.64.1.1"}, // both non-public IPv4: the first
		{p("::1", "2001:db8::1", "fd00::1"), "2001:db8::1"},
		{p("fd00::1"), "fd00::1"},
		{p("fd00::1", "192.168.1.2"), "192.168.1.2"},
	}
	for _, tc := range tests {
		got, ok := pickPublic(tc.in)
		if tc.want == "" {
			if ok {
				t.Errorf("pickPublic(%v) = %v, want none", tc.in, got)
			}
			continue
		}
		if !ok || got.String() != tc.want {
			t.Errorf("pickPublic(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestBusyPortIsAnError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	start := time.Now()
	_, err = New(&fakeBackend{}, Config{BindHost: "127.0.0.1", Port: port})
	if err == nil {
		t.Fatal("New succeeded on a busy port")
	}
	if time.Since(start) > 500*time.Millisecond {
		t.Error("slow failure")
	}
	for _, want := range []string{strconv.Itoa(port), "already in use", "--port-fallback"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestPortFallbackAndPortFile(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	if busy > 65000 {
		t.Skip("busy port too close to the end of the range")
	}
	portFile := filepath.Join(t.TempDir(), "edge.port")
	s, err := New(&fakeBackend{}, Config{BindHost: "127.0.0.1", Port: busy, PortFallback: true, PortFile: portFile})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := s.BoundPort()
	if got == busy || got > busy+MaxPortFallback || got != s.Addr().Port {
		t.Fatalf("bound port %d (busy %d)", got, busy)
	}
	b, err := os.ReadFile(portFile)
	if err != nil || string(b) != strconv.Itoa(got)+"\n" {
		t.Errorf("port file = %q, %v; want %d", b, err, got)
	}
	banner := s.Banner()
	if len(banner) != 3 ||
		banner[0] != "MCPV2_BOUND_PORT="+strconv.Itoa(got) ||
		banner[1] != "MCPV2_PEER_ADDRESS=mcpv2://127.0.0.1:"+strconv.Itoa(got)+"/mcpv2" ||
		!strings.HasPrefix(banner[2], "MCPV2_DEMO_SESSION_ADDRESS=mcpv2://127.0.0.1:"+strconv.Itoa(got)+"/mcpv2?sessionId=") {
		t.Errorf("banner = %q", banner)
	}
	// The demo session is valid for 127.0.0.1 with the edge's secret.
	a, err := protocol.ParseAddress(strings.TrimPrefix(banner[2], "MCPV2_DEMO_SESSION_ADDRESS="))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := protocol.VerifyToken(s.secret, a.SessionID, "127.0.0.1", time.Now(), time.Minute); err != nil {
		t.Errorf("demo session: %v", err)
	}
	// The port file leaves no temporary files behind.
	entries, _ := os.ReadDir(filepath.Dir(portFile))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries", len(entries))
	}
}

func TestPortFileUnwritable(t *testing.T) {
	_, err := New(&fakeBackend{}, Config{BindHost: "127.0.0.1", PortFile: filepath.Join(t.TempDir(), "missing", "port")})
	if err == nil || !strings.Contains(err.Error(), "edge: write port file") {
		t.Fatalf("err = %v", err)
	}
}

func TestDemoAddressOnSpecificIP(t *testing.T) {
	local, err := localAddrs()
	if err != nil {
		t.Fatal(err)
	}
	a, ok := pickPublic(local)
	if !ok {
		t.Skip("no non-loopback address on this machine")
	}
	s, err := New(&fakeBackend{}, Config{BindHost: a.String(), Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	demo, err := protocol.ParseAddress(s.DemoSessionAddress())
	if err != nil {
		t.Fatal(err)
	}
	if demo.Host != a.String() {
		t.Errorf("demo host %q, want %q (127.0.0.1 cannot reach this listener)", demo.Host, a)
	}
	c := newClient(t)
	defer c.Close()
	if _, err := c.CallSkill(t.Context(), demo, "ping", nil, protocol.CallOptions{}); err != nil {
		t.Errorf("demo address does not work from this host: %v", err)
	}
}

// lanAddr returns the address the edge binds by default, skipping t when
// the machine has no non-loopback address (the edge then binds loopback
// only, and serves nothing beside it).
func lanAddr(t *testing.T) netip.Addr {
	t.Helper()
	local, err := localAddrs()
	if err != nil {
		t.Fatal(err)
	}
	a, ok := pickPublic(local)
	if !ok {
		testenv.SkipEnv(t, "no non-loopback address on this machine: the edge binds 127.0.0.1 only")
	}
	return a
}

// TestDefaultBindAlsoServesLoopback: bound by default to a detected
// address, the edge also serves 127.0.0.1 on the same port, sessions
// included (a token minted for 127.0.0.1 is good there); both close.
func TestDefaultBindAlsoServesLoopback(t *testing.T) {
	lan := lanAddr(t)
	s, err := New(&fakeBackend{}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(s.BoundPort())
	wantURLs := []string{"http://" + net.JoinHostPort(lan.String(), port) + "/mcpv2", "http://127.0.0.1:" + port + "/mcpv2"}
	if got := s.URLs(); strings.Join(got, " ") != strings.Join(wantURLs, " ") {
		t.Fatalf("URLs = %v, want %v", got, wantURLs)
	}
	if !strings.Contains(s.PeerAddress(), lan.String()) {
		t.Fatalf("PeerAddress = %q, want the detected address %s", s.PeerAddress(), lan)
	}
	resp, err := http.Get("http://127.0.0.1:" + port + "/mcpv2/health")
	if err != nil {
		t.Fatalf("health over loopback: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health over loopback: %s", resp.Status)
	}
	c := newClient(t)
	defer c.Close()
	for _, host := range []string{"127.0.0.1", lan.String()} {
		addr, err := protocol.ParseAddress("mcpv2://" + net.JoinHostPort(host, port) + "/mcpv2")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CallSkill(t.Context(), addr, "ping", nil, protocol.CallOptions{}); err != nil {
			t.Errorf("ping with an anonymous session over %s: %v", host, err)
		}
	}
	c.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", lan.String()} {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
		if err != nil {
			t.Fatalf("port %s on %s still taken after Close: %v", port, host, err)
		}
		ln.Close()
	}

	// An explicit --bind-host or --public-ip: that address only.
	for _, cfg := range []Config{{BindHost: lan.String()}, {PublicIP: lan.String()}} {
		s, err := New(&fakeBackend{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.URLs(); len(got) != 1 {
			t.Errorf("%+v: URLs = %v, want the bound address only", cfg, got)
		}
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(s.BoundPort())); err != nil {
			t.Errorf("%+v: 127.0.0.1 is taken too: %v", cfg, err)
		} else {
			ln.Close()
		}
		s.Close()
	}
}

// TestLoopbackBusyWarns: when the port is taken on 127.0.0.1 only, the edge
// says so and serves the detected address.
func TestLoopbackBusyWarns(t *testing.T) {
	lan := lanAddr(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	port := held.Addr().(*net.TCPAddr).Port
	var logs strings.Builder
	s, err := New(&fakeBackend{}, Config{Port: port, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("New with 127.0.0.1:%d taken: %v", port, err)
	}
	defer s.Close()
	if got := s.URLs(); len(got) != 1 || !strings.Contains(got[0], lan.String()) {
		t.Errorf("URLs = %v, want the detected address only", got)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "127.0.0.1 is not served") {
		t.Errorf("no warning in %q", logs.String())
	}
}

// TestCheck: Check refuses what New refuses, with the same message, and
// leaves nothing bound.
func TestCheck(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	for _, cfg := range []Config{
		{PublicIP: "not-an-ip"}, {BindHost: "nope"}, {PublicIP: "203.0.113.10"}, {Port: 70000},
		{BindHost: "127.0.0.1", Port: busyPort}, {TLSCert: "/nonexistent/cert.pem", TLSKey: "/nonexistent/key.pem"},
	} {
		cerr := Check(cfg)
		s, nerr := New(&fakeBackend{}, cfg)
		if nerr == nil {
			s.Close()
			t.Fatalf("New(%+v) succeeded", cfg)
		}
		if cerr == nil || cerr.Error() != nerr.Error() {
			t.Errorf("Check(%+v) = %v, New says %v", cfg, cerr, nerr)
		}
	}
	free := freeTCPPort(t)
	if err := Check(Config{BindHost: "127.0.0.1", Port: free}); err != nil {
		t.Fatalf("Check of a free port: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(free))
	if err != nil {
		t.Fatalf("Check left port %d bound: %v", free, err)
	}
	ln.Close()
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
