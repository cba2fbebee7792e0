//go:build linux

package natlab

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/localapi"
)

// TestNATLabStatus: `mcpv2 status` of an agent behind NAT shows it
// private with a relay reservation on the lab's relay (AutoRelay's
// addresses are the relay's public ones, which only the lab has), and the
// relay's shows it public by its relay service. The control socket is a
// file: the test reaches it from outside the namespaces.
func TestNATLabStatus(t *testing.T) {
	ipBin, nftBin := natlabTools(t)
	natlabRemoveStale(t, ipBin)
	lab := newNATLab(t, ipBin, nftBin, "s", false)
	relay := natlabRelay(t, lab)
	relayAddr := relay.addr(t, natlabRelayIP, "/tcp/")
	b := lab.startNode("peerB", "B", t.TempDir(), "--bootstrap", relayAddr, "--log-level", "debug")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := localapi.Dial(ctx, b.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var s *localapi.StatusResponse
	for {
		if s, err = cl.Status(ctx); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(s.Relays, func(r node.Reservation) bool { return r.Relay == relay.peerID }) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("B holds no reservation on the relay %s within 60 s: %+v\nB's log:\n%s", relay.peerID, s, b.logTail(40))
		case <-time.After(200 * time.Millisecond):
		}
	}
	if s.Reachability.State != "private" || s.Peers.Direct < 1 {
		t.Errorf("B's status: reachability %+v, peers %+v", s.Reachability, s.Peers)
	}
	for _, a := range s.Relays[0].Addrs {
		if !strings.Contains(a, natlabRelayIP) || !strings.HasSuffix(a, "/p2p-circuit") {
			t.Errorf("reservation address %s: want the relay's public address and /p2p-circuit", a)
		}
	}
	out, err := exec.CommandContext(ctx, binPath, "status", "--data-dir", b.dataDir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Relay slots    "+relay.peerID) || !strings.Contains(string(out), "Reachability   private") {
		t.Errorf("mcpv2 status of B: %v\n%s", err, out)
	}

	rc, err := localapi.Dial(ctx, relay.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	rs, err := rc.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rs.RelayService || rs.Reachability.State != "public" || rs.Reachability.Source != "relay-service" || rs.Peers.Peers < 1 {
		t.Errorf("the relay's status: relay service %v, reachability %+v, peers %+v", rs.RelayService, rs.Reachability, rs.Peers)
	}
	t.Logf("B: %s (%s); relay slots %v", s.Reachability.State, s.Reachability.Why, s.Relays)
}
