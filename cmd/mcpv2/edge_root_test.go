package main

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestEdgeRootListsFaces: GET / of the edge, the first thing a newcomer
// tries, lists the MCP and A2A faces beside the edge's own endpoints
// (issue 26, item 8: it listed /mcpv2… but not /mcp or /a2a).
func TestEdgeRootListsFaces(t *testing.T) {
	port := edgeFreePort(t, "127.0.0.1")
	startEdgeProc(t, "A", nil, "--data-dir", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mesh", "--no-mdns", "--no-nat",
		"--port", strconv.Itoa(port), "--public-ip", "127.0.0.1")
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	want := `this edge serves /mcpv2, /mcpv2/session, /mcpv2/health, /mcpv2/agent-card, /mcpv2/ai/{provider}, /mcpv2/peers/{PeerID}, /mcpv2/find, /mcp (MCP) and /a2a (A2A)`
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, want) {
		t.Errorf("GET /: %d %s\nwant 404 with %q", resp.StatusCode, body, want)
	}
	if strings.Contains(body, "/mcpv2/peers/{PeerID} and /mcpv2/find") {
		t.Errorf("GET /: the old list without the faces: %s", body)
	}
}
