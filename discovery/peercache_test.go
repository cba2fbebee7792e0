package discovery

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestPeerCacheRestart: node X learns the mesh through a bootstrap peer and
// closes, writing its peer cache; started again with the same identity, no
// bootstrap peer and no mDNS, it refills its routing table from the cache and
// finds a card.
func TestPeerCacheRestart(t *testing.T) {
	mesh := newMesh(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owner := mesh[3]
	if err := owner.d.Publish(ctx, testCard(owner.h.ID(), "owner", []string{"summarize"}, "text")); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(t.TempDir(), "peers.json")
	xKey := seedKey(t, "X")
	h1 := newKeyHost(t, xKey)
	d1, err := New(h1, WithMode(ModeServer), WithMDNS(false), WithLogger(testLogger()),
		WithPeerCache(path), WithBootstrap(mesh[0].addrInfo()))
	if err != nil {
		t.Fatal(err)
	}
	if err := d1.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	rt1 := d1.DHT().RoutingTable().Size()
	if rt1 < 2 {
		t.Fatalf("routing table after bootstrap has %d peers; want the mesh", rt1)
	}
	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h1.Close(); err != nil {
		t.Fatal(err)
	}

	var pc peerCacheFile
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("peer cache not written on Close: %v", err)
	}
	if err := json.Unmarshal(b, &pc); err != nil || pc.Version != 1 || len(pc.Peers) != rt1 {
		t.Fatalf("peer cache: version %d, %d peers, %v; want version 1, %d peers", pc.Version, len(pc.Peers), err, rt1)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("peer cache mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}

	// Restart: same identity, a new port, no bootstrap peer.
	h2 := newKeyHost(t, xKey)
	d2 := newDisc(t, h2, WithPeerCache(path))
	if got := len(d2.bootstrapPeers()); got != rt1 {
		t.Fatalf("restarted node has %d bootstrap peers from the cache, want %d", got, rt1)
	}
	if err := d2.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	if got := d2.DHT().RoutingTable().Size(); got < 2 {
		t.Fatalf("routing table after restart has %d peers", got)
	}
	res, err := d2.Find(ctx, "summarize", 0)
	if err != nil || len(res) != 1 || res[0].Card.PeerID != owner.h.ID().String() {
		t.Fatalf("Find after restart = %+v, %v", res, err)
	}

	// Control: the same restart without the cache finds nobody.
	h3 := newKeyHost(t, seedKey(t, "Y"))
	d3 := newDisc(t, h3)
	if err := d3.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	if got := d3.DHT().RoutingTable().Size(); got != 0 {
		t.Fatalf("a node without cache nor bootstrap has %d routing-table peers", got)
	}
}

func TestPeerCachePeriodicWrite(t *testing.T) {
	mesh := newMesh(t, 2)
	path := filepath.Join(t.TempDir(), "peers.json")
	d := newDisc(t, newHost(t), WithPeerCache(path), withPeerCacheEvery(50*time.Millisecond),
		WithBootstrap(mesh[0].addrInfo()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the peer cache written while running", func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
	// No temporary files are left beside it.
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

// TestPeerCacheAfterAnnouncement: the cache is written once the node's
// card is out, not only at the 5-minute tick or at Close; a node killed a
// minute after it joined (the scale test's churn) comes back from it.
func TestPeerCacheAfterAnnouncement(t *testing.T) {
	mesh := newMesh(t, 3)
	path := filepath.Join(t.TempDir(), "peers.json")
	h := newHost(t)
	d := newDisc(t, h, WithPeerCache(path), WithBootstrap(mesh[0].addrInfo()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatalf("the peer cache is written before the first announcement and 5 min tick; the test shows nothing")
	}
	if err := d.Publish(ctx, testCard(h.ID(), "cached", []string{"cache-skill"})); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the peer cache written after the announcement", func() bool {
		return len(loadPeerCache(path, h.ID(), d.log)) > 0
	})
	got := loadPeerCache(path, h.ID(), d.log)
	for _, n := range mesh {
		if !slices.ContainsFunc(got, func(ai peer.AddrInfo) bool { return ai.ID == n.h.ID() && len(ai.Addrs) > 0 }) {
			t.Errorf("the peer cache %v lacks mesh node %s with an address", got, n.h.ID())
		}
	}
}

func TestLoadPeerCache(t *testing.T) {
	self := keyID(t, seedKey(t, "self"))
	a, b := keyID(t, seedKey(t, "a")), keyID(t, seedKey(t, "b"))
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"version":1,"peers":[
		{"id":"`+a.String()+`","addrs":["/ip4/10.0.0.1/tcp/4001","not-an-addr"]},
		{"id":"`+self.String()+`","addrs":["/ip4/10.0.0.2/tcp/4001"]},
		{"id":"garbage","addrs":["/ip4/10.0.0.3/tcp/4001"]},
		{"id":"`+b.String()+`","addrs":[]}]}`)
	got := loadPeerCache(good, self, testLogger())
	if len(got) != 1 || got[0].ID != a || len(got[0].Addrs) != 1 {
		t.Fatalf("loadPeerCache = %+v; want only %s with one address", got, a)
	}
	for name, body := range map[string]string{
		"malformed.json": "{",
		"version.json":   `{"version":2,"peers":[{"id":"` + a.String() + `","addrs":["/ip4/10.0.0.1/tcp/4001"]}]}`,
		"big.json":       `{"version":1,"peers":[],"pad":"` + strings.Repeat("x", maxPeerCacheFile) + `"}`,
	} {
		if got := loadPeerCache(write(name, body), self, testLogger()); len(got) != 0 {
			t.Errorf("%s: loadPeerCache = %v; want nothing", name, got)
		}
	}
	if got := loadPeerCache(filepath.Join(dir, "missing.json"), self, testLogger()); got != nil {
		t.Errorf("missing file: %v", got)
	}
}
