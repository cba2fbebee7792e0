package node

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

// TestFindAndCallByPeerID: a root node, and A and B bootstrapped through it.
// B gains a skill after start; A finds it through the DHT and calls B by
// PeerID alone.
func TestFindAndCallByPeerID(t *testing.T) {
	mesh := func(boot ...string) func(*Config) {
		return func(c *Config) {
			c.Mesh = &MeshConfig{Bootstrap: boot, NoMDNS: true, NoNAT: true}
			c.ListenAddrs = []string{"/ip4/127.0.0.1/tcp/0"}
		}
	}
	root := newTestNode(t, mesh())
	boot := root.P2PAddrs()[0]
	a := newTestNode(t, mesh(boot))
	b := newTestNode(t, func(c *Config) {
		mesh(boot)(c)
		c.PolicyFile = writePolicy(t, map[string][]string{a.ID().String(): {"*"}})
	})
	skills.Add(b.Registry(), "chess", "Plays chess moves", []string{"games"}, func(_ context.Context, in struct {
		Move string `json:"move"`
	}) (map[string]string, error) {
		return map[string]string{"reply": "e5", "to": in.Move}, nil
	})
	b.CardChanged()

	var found []protocol.FindResult
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := a.Find(ctx, "chess", 10)
		cancel()
		if err == nil && len(res) > 0 {
			found = res
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(found) == 0 {
		t.Fatal("A never found the chess skill")
	}
	if found[0].Card.PeerID != b.ID().String() || found[0].Score < 2 {
		t.Fatalf("top result %+v", found[0])
	}
	byTag, err := a.Find(ctxT(t), "games", 10)
	if err != nil || len(byTag) == 0 || byTag[0].Card.PeerID != b.ID().String() {
		t.Fatalf("find by tag: %v %+v", err, byTag)
	}
	addr, err := protocol.ParseAddress("mcpv2://" + b.ID().String())
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Client().CallSkill(ctxT(t), addr, "chess", json.RawMessage(`{"move":"e4"}`), protocol.CallOptions{})
	if err != nil || string(res) != `{"reply":"e5","to":"e4"}` {
		t.Fatalf("call by PeerID: %s %v", res, err)
	}
	// Without the mesh a node cannot Find.
	plain := newTestNode(t, nil)
	if _, err := plain.Find(ctxT(t), "chess", 1); err != protocol.ErrNoDiscovery {
		t.Fatalf("find without mesh: %v", err)
	}
}
