package node

import (
	"encoding/json"
	"testing"

	"github.com/libp2p/go-libp2p/p2p/net/swarm"

	"github.com/mcpv2/mcpv2/protocol"
)

// TestCallThroughDialBackoff: a call to a reachable peer whose addresses a
// failed dial (a find's reachability probe, under load) left in the
// swarm's dial backoff dials it again instead of failing "dial backoff".
func TestCallThroughDialBackoff(t *testing.T) {
	b := newTestNode(t, func(c *Config) { c.ListenAddrs = []string{"/ip4/127.0.0.1/tcp/0"} })
	a := newTestNode(t, nil)
	addr, err := protocol.ParseAddress(b.P2PAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	sw, ok := a.Host().Network().(*swarm.Swarm)
	if !ok {
		t.Fatalf("the host's network is a %T, not a swarm", a.Host().Network())
	}
	for _, m := range b.Host().Addrs() {
		sw.Backoff().AddBackoff(b.Host().ID(), m)
	}
	if _, err := a.Client().CallSkill(ctxT(t), addr, "ping", json.RawMessage(`{}`), protocol.CallOptions{}); err != nil {
		t.Fatalf("call with the peer's addresses in dial backoff: %v", err)
	}
}
