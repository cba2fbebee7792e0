package discovery

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// mdnsNetnsEnv names the network namespace TestMDNS runs in; set by the
// test itself when it re-runs inside the namespace.
const mdnsNetnsEnv = "MCPV2_TEST_MDNS_NETNS"

// TestMDNS: two nodes with mDNS on and no bootstrap peer find each other,
// connect, and find each other's card through the DHT they then form.
//
// mDNS needs an up, multicast-capable interface, which a CI container may
// not have (loopback is not multicast). So the test makes its own: as root
// it creates a network namespace holding a veth pair, re-runs itself inside
// it with `ip netns exec`, and removes the namespace at the end. Without
// root it is skipped.
func TestMDNS(t *testing.T) {
	if ns := os.Getenv(mdnsNetnsEnv); ns != "" {
		mdnsInNamespace(t, ns)
		return
	}
	if os.Geteuid() != 0 {
		testenv.SkipEnv(t, "skipped: mDNS needs a multicast interface; this test creates one in a network namespace (ip netns), which needs root")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		testenv.SkipEnv(t, "skipped: the ip command (iproute2) is needed to create a network namespace")
	}
	ns := fmt.Sprintf("mcpv2-mdns-%d", os.Getpid())
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	_ = exec.Command(ip, "netns", "del", ns).Run() // a leftover of a killed run
	run("netns", "add", ns)
	t.Cleanup(func() {
		if out, err := exec.Command(ip, "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("removing network namespace %s: %v\n%s", ns, err, out)
		}
	})
	run("-n", ns, "link", "set", "lo", "up")
	run("-n", ns, "link", "add", "mdns0", "type", "veth", "peer", "name", "mdns1")
	run("-n", ns, "addr", "add", "10.201.0.1/24", "dev", "mdns0")
	run("-n", ns, "addr", "add", "10.201.0.2/24", "dev", "mdns1")
	run("-n", ns, "link", "set", "mdns0", "up")
	run("-n", ns, "link", "set", "mdns1", "up")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ip, "netns", "exec", ns, os.Args[0], "-test.run=^TestMDNS$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), mdnsNetnsEnv+"="+ns)
	out, err := cmd.CombinedOutput()
	t.Logf("inside network namespace %s:\n%s", ns, out)
	if err != nil {
		t.Fatalf("the test inside the namespace failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestMDNS") {
		t.Fatal("the test inside the namespace did not pass")
	}
}

// mdnsInNamespace is TestMDNS inside the namespace.
func mdnsInNamespace(t *testing.T, ns string) {
	t.Logf("running in network namespace %s", ns)
	service := fmt.Sprintf("_mcpv2-test-%d._udp", os.Getpid())
	a := newDisc(t, newHost(t), WithMDNS(true), withMDNSService(service))
	b := newDisc(t, newHost(t), WithMDNS(true), withMDNSService(service))
	// Control: a node without mDNS is found by nobody.
	c := newDisc(t, newHost(t), WithMDNS(false))
	if a.mdns == nil || b.mdns == nil {
		t.Fatal("mDNS did not start")
	}
	eventually(t, 30*time.Second, "the nodes connected through mDNS", func() bool {
		return a.h.Network().Connectedness(b.h.ID()) == network.Connected
	})
	if n := len(c.h.Network().Peers()); n != 0 {
		t.Fatalf("the node without mDNS has %d peers", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "each in the other's routing table", func() bool {
		return a.DHT().RoutingTable().Find(b.h.ID()) != "" && b.DHT().RoutingTable().Find(a.h.ID()) != ""
	})
	if err := b.Publish(ctx, testCard(b.h.ID(), "b", []string{"lan-skill"})); err != nil {
		t.Fatal(err)
	}
	res, err := a.Find(ctx, "lan-skill", 0)
	if err != nil || len(res) != 1 || res[0].Card.PeerID != b.h.ID().String() {
		t.Fatalf("Find over the mDNS-found peer = %+v, %v", res, err)
	}
}

// TestMDNSOff checks that WithMDNS(false) starts no mDNS service.
func TestMDNSOff(t *testing.T) {
	d := newDisc(t, newHost(t))
	if d.mdns != nil || d.found != nil {
		t.Fatal("mDNS started though turned off")
	}
}
