package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/protocol"
)

// Issue 9, part B: fail loudly, quiet by default, errors that say what to
// do, the edge on a laptop. Every test runs real `mcpv2` processes.

// freeP2PPort returns a port that was free a moment ago for TCP and UDP on
// every IPv4 interface (and on IPv6 where the machine has it), as the
// default listen addresses of --p2p-port need.
func freeP2PPort(t *testing.T) int {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		free := true
		for _, nw := range []string{"udp4", "udp6"} {
			pc, err := net.ListenPacket(nw, net.JoinHostPort(map[string]string{"udp4": "0.0.0.0", "udp6": "::"}[nw], strconv.Itoa(port)))
			if err == nil {
				pc.Close()
			} else if nw == "udp4" {
				free = false
			}
		}
		if l6, err := net.Listen("tcp6", net.JoinHostPort("::", strconv.Itoa(port))); err == nil {
			l6.Close()
		}
		ln.Close()
		if free {
			return port
		}
	}
	t.Fatal("no port free for both TCP and UDP")
	return 0
}

// TestSecondNodeOnSameP2PPort: a second node on the --p2p-port of a running
// one exits non-zero at once, saying which port and what to do; the first
// keeps serving over TCP and QUIC (before, the second shared the TCP port
// through SO_REUSEPORT and calls failed with "peer id mismatch"). A port
// held for UDP only is refused the same way.
func TestSecondNodeOnSameP2PPort(t *testing.T) {
	port := freeP2PPort(t)
	first := startEdgeProc(t, "first", nil, "--data-dir", t.TempDir(), "--p2p-port", strconv.Itoa(port), "--no-mdns", "--no-nat", "--no-mesh")
	start := time.Now()
	out, errs, code := run(t, "node", "--data-dir", t.TempDir(), "--p2p-port", strconv.Itoa(port), "--no-mdns", "--no-nat", "--no-mesh")
	took := time.Since(start)
	want := fmt.Sprintf("mcpv2: port %d is in use (TCP, UDP) by another process: pick another with --p2p-port N, or --p2p-port 0 for any free port", port)
	if code == 0 || !strings.Contains(errs, want) || strings.Contains(out, "MCPV2_PEER_ID") {
		t.Fatalf("second node on port %d: exit %d after %v\nstdout %q\nstderr %s\nwant %q", port, code, took, out, errs, want)
	}
	if took > 5*time.Second {
		t.Fatalf("the second node took %v to fail", took)
	}
	client := t.TempDir()
	id := first.first("MCPV2_PEER_ID")
	for i := range 3 {
		for _, addr := range []string{
			fmt.Sprintf("/ip4/127.0.0.1/tcp/%d/p2p/%s", port, id),
			fmt.Sprintf("/ip4/127.0.0.1/udp/%d/quic-v1/p2p/%s", port, id),
		} {
			if out, errs, code := run(t, "call", addr, "ping", "--data-dir", client); code != 0 || !strings.Contains(out, id) {
				t.Fatalf("call %d to the first node at %s: exit %d, %q %q", i, addr, code, out, errs)
			}
		}
	}

	udpOnly := freeP2PPort(t)
	pc, err := net.ListenPacket("udp4", net.JoinHostPort("0.0.0.0", strconv.Itoa(udpOnly)))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	out, errs, code = run(t, "node", "--data-dir", t.TempDir(), "--p2p-port", strconv.Itoa(udpOnly), "--no-mdns", "--no-nat", "--no-mesh")
	want = fmt.Sprintf("port %d is in use (UDP) by another process: pick another with --p2p-port N", udpOnly)
	if code == 0 || !strings.Contains(errs, want) || strings.Contains(out, "MCPV2_PEER_ID") {
		t.Fatalf("node on UDP-busy port %d: exit %d\nstdout %q\nstderr %s\nwant %q", udpOnly, code, out, errs, want)
	}
	// With --listen the advice names --listen.
	_, errs, code = run(t, "node", "--data-dir", t.TempDir(), "--listen", fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port), "--no-mesh")
	if code == 0 || !strings.Contains(errs, fmt.Sprintf("port %d on 127.0.0.1 is in use (TCP) by another process: pick other ports in --listen", port)) {
		t.Fatalf("--listen on a busy port: exit %d, stderr %s", code, errs)
	}
}

