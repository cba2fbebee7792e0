//go:build linux

package attacktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// Addresses inside the namespace of TestAttackDialScope, which exist
// nowhere else: a public-looking /24 on a veth pair, and a private
// address beside it.
const (
	dialNetT    = "11.79.0.1" // T's, and T2's
	dialNetQ    = "11.79.0.2" // the DHT server's
	dialNetLAN  = "10.80.0.1" // the attacker's peer's private address
	dialNetMask = "/24"
)

// TestAttackDialScope is issue 18, item 4's dialling rule, from the
// attacker's side, on a public mesh: in a network namespace of its own, T
// and a DHT server Q have public addresses (T a DHT client that
// bootstraps from Q); the attacker's peer P listens on T's machine's
// loopback and on a private address only, and joins through Q over
// loopback, so that Q knows and hands out those addresses. An anonymous
// caller then has T reach P:
//
//   - by the DHT: the gateway pings P's PeerID; T finds P's addresses
//     through Q. Before, T dialled its own loopback and the ping reached P;
//     now 502, "could not reach peer".
//   - by its signed card and provider records: GET /mcpv2/find for P's
//     skill; T dials the providers it finds to rank them. Before, P was
//     found reachable; now not, and T is still not connected to P.
//   - by identify: P2 calls T and tells it its loopback and private
//     addresses, then restarts on them without calling T. go-libp2p's
//     identify keeps only public addresses from a public connection (this
//     held before too); the gateway's ping does not reach P2.
//   - T2, as T but with --routable-cidr 10.80.0.0/16, dials P's private
//     address: its find says P is reachable, its ping of P is answered.
func TestAttackDialScope(t *testing.T) {
	ns := dialNetns(t)
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return ns.dial(ctx, network, addr)
		},
	}}
	t.Cleanup(client.CloseIdleConnections)
	in := []string{ns.ip, "netns", "exec", ns.name}
	common := []string{"--no-mdns", "--no-nat", "--log-level", "debug"}
	start := func(args ...string) *proc {
		t.Helper()
		return startExact(t, in, append(append([]string{}, common...), args...)...)
	}
	q := start("--data-dir", t.TempDir(), "--listen", "/ip4/"+dialNetQ+"/tcp/0", "--listen", "/ip4/127.0.0.1/tcp/0", "--dht-mode", "server")
	qPublic, qLoop := dialP2P(t, q, dialNetQ), dialP2P(t, q, "127.0.0.1")
	skills := filepath.Join(t.TempDir(), "skills.json")
	if err := os.WriteFile(skills, []byte(`{"skills":[{"name":"dialscope","description":"the attacker's peer's own skill",
		"input_schema":{"type":"object"},"handler":{"type":"template","template":"{}"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start("--data-dir", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0", "--listen", "/ip4/"+dialNetLAN+"/tcp/0",
		"--bootstrap", qLoop, "--dht-mode", "server", "--skills", skills)
	edge := func(extra ...string) (*proc, string, string) {
		n := start(append([]string{"--data-dir", t.TempDir(), "--listen", "/ip4/" + dialNetT + "/tcp/0", "--port", "0", "--public-ip", dialNetT,
			"--bootstrap", qPublic, "--dht-mode", "client"}, extra...)...)
		base := "http://" + net.JoinHostPort(dialNetT, n.first("MCPV2_BOUND_PORT"))
		return n, base, dialNetnsSession(t, client, base)
	}
	tn, tBase, tok := edge()
	// T2 is T with --routable-cidr 10.80.0.0/16: it dials P's private
	// address, which widens its scope; and it tells when P's card and
	// addresses are in the DHT, without T touching P first.
	_, t2Base, t2tok := edge("--routable-cidr", "10.80.0.0/16")
	ping := func(base, tok, pid string) (int, []byte) {
		t.Helper()
		return dialNetnsDo(t, client, http.MethodPost, base+"/mcpv2/peers/"+pid, tok, dialCard)
	}
	waitFor(t, 60*time.Second, "T2 (--routable-cidr 10.80.0.0/16) to find P's skill through Q, and P reachable", func() bool {
		for _, f := range dialFind(t, client, t2Base, t2tok, "dialscope") {
			if f.PeerID == p.peerID() && f.Reachable {
				return true
			}
		}
		return false
	})
	if st, body := ping(t2Base, t2tok, p.peerID()); st != http.StatusOK {
		t.Errorf("T2 (--routable-cidr 10.80.0.0/16) does not reach P at its private address: %d %s", st, dialClip(string(body)))
	}

	// The DHT: T's gateway pings P, whose addresses T has only from Q.
	st, body := ping(tBase, tok, p.peerID())
	t.Logf("DHT: T's gateway, ping P: %d %s", st, dialClip(string(body)))
	if st == http.StatusOK || !strings.Contains(string(body), "could not reach peer") {
		t.Errorf("by the DHT: T reached P, whose only addresses are T's machine's loopback and a private one: %d %s", st, dialClip(string(body)))
	}

	// The card and provider records: find dials the providers to rank them.
	var found []dialFound
	waitFor(t, 30*time.Second, "T to find P's skill through Q", func() bool {
		found = dialFind(t, client, tBase, tok, "dialscope")
		return len(found) > 0
	})
	t.Logf("card: T's find: %+v", found)
	for _, f := range found {
		if f.PeerID == p.peerID() && f.Reachable {
			t.Errorf("by the card: T's find dialled P at an announced loopback or private address and found it reachable")
		}
	}
	if st, body := ping(tBase, tok, p.peerID()); st == http.StatusOK {
		t.Errorf("after the find, T is connected to P: %d %s", st, dialClip(string(body)))
	}

	// Identify: P2 calls T, then comes back on the same addresses without.
	p2dir := t.TempDir()
	p2args := []string{"--data-dir", p2dir, "--listen", "/ip4/127.0.0.1/tcp/" + dialNetnsFreePort(t, ns), "--listen", "/ip4/" + dialNetLAN + "/tcp/" + dialNetnsFreePort(t, ns)}
	p2 := start(append(append([]string{}, p2args...), "--bootstrap", dialP2P(t, tn, dialNetT), "--dht-mode", "client")...)
	p2id := p2.peerID()
	// Connected (by P2's call), T answers a ping of P2.
	waitFor(t, 30*time.Second, "P2 to call T", func() bool {
		st, _ := ping(tBase, tok, p2id)
		return st == http.StatusOK
	})
	p2.stop(t)
	p2 = start(append(append([]string{}, p2args...), "--no-mesh")...)
	if p2.peerID() != p2id {
		t.Fatalf("P2 came back as %s, not %s", p2.peerID(), p2id)
	}
	st, body = ping(tBase, tok, p2id)
	t.Logf("identify: T's gateway, ping P2: %d %s", st, dialClip(string(body)))
	if st == http.StatusOK {
		t.Errorf("by identify: T reached P2 at an address P2 announced over a public connection: %d %s", st, dialClip(string(body)))
	}
}

// dialNS is a network namespace of the test's.
type dialNS struct {
	name, path, ip string
}

// dialNetns makes a network namespace with loopback up, and a veth pair
// inside it carrying dialNetT and dialNetLAN on one end, dialNetQ on the
// other; it is deleted when the test ends. It skips without root.
func dialNetns(t *testing.T) *dialNS {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.SkipEnv(t, "skipped: the dialling rule on a public mesh needs a network namespace, which needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN)")
	}
	ipBin, err := exec.LookPath("ip")
	if err != nil {
		t.Fatalf("running as root but iproute2's ip is not installed: %v", err)
	}
	testenv.RemoveStaleNetns(t, ipBin, regexp.MustCompile(`^mcpv2dial-(\d+)$`))
	pid := os.Getpid()
	ns := &dialNS{name: fmt.Sprintf("mcpv2dial-%d", pid), ip: ipBin}
	ns.path = filepath.Join("/run/netns", ns.name)
	ipc := func(args ...string) error {
		out, err := exec.Command(ipBin, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	if err := ipc("netns", "add", ns.name); err != nil {
		if testenv.IsPermissionError(err) {
			testenv.SkipEnv(t, "skipped: the kernel refuses to create a network namespace here: %v", err)
		}
		t.Fatal(err)
	}
	// Registered first, so it runs after the processes are stopped.
	t.Cleanup(func() {
		if err := ipc("netns", "del", ns.name); err != nil && !strings.Contains(err.Error(), "No such file") {
			t.Errorf("cleanup: %v", err)
		}
	})
	va, vb := fmt.Sprintf("m2dv%d", pid), fmt.Sprintf("m2dw%d", pid) // at most 15 bytes
	for _, args := range [][]string{
		{"-n", ns.name, "link", "add", va, "type", "veth", "peer", "name", vb},
		{"-n", ns.name, "addr", "add", dialNetT + dialNetMask, "dev", va},
		{"-n", ns.name, "addr", "add", dialNetLAN + "/24", "dev", va},
		{"-n", ns.name, "addr", "add", dialNetQ + dialNetMask, "dev", vb},
		{"-n", ns.name, "link", "set", "lo", "up"},
		{"-n", ns.name, "link", "set", va, "up"},
		{"-n", ns.name, "link", "set", vb, "up"},
	} {
		if err := ipc(args...); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the namespace's addresses to answer", func() bool {
		for _, a := range []string{dialNetT, dialNetQ, dialNetLAN, "127.0.0.1"} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			c, err := ns.dial(ctx, "tcp", net.JoinHostPort(a, "9"))
			cancel()
			if err == nil {
				c.Close()
			} else if !errors.Is(err, unix.ECONNREFUSED) {
				return false
			}
		}
		return true
	})
	return ns
}

// dial opens a TCP connection from inside the namespace: a socket belongs
// to the namespace of the thread that makes it, so it is made on a
// goroutine locked to a thread that enters the namespace and ends without
// unlocking it (the runtime then discards the thread).
func (ns *dialNS) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := ns.do(func() error {
		var err error
		d := net.Dialer{Timeout: 10 * time.Second}
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// do runs f on a thread inside the namespace.
func (ns *dialNS) do(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		fd, err := unix.Open(ns.path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- err
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			done <- err
			return
		}
		done <- f()
	}()
	return <-done
}

// dialNetnsFreePort returns a TCP port free now on every address of the
// namespace.
func dialNetnsFreePort(t *testing.T, ns *dialNS) string {
	t.Helper()
	var port string
	if err := ns.do(func() error {
		ln, err := net.Listen("tcp4", "0.0.0.0:0")
		if err != nil {
			return err
		}
		defer ln.Close()
		port = fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return port
}

// dialP2P returns the node's P2P address on ip, with /p2p/.
func dialP2P(t *testing.T, p *proc, ip string) string {
	t.Helper()
	for _, a := range p.Banner["MCPV2_P2P_ADDRESS"] {
		if strings.HasPrefix(a, "/ip4/"+ip+"/tcp/") {
			return a
		}
	}
	t.Fatalf("no P2P address on %s in %v", ip, p.Banner["MCPV2_P2P_ADDRESS"])
	return ""
}

// dialNetnsDo sends one request through client with the session tok and
// returns the status and body.
func dialNetnsDo(t *testing.T, client *http.Client, method, u, tok string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// dialNetnsSession takes an anonymous session from the edge at base.
func dialNetnsSession(t *testing.T, client *http.Client, base string) string {
	t.Helper()
	st, b := dialNetnsDo(t, client, http.MethodGet, base+"/mcpv2/session", "", nil)
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if st != http.StatusOK || json.Unmarshal(b, &s) != nil || s.SessionID == "" {
		t.Fatalf("GET %s/mcpv2/session: %d %s", base, st, b)
	}
	return s.SessionID
}

// dialFound is one agent a find returned.
type dialFound struct {
	PeerID    string
	Reachable bool
}

// dialFind runs GET /mcpv2/find?skill=skill on the edge at base and
// returns the agents found (nil on any refusal: a find is rate limited).
func dialFind(t *testing.T, client *http.Client, base, tok, skill string) []dialFound {
	t.Helper()
	st, b := dialNetnsDo(t, client, http.MethodGet, base+"/mcpv2/find?skill="+url.QueryEscape(skill), tok, nil)
	if st != http.StatusOK {
		return nil
	}
	var a struct {
		Results []struct {
			Card struct {
				PeerID string `json:"peer_id"`
			} `json:"card"`
			Reachable bool `json:"reachable"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("find: %s", b)
	}
	var out []dialFound
	for _, r := range a.Results {
		out = append(out, dialFound{PeerID: r.Card.PeerID, Reachable: r.Reachable})
	}
	return out
}
