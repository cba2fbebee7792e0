package main

import (
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/keys"
	"github.com/mcpv2/mcpv2/node/localapi"
)

// TestStatus: `mcpv2 status` and `mcpv2 status --json` against a running
// node say what its banner said (PeerID, addresses, edge URL, control
// socket); against a data dir with no node, the message and exit 1.
func TestStatus(t *testing.T) {
	p := startNode(t, "", "--port", "0", "--no-mesh")
	socket := p.First("MCPV2_CONTROL")
	if socket != localapi.SocketPath(p.dataDir) {
		t.Fatalf("MCPV2_CONTROL=%q, want %q", socket, localapi.SocketPath(p.dataDir))
	}
	if fi, err := os.Lstat(socket); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("control socket: %v %v", fi, err)
	}
	port := p.First("MCPV2_BOUND_PORT")

	out, errs, code := run(t, "status", "--json", "--data-dir", p.dataDir)
	if code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, errs)
	}
	var s localapi.StatusResponse
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	var addrs []string
	for _, a := range s.Addrs {
		addrs = append(addrs, a+"/p2p/"+s.PeerID)
	}
	if s.PeerID != p.peerID || !slices.Equal(addrs, p.addrs) || s.Socket != socket || s.DataDir != p.dataDir {
		t.Fatalf("status --json %+v\nbanner: %s %v", s, p.peerID, p.addrs)
	}
	if len(s.EdgeURLs) == 0 || !strings.Contains(s.EdgeURLs[0], ":"+port+"/") {
		t.Fatalf("edge URLs %v, port %s", s.EdgeURLs, port)
	}
	if s.Reachability.Source != "no-mesh" || s.Version == "" {
		t.Fatalf("reachability %+v version %q", s.Reachability, s.Version)
	}

	out, errs, code = run(t, "status", "--data-dir", p.dataDir)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errs)
	}
	for _, want := range append([]string{"PeerID         " + p.peerID, "Reachability   unknown (no-mesh)", "Peers          0 (0 connections: 0 direct, 0 relayed)",
		s.EdgeURLs[0], "Control        " + socket, "Version"}, s.Listen...) {
		if !strings.Contains(out, want) {
			t.Errorf("status does not say %q:\n%s", want, out)
		}
	}

	dir := t.TempDir()
	out, errs, code = run(t, "status", "--data-dir", dir)
	want := "no node running in " + dir + " (start one with mcpv2 node --data-dir " + dir + ")"
	if code != 1 || out != "" || !strings.Contains(errs, want) {
		t.Fatalf("status with no node: exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errs, want)
	}
}

// TestIDLive: `mcpv2 id` asks the running node for its live addresses
// (a random port here), and without one prints the default addresses and
// says so on stderr.
func TestIDLive(t *testing.T) {
	p := startNode(t, "", "--no-mesh")
	out, errs, code := run(t, "id", "--data-dir", p.dataDir)
	if code != 0 {
		t.Fatalf("id: exit %d: %s", code, errs)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if a, ok := strings.CutPrefix(l, "MCPV2_P2P_ADDRESS="); ok {
			got = append(got, a)
		}
	}
	if !strings.HasPrefix(out, "MCPV2_PEER_ID="+p.peerID+"\n") || !slices.Equal(got, p.addrs) || errs != "" {
		t.Fatalf("id with a node running:\n%s\nstderr %q\nbanner %v", out, errs, p.addrs)
	}

	dir := t.TempDir()
	out, errs, code = run(t, "id", "--data-dir", dir, "--p2p-port", "4123")
	if code != 0 || !strings.Contains(out, "/tcp/4123/p2p/") || !strings.Contains(errs, "no node runs in "+dir) || !strings.Contains(errs, "default listen addresses") {
		t.Fatalf("id with no node: exit %d\n%s\nstderr %q", code, out, errs)
	}
}