// TestNodeFlagsRefusedBeforeStart: a bad flag stops `mcpv2 node` before the
// host starts, with a message that names the flag and what to give.
func TestNodeFlagsRefusedBeforeStart(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)
	free := strconv.Itoa(testenv.FreePort(t))
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--public-ip", "not-an-ip", "--port", free}, []string{`--public-ip "not-an-ip" is not an IP address`}},
		{[]string{"--bind-host", "198.51.100.7", "--port", free}, []string{"--bind-host 198.51.100.7 is not an address of this machine", "0.0.0.0"}},
		{[]string{"--public-ip", "127.0.0.1", "--port", busyPort}, []string{"port " + busyPort, "already in use", "--port-fallback"}},
		{[]string{"--tls-cert", missing, "--tls-key", missing, "--port", free}, []string{"--tls-cert", "missing.pem"}},
		{[]string{"--port", "70000"}, []string{"--port 70000 is not a TCP port", "0 for any free port"}},
		{[]string{"--public-ip", "127.0.0.1"}, []string{"--public-ip configures the HTTP edge", "add --port"}},
		{[]string{"--port-file", filepath.Join(t.TempDir(), "p")}, []string{"--port-file configures the HTTP edge"}},
		{[]string{"--listen", "/nope/1"}, []string{`--listen "/nope/1" is not a multiaddr`, "/ip4/0.0.0.0/tcp/4001"}},
		{[]string{"--p2p-port", "70000"}, []string{"--p2p-port 70000 is not a port"}},
		{[]string{"--bootstrap", "http://127.0.0.1:8000"}, []string{`bootstrap address "http://127.0.0.1:8000" is a URL`, "/ip4/1.2.3.4/tcp/4001/p2p/12D3KooW"}},
		{[]string{"--bootstrap", "/ip4/127.0.0.1/tcp/4001"}, []string{"has no /p2p/<PeerID>", "/ip4/1.2.3.4/tcp/4001/p2p/12D3KooW"}},
		{[]string{"--dht-mode", "sever"}, []string{`DHT mode "sever": want auto, server or client`}},
		{[]string{"--reachability", "maybe"}, []string{`reachability "maybe": want auto, public or private`}},
		{[]string{"--max-file", "-1"}, []string{"--max-file -1 is negative"}},
		{[]string{"--rate-limit", "-5"}, []string{"--rate-limit -5 is negative"}},
		{[]string{"--partial-ttl", "-1h"}, []string{"--partial-ttl -1h0m0s is negative"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append([]string{"node", "--data-dir", t.TempDir(), "--p2p-port", "0", "--no-mdns", "--no-nat"}, tc.args...)
			start := time.Now()
			out, errs, code := run(t, args...)
			took := time.Since(start)
			if code == 0 || strings.Contains(out, "MCPV2_PEER_ID") || strings.Contains(errs, "node started") {
				t.Fatalf("exit %d after %v\nstdout %q\nstderr %s", code, took, out, errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q lacks %q", errs, w)
				}
			}
			if took > 5*time.Second {
				t.Errorf("took %v to refuse", took)
			}
		})
	}
}

// TestEdgePortZero: --port 0 serves the edge on a free port and says which
// (banner, --port-file); without --port there is no edge.
func TestEdgePortZero(t *testing.T) {
	portFile := filepath.Join(t.TempDir(), "edge.port")
	p := startEdgeProc(t, "zero", nil, "--data-dir", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mesh",
		"--port", "0", "--public-ip", "127.0.0.1", "--port-file", portFile)
	bound, err := strconv.Atoi(p.first("MCPV2_BOUND_PORT"))
	if err != nil || bound == 0 {
		t.Fatalf("MCPV2_BOUND_PORT %q", p.first("MCPV2_BOUND_PORT"))
	}
	if want := fmt.Sprintf("mcpv2://127.0.0.1:%d/mcpv2", bound); p.first("MCPV2_PEER_ADDRESS") != want {
		t.Fatalf("MCPV2_PEER_ADDRESS %q, want %q", p.first("MCPV2_PEER_ADDRESS"), want)
	}
	if got, err := os.ReadFile(portFile); err != nil || string(got) != strconv.Itoa(bound)+"\n" {
		t.Fatalf("--port-file: %q %v, want %d", got, err, bound)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/mcpv2/health", bound))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %s", resp.Status)
	}
	off := startEdgeProc(t, "off", nil, "--data-dir", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mesh")
	if v, ok := off.Banner["MCPV2_BOUND_PORT"]; ok {
		t.Fatalf("an edge without --port: MCPV2_BOUND_PORT=%v", v)
	}
}

// lanIP returns a non-loopback, non-link-local address of this machine,
// where the edge binds by default; it skips t when there is none.
func lanIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	testenv.SkipEnv(t, "no non-loopback IPv4 address on this machine: the edge binds 127.0.0.1 only")
	return ""
}

