package main

import (
	"io"
	"log/slog"
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
	http.DefaultClient.CloseIdleConnections()
	testenv.CloseTwice(t, m)

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