// TestKeyThroughNode: with a node running, `mcpv2 key add` goes through
// its control socket (the node logs it), and the key works on the edge at
// once; revoked, it is refused at once. Output is as without a node.
func TestKeyThroughNode(t *testing.T) {
	p := startNode(t, "", "--port", "0", "--no-mesh", "--require-auth")
	edge := "http://127.0.0.1:" + p.First("MCPV2_BOUND_PORT") + "/mcp"
	mcpInit := func(key string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, edge, strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := mcpInit(""); st != http.StatusUnauthorized {
		t.Fatalf("no key: %d, want 401", st)
	}
	out, errs := keyRun(t, "add", "ci", "--grant", "echo", "--data-dir", p.dataDir)
	secret := strings.TrimSpace(out)
	if !keys.LooksLikeKey(secret) || !strings.Contains(errs, `added the API key "ci" to `+p.dataDir+"/keys.json") {
		t.Fatalf("add: %q\n%s", out, errs)
	}
	if !strings.Contains(p.Log.String(), "local API: added an API key") {
		t.Fatalf("the node did not add the key:\n%s", p.Log.String())
	}
	if st := mcpInit(secret); st != http.StatusOK {
		t.Fatalf("with the new key: %d, want 200", st)
	}
	out, _ = keyRun(t, "list", "--data-dir", p.dataDir)
	if !strings.Contains(out, "ci ") || !strings.HasSuffix(out, "1 active\n") {
		t.Fatalf("list:\n%s", out)
	}
	if errs := keyFails(t, "add", "ci", "--data-dir", p.dataDir); !strings.Contains(errs, `"ci" is the name of an active key`) {
		t.Fatalf("add twice: %s", errs)
	}
	out, _ = keyRun(t, "revoke", "ci", "--data-dir", p.dataDir)
	if !strings.Contains(out, `revoked the API key "ci" in `+p.dataDir+"/keys.json") {
		t.Fatalf("revoke: %q", out)
	}
	if !strings.Contains(p.Log.String(), "local API: revoked an API key") {
		t.Fatalf("the node did not revoke the key:\n%s", p.Log.String())
	}
	if st := mcpInit(secret); st != http.StatusUnauthorized {
		t.Fatalf("with the revoked key: %d, want 401", st)
	}
	if errs := keyFails(t, "revoke", "nobody", "--data-dir", p.dataDir); !strings.Contains(errs, `no such key named "nobody"`) {
		t.Fatalf("revoke of no key: %s", errs)
	}
}

// TestControlSocketLifecycle: a node stopped by a signal removes its
// control socket; one killed leaves it, and the next node of the data dir
// replaces it and answers.
func TestControlSocketLifecycle(t *testing.T) {
	dir := t.TempDir()
	p := startNode(t, dir, "--no-mesh")
	p.Stop()
	if _, err := os.Lstat(localapi.SocketPath(dir)); !os.IsNotExist(err) {
		t.Fatalf("after a stop the socket is there: %v", err)
	}
	p = startNode(t, dir, "--no-mesh")
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.Exited
	if _, err := os.Lstat(localapi.SocketPath(dir)); err != nil {
		t.Fatalf("a killed node's socket: %v", err)
	}
	if _, errs, code := run(t, "status", "--data-dir", dir); code != 1 || !strings.Contains(errs, "no node running in "+dir) {
		t.Fatalf("status with a stale socket: exit %d, %s", code, errs)
	}
	p = startNode(t, dir, "--no-mesh")
	out, errs, code := run(t, "status", "--json", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, p.peerID) {
		t.Fatalf("status after the restart: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestPrintStatusEscapes: text in the status that a peer could have put
// there (an observed address, a relay's name) reaches the terminal with
// its control characters escaped.
func TestPrintStatusEscapes(t *testing.T) {
	var s localapi.StatusResponse
	s.PeerID = "12D3KooW"
	s.Observed = []string{"/dns4/\x1b]0;pwned\x07/tcp/1"}
	s.Relays = []node.Reservation{{Relay: "relay\u202eevil"}}
	s.Reachability.Why = "line\nbreak"
	var b strings.Builder
	if err := printStatus(&b, &s); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, bad := range []string{"\x1b", "\x07", "\u202e", "line\nbreak"} {
		if strings.Contains(out, bad) {
			t.Errorf("status prints %q raw:\n%s", bad, out)
		}
	}
	for _, want := range []string{`\x1b]0;pwned\a`, `relay\u202eevil`, `line\nbreak`} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not show %q escaped:\n%s", want, out)
		}
	}
}
