//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// The edge suite between two network namespaces (issue acceptance 2): A in
// one, B in the other, joined by a veth pair and nothing else. The test
// itself stays in the root namespace; its HTTP connections are made from
// inside A's namespace (a dialer that enters it on a locked OS thread), so
// that A is local to the client and B is across the veth, as for two hosts.

// Addresses of the namespaces: a private /24 that exists only inside them.
const (
	netnsA    = "10.231.0.1" // A's veth
	netnsB    = "10.231.0.2" // B's veth
	netnsAlt  = "10.231.0.3" // a second address on A's veth: "another caller"
	netnsMask = "/24"
)

// TestNetnsEdgeE2E runs runEdgeScenarios with A and B in two network
// namespaces joined by a veth pair. It needs root (CAP_SYS_ADMIN and
// CAP_NET_ADMIN) and iproute2's ip; it skips, saying why, only when it is not
// root or the kernel refuses to create a namespace.
func TestNetnsEdgeE2E(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		testenv.SkipEnv(t, "skipped: creating network namespaces needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN); run as root, as CI does")
	}
	ipBin, err := exec.LookPath("ip")
	if err != nil {
		t.Fatalf("running as root but iproute2's ip is not installed (CI installs it in .ci/run): %v", err)
	}
	testenv.RemoveStaleNetns(t, ipBin, regexp.MustCompile(`^mcpv2e2e-[ab]-(\d+)$`))

	pid := os.Getpid()
	nsA, nsB := fmt.Sprintf("mcpv2e2e-a-%d", pid), fmt.Sprintf("mcpv2e2e-b-%d", pid)
	vethA, vethB := fmt.Sprintf("m2a%d", pid), fmt.Sprintf("m2b%d", pid) // at most 15 bytes
	ipc := func(args ...string) error {
		out, err := exec.Command(ipBin, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	mustIP := func(args ...string) {
		t.Helper()
		if err := ipc(args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := ipc("netns", "add", nsA); err != nil {
		if testenv.IsPermissionError(err) {
			testenv.SkipEnv(t, "skipped: the kernel refuses to create a network namespace here (no CAP_SYS_ADMIN in this container?): %v", err)
		}
		t.Fatal(err)
	}
	// Cleanup runs last-registered first: the processes (registered by
	// startEdgeProc later) are killed before the namespaces go. Deleting a
	// namespace removes its end of the veth pair, and the pair with it.
	t.Cleanup(func() {
		for _, ns := range []string{nsA, nsB} {
			if err := ipc("netns", "del", ns); err != nil && !strings.Contains(err.Error(), "No such file") {
				t.Errorf("cleanup: %v", err)
			}
		}
		if out, _ := exec.Command(ipBin, "netns", "list").Output(); bytes.Contains(out, []byte(nsA)) || bytes.Contains(out, []byte(nsB)) {
			t.Errorf("cleanup: namespaces left behind: %s", out)
		}
	})
	mustIP("netns", "add", nsB)
	mustIP("link", "add", vethA, "netns", nsA, "type", "veth", "peer", "name", vethB, "netns", nsB)
	mustIP("-n", nsA, "addr", "add", netnsA+netnsMask, "dev", vethA)
	mustIP("-n", nsA, "addr", "add", netnsAlt+netnsMask, "dev", vethA)
	mustIP("-n", nsB, "addr", "add", netnsB+netnsMask, "dev", vethB)
	for _, l := range [][2]string{{nsA, "lo"}, {nsA, vethA}, {nsB, "lo"}, {nsB, vethB}} {
		mustIP("-n", l[0], "link", "set", l[1], "up")
	}
	pathA, pathB := filepath.Join("/run/netns", nsA), filepath.Join("/run/netns", nsB)
	waitNetnsReady(t, pathA, netnsA, netnsB)

	skills, err := filepath.Abs(filepath.Join("testdata", "edge", "skills.json"))
	if err != nil {
		t.Fatal(err)
	}
	const port = 8080 // each namespace has its own ports: the same one for both edges
	common := []string{"--secret", edgeSecret, "--no-mdns", "--no-nat", "--log-level", "debug"}
	bp := startEdgeProc(t, "B", []string{ipBin, "netns", "exec", nsB}, append([]string{"--data-dir", t.TempDir(),
		"--listen", "/ip4/" + netnsB + "/tcp/0", "--listen", "/ip4/" + netnsB + "/udp/0/quic-v1",
		"--port", strconv.Itoa(port), "--public-ip", netnsB, "--name", "bob",
		"--llm-mode", "--skills", skills, "--session-ttl", edgeBTTL.String(), "--rate-limit", strconv.Itoa(edgeBRate)}, common...)...)
	ap := startEdgeProc(t, "A", []string{ipBin, "netns", "exec", nsA}, append([]string{"--data-dir", t.TempDir(),
		"--listen", "/ip4/" + netnsA + "/tcp/0", "--listen", "/ip4/" + netnsA + "/udp/0/quic-v1",
		"--port", strconv.Itoa(port), "--public-ip", netnsA, "--name", "alice",
		"--max-message", strconv.Itoa(edgeAMaxMessage), "--bootstrap", bp.tcpAddr(t)}, common...)...)
	// `ip netns exec` execs the node in place: the PIDs we hold are the nodes'.
	for _, p := range []*edgeProc{ap, bp} {
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.Cmd.Process.Pid)); err != nil || strings.TrimSpace(string(comm)) != "mcpv2" {
			t.Fatalf("%s: pid %d is %q, not the node (%v)", p.name, p.Cmd.Process.Pid, comm, err)
		}
	}

	a, b := newEdgePeer(t, "A", ap), newEdgePeer(t, "B", bp)
	if a.ip != netnsA || b.ip != netnsB || a.port != port || b.port != port {
		t.Fatalf("edges at %s:%d and %s:%d, want %s:%d and %s:%d", a.ip, a.port, b.ip, b.port, netnsA, port, netnsB, port)
	}
	// The edges are not served in the root namespace. (A connection there
	// may still succeed where a transparent proxy takes every TCP
	// connection, so the check is that A does not answer.)
	root := &http.Client{Timeout: 500 * time.Millisecond}
	if resp, err := root.Get(a.base + "/mcpv2/health"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if bytes.Contains(body, []byte(a.peerID)) {
			t.Fatalf("A's edge answers in the root namespace: the namespaces are not isolated")
		}
	}
	root.CloseIdleConnections()
	a.maxMessage, a.ttl, a.rateLimit = edgeAMaxMessage, time.Hour, 200
	b.llmMode, b.greet, b.ttl, b.rateLimit, b.maxMessage = true, true, edgeBTTL, edgeBRate, 8<<20
	inA, inB := netnsDial(pathA), netnsDial(pathB)
	for _, p := range []*edgePeer{&a, &b} {
		p.client = edgeHTTPClient(t, "", inA)
		p.altIP = netnsAlt
		p.altClient = edgeHTTPClient(t, netnsAlt, inA)
	}
	a.localClient, b.localClient = a.client, edgeHTTPClient(t, "", inB)

	var took []string
	for i := 1; i <= edgeRounds; i++ {
		start := time.Now()
		ok := t.Run(fmt.Sprintf("round-%d", i), func(t *testing.T) { runEdgeScenarios(t, a, b) })
		took = append(took, fmt.Sprintf("%v (%s)", time.Since(start).Round(time.Millisecond), map[bool]string{true: "pass", false: "FAIL"}[ok]))
	}
	t.Logf("%d rounds across namespaces %s and %s: %s", edgeRounds, nsA, nsB, strings.Join(took, ", "))
}

// netnsDial returns a dial function that opens its sockets in the network
// namespace at nsPath. A socket belongs to the namespace of the thread that
// creates it, so each dial runs on a goroutine locked to an OS thread that
// enters the namespace; the goroutine ends without unlocking, so that the
// runtime discards the thread instead of reusing it elsewhere. The
// connection, once made, may be used from any goroutine.
func netnsDial(nsPath string) func(ctx context.Context, network, addr, local string) (net.Conn, error) {
	return func(ctx context.Context, network, addr, local string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		done := make(chan result, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
			fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				done <- result{nil, fmt.Errorf("open %s: %w", nsPath, err)}
				return
			}
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
			if err != nil {
				done <- result{nil, fmt.Errorf("setns %s: %w", nsPath, err)}
				return
			}
			d := net.Dialer{Timeout: 10 * time.Second}
			if local != "" {
				d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
			}
			c, err := d.DialContext(ctx, network, addr)
			done <- result{c, err}
		}()
		r := <-done
		return r.c, r.err
	}
}

// waitNetnsReady waits until the veth pair carries traffic: from inside the
// namespace at nsPath, a connection from the address from to port 9 of the
// address to is answered (refused by the other side's kernel), not lost.
func waitNetnsReady(t *testing.T, nsPath, from, to string) {
	t.Helper()
	dial := netnsDial(nsPath)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		c, err := dial(ctx, "tcp", net.JoinHostPort(to, "9"), from)
		cancel()
		if err == nil {
			c.Close()
			return
		}
		if errors.Is(err, unix.ECONNREFUSED) {
			return // B's kernel answered: the link is up
		}
		if time.Now().After(deadline) {
			t.Fatalf("the veth link between %s and %s does not come up: %v", from, to, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
