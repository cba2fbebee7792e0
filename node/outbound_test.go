package node

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

// TestCloseEndsOutboundConnections: the kept-alive connections of the
// node's OutboundClient end with Node.Close (review item 21).
func TestCloseEndsOutboundConnections(t *testing.T) {
	closed := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- struct{}{}
		}
	}
	srv.Start()
	defer srv.Close()
	n := newTestNode(t, func(c *Config) { c.OutboundAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} })
	resp, err := n.OutboundClient().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close() // the connection is now idle, kept alive
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the node's outbound connection outlived Node.Close")
	}
}
