package discovery

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpv2/mcpv2/internal/promtest"
)

// TestMetrics: finds are counted by result, each once, announcements
// too, and Close takes the collectors off the registry.
func TestMetrics(t *testing.T) {
	nodes := newMesh(t, 3)
	reg := prometheus.NewRegistry()
	h := newHost(t)
	d := newDisc(t, h, WithBootstrap(nodes[0].addrInfo()), WithMetrics(reg))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	card := testCard(nodes[1].h.ID(), "owner", []string{"translate"}, "text")
	card.PeerID = ""
	if err := nodes[1].d.Publish(ctx, card); err != nil {
		t.Fatal(err)
	}
	if res, err := d.Find(ctx, "translate", 5); err != nil || len(res) != 1 {
		t.Fatalf("find translate: %d results, %v", len(res), err)
	}
	for range 2 {
		if res, err := d.Find(ctx, "no-such-skill-here", 5); err != nil || len(res) != 0 {
			t.Fatalf("find no-such-skill-here: %d results, %v", len(res), err)
		}
	}
	own := testCard(h.ID(), "me", []string{"summarize"})
	own.PeerID = ""
	if err := d.Publish(ctx, own); err != nil {
		t.Fatal(err)
	}
	for r, want := range map[string]float64{"found": 1, "empty": 2, "no_peers": 0, "error": 0} {
		if got := gathered(t, reg, "mcpv2_dht_finds_total", r); got != want {
			t.Errorf("finds{result=%q} = %v, want %v", r, got, want)
		}
		if got := gathered(t, reg, "mcpv2_dht_find_duration_seconds", r); got != want {
			t.Errorf("find durations{result=%q} = %v observed, want %v", r, got, want)
		}
	}
	if ok, bad := gathered(t, reg, "mcpv2_dht_publishes_total", "ok"), gathered(t, reg, "mcpv2_dht_publishes_total", "error"); ok < 1 || bad != 0 {
		t.Errorf("publishes: %v ok, %v errors; want at least the one Publish, no error", ok, bad)
	}
	if rt := gathered(t, reg, "mcpv2_dht_routing_table_peers", ""); rt < 1 {
		t.Errorf("routing table gauge %v, want the mesh's peers", rt)
	}

	// A lone node: no peers to ask.
	lreg := prometheus.NewRegistry()
	lone := newDisc(t, newHost(t), WithMetrics(lreg))
	if _, err := lone.Find(ctx, "translate", 5); !errors.Is(err, ErrNoPeers) {
		t.Fatalf("a lone find: %v, want ErrNoPeers", err)
	}
	if v := gathered(t, lreg, "mcpv2_dht_finds_total", "no_peers"); v != 1 {
		t.Errorf("no_peers finds = %v, want 1", v)
	}
	if err := lone.Close(); err != nil {
		t.Fatal(err)
	}
	if mfs, err := lreg.Gather(); err != nil || len(mfs) != 0 {
		t.Errorf("after Close the registry holds %d metrics (%v), want none", len(mfs), err)
	}
}

// gathered is the value of name's series with label result (any series
// when result is ""): promtest.Value.
func gathered(t *testing.T, g prometheus.Gatherer, name, result string) float64 {
	t.Helper()
	var want map[string]string
	if result != "" {
		want = map[string]string{"result": result}
	}
	v, _ := promtest.Value(t, g, name, want)
	return v
}