// TestEdgeOnALaptop: bound by default to the machine's LAN address, the
// edge also answers on 127.0.0.1 (the README's curl), sessions included; the
// ready line names both URLs and what is open to whom; -32009 says how to
// grant, for an anonymous HTTP caller and for a mesh peer.
func TestEdgeOnALaptop(t *testing.T) {
	lan := lanIP(t)
	port := edgeFreePort(t, "0.0.0.0")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "policy.json"), `{"grants":{"http":["list_files"],"12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN":["ask"]}}`)
	p := startEdgeProc(t, "laptop", nil, "--data-dir", dir, "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mesh", "--port", strconv.Itoa(port))
	// The banner stays as it was: the detected address, not loopback.
	adv, err := protocol.ParseAddress(p.first("MCPV2_PEER_ADDRESS"))
	if err != nil || adv.Port != port || adv.Host == "127.0.0.1" || net.ParseIP(adv.Host).IsLoopback() {
		t.Fatalf("MCPV2_PEER_ADDRESS %q (%v): want the detected address (e.g. %s), port %d", p.first("MCPV2_PEER_ADDRESS"), err, lan, port)
	}
	lan = adv.Host
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	c := &http.Client{Timeout: 10 * time.Second}
	get := func(path string, out any) {
		t.Helper()
		resp, err := c.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	var health struct {
		PeerID string `json:"peer_id"`
	}
	get("/mcpv2/health", &health)
	if health.PeerID != p.first("MCPV2_PEER_ID") {
		t.Fatalf("health over loopback answers as %q", health.PeerID)
	}
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	get("/mcpv2/session", &sess)
	if sub := edgeToken(t, sess.SessionID).Subject; sub != "127.0.0.1" {
		t.Fatalf("a session fetched over loopback is for %q", sub)
	}
	call := func(skill string) string {
		t.Helper()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, skill)
		req, _ := http.NewRequest(http.MethodPost, base+"/mcpv2", strings.NewReader(body))
		req.Header.Set("X-MCPV2-Session", sess.SessionID)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = fmt.Fprint(&b, resp.Status, " ")
		buf := make([]byte, 64<<10)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return b.String()
	}
	if got := call("ping"); !strings.Contains(got, `"pong":true`) {
		t.Fatalf("ping over loopback: %s", got)
	}
	if got := call("list_files"); !strings.Contains(got, `"files"`) {
		t.Fatalf("list_files (granted to http) over loopback: %s", got)
	}
	got := call("ask")
	for _, w := range []string{"-32009", "--secret", `{\"grants\": {\"http\": [\"ask\"]}}`, "policy.json"} {
		if !strings.Contains(got, w) {
			t.Errorf("anonymous ask: %s lacks %q", got, w)
		}
	}
	// The CLI over loopback too.
	if out, errs, code := run(t, "call", fmt.Sprintf("mcpv2://127.0.0.1:%d/mcpv2", port), "ping"); code != 0 || !strings.Contains(out, `"pong":true`) {
		t.Fatalf("mcpv2 call over loopback: %d %q %q", code, out, errs)
	}
	// A mesh peer without a grant: the exact policy line with its PeerID.
	client := t.TempDir()
	clientID := peerIDOf(t, client)
	_, errs, code := run(t, "call", p.tcpAddr(t), "ask", `{"query":"hi"}`, "--data-dir", client)
	for _, w := range []string{"-32009", "same --secret", "mcpv2 id", fmt.Sprintf(`{"grants": {%q: ["ask"]}}`, clientID)} {
		if code == 0 || !strings.Contains(errs, w) {
			t.Errorf("ungranted mesh ask: exit %d, stderr %q lacks %q", code, errs, w)
		}
	}
	// The ready line: PeerID, both edge URLs, what is open to whom.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(p.stderr(), "msg=ready") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	var ready string
	for _, l := range strings.Split(p.stderr(), "\n") {
		if strings.Contains(l, "msg=ready") {
			ready = l
		}
	}
	for _, w := range []string{
		"level=INFO", "peer_id=" + p.first("MCPV2_PEER_ID"), "/ip4/127.0.0.1/tcp/",
		fmt.Sprintf("edge=\"[http://%s:%d/mcpv2 http://127.0.0.1:%d/mcpv2]\"", lan, port, port),
		"open to everyone: ping, tools/list, agent/card", "anonymous HTTP callers also: list_files", "PeerIDs granted skills: 1,",
	} {
		if !strings.Contains(ready, w) {
			t.Errorf("ready line %q lacks %q", ready, w)
		}
	}
	// Close frees both listeners.
	_ = p.Cmd.Process.Kill()
	<-p.Exited
	for _, host := range []string{"127.0.0.1", lan} {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d on %s still taken after the node ended: %v", port, host, err)
		}
		ln.Close()
	}
}

