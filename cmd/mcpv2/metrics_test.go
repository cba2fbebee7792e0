package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// TestMetricsServer: the server serves its registry's metrics (the Go
// runtime's and the process's at least) at /metrics, nothing else, and
// closes once; an address off loopback is refused unless public.
func TestMetricsServer(t *testing.T) {
	m, err := newMetricsServer("127.0.0.1:0", false, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(m.URL())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "go_goroutines") || !strings.Contains(string(b), "process_resident_memory_bytes") {
		t.Fatalf("GET %s: %d %.300s", m.URL(), resp.StatusCode, b)
	}
	resp, err = http.Post(m.URL(), "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %d, want 405", resp.StatusCode)
	}
	// DNS rebinding: a Host that is not loopback is refused.
	for host, want := range map[string]int{"evil.example": http.StatusForbidden, "evil.example:80": http.StatusForbidden,
		"192.0.2.1": http.StatusForbidden, "localhost": http.StatusOK, "LOCALHOST.:9464": http.StatusOK, "127.0.0.1": http.StatusOK, "[::1]:1": http.StatusOK} {
		req, err := http.NewRequest(http.MethodGet, m.URL(), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /metrics with Host %q: %d, want %d", host, resp.StatusCode, want)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	testenv.CloseTwice(t, m)
	// --metrics-public serves any Host.
	pub, err := newMetricsServer("127.0.0.1:0", true, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, pub.URL(), nil)
	req.Host = "metrics.example"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("public server, Host metrics.example: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	http.DefaultClient.CloseIdleConnections()
	testenv.CloseTwice(t, pub)

	// What a listener bound decides, whatever name it was given.
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := checkBound("localhost:0", ln.Addr(), false); err == nil || !strings.Contains(err.Error(), "not loopback") {
		t.Errorf("checkBound of %s: %v, want a refusal", ln.Addr(), err)
	}
	if err := checkBound("localhost:0", ln.Addr(), true); err != nil {
		t.Errorf("checkBound of %s, public: %v", ln.Addr(), err)
	}

	for _, c := range []struct {
		addr   string
		public bool
		ok     bool
	}{
		{"127.0.0.1:0", false, true}, {"[::1]:0", false, true}, {"localhost:0", false, true},
		{"0.0.0.0:0", false, false}, {":0", false, false}, {"192.0.2.1:0", false, false}, {"0.0.0.0:0", true, true}, {"nohostport", true, false},
	} {
		if err := checkMetricsAddr(c.addr, c.public); (err == nil) != c.ok {
			t.Errorf("checkMetricsAddr(%q, public %v) = %v, want ok %v", c.addr, c.public, err, c.ok)
		}
	}
}