// TestShellConnectToSaysSecretsDiffer: ConnectTo a mesh peer that refuses
// the shell's --secret says that the secrets differ; a shell without
// --secret calls a peer without one as a plain peer.
func TestShellConnectToSaysSecretsDiffer(t *testing.T) {
	withSecret := startNode(t, "", "--secret", "the-peers-secret", "--no-mesh")
	plain := startNode(t, "", "--no-mesh")
	sp := startShell(t, shellEnv(), "--data-dir", t.TempDir(), "--secret", "another-secret")
	sp.expect("ConnectTo "+withSecret.tcpAddr(t), "error -32001", "The secrets differ", "mcpv2 shell --secret S")
	sp.expect("ConnectTo "+plain.tcpAddr(t), "The secrets differ")
	sp.finish("exit")

	sp = startShell(t, shellEnv(), "--data-dir", t.TempDir())
	sp.expect("ConnectTo "+plain.tcpAddr(t), "Connected over the mesh to "+plain.peerID)
	sp.finish("exit")
}

// TestLibraryLogNoiseIsDebug: the mDNS library's std-log lines ("[zeroconf]
// no suitable IPv4 interface", in a network namespace with loopback only)
// are absent at the default log level and come through the structured
// logger at debug.
func TestLibraryLogNoiseIsDebug(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.SkipEnv(t, "a network namespace with loopback only needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		testenv.SkipEnv(t, "no unshare(1): %v", err)
	}
	if out, err := exec.Command(unshare, "-n", "true").CombinedOutput(); err != nil {
		testenv.SkipEnv(t, "unshare -n refused here: %v %s", err, out)
	}
	prefix := []string{unshare, "-n", "sh", "-c", `ip link set lo up && exec "$0" "$@"`}
	for _, level := range []string{"info", "debug"} {
		p := startEdgeProc(t, "netns-"+level, prefix, "--data-dir", t.TempDir(), "--p2p-port", "0", "--log-level", level)
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(p.stderr(), "msg=ready") && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond)
		_ = p.Cmd.Process.Kill()
		<-p.Exited
		logs := p.stderr()
		if !strings.Contains(logs, "msg=ready") {
			t.Fatalf("--log-level %s: no ready line:\n%s", level, logs)
		}
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, "zeroconf") && !strings.HasPrefix(l, "time=") {
				t.Errorf("--log-level %s: a raw library line: %q", level, l)
			}
		}
		routed := strings.Contains(logs, `level=DEBUG msg="[zeroconf] no suitable`)
		if level == "info" && strings.Contains(logs, "zeroconf") {
			t.Errorf("--log-level info shows library noise:\n%s", logs)
		}
		if level == "debug" && !routed {
			t.Errorf("--log-level debug: the [zeroconf] lines did not come through the logger:\n%s", logs)
		}
	}
}

// TestWaitDirectAlreadyDirect: a client whose connection is direct from the
// start (a loopback mesh: no NAT between it and its bootstrap peer) does
// not wait --wait-direct at all and prints nothing about the path; before,
// `--wait-direct 20s` waited its whole time for a public address that a
// client on the same network never gets.
func TestWaitDirectAlreadyDirect(t *testing.T) {
	n := startNode(t, "", "--no-mdns")
	var addr string
	for _, a := range n.addrs {
		if strings.Contains(a, "/tcp/") {
			addr = a
		}
	}
	for _, args := range [][]string{
		{"call", n.peerID, "ping", "--bootstrap", addr, "--wait-direct", "20s"},
		{"call", addr, "ping", "--wait-direct", "20s"},
	} {
		start := time.Now()
		out, errs, code := run(t, append(args, "--data-dir", t.TempDir())...)
		took := time.Since(start)
		if code != 0 || !strings.Contains(out, `"pong":true`) {
			t.Fatalf("%v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errs)
		}
		// A process start is about a second under -race; the wait it must
		// not do is 20 s.
		if took > 10*time.Second {
			t.Errorf("%v took %v: a direct connection must not wait --wait-direct", args, took)
		}
		if strings.Contains(errs, "direct connection") || strings.Contains(errs, "through the relay") {
			t.Errorf("%v: a connection direct from the start needs no word about its path; stderr:\n%s", args, errs)
		}
	}
}
