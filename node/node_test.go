package node

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// libp2p and quic-go keep package-level workers alive for the process.
		goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		goleak.IgnoreTopFunction("github.com/libp2p/go-libp2p/p2p/transport/quicreuse.(*reuse).gc"),
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
}

var loopback = []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}

// newTestNode starts a node on loopback in a fresh data dir; mod adjusts its
// config. It is closed when the test ends.
func newTestNode(t testing.TB, mod func(*Config)) *Node {
	t.Helper()
	cfg := Config{DataDir: t.TempDir(), ListenAddrs: loopback}
	if mod != nil {
		mod(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// addrOf returns n's first TCP address as a protocol.Address.
func addrOf(t testing.TB, n *Node) protocol.Address {
	t.Helper()
	for _, s := range n.P2PAddrs() {
		if strings.Contains(s, "/tcp/") {
			a, err := protocol.ParseAddress(s)
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
	}
	t.Fatalf("no tcp address in %v", n.P2PAddrs())
	return protocol.Address{}
}

// writePolicy writes a policy granting grants and returns its path.
func writePolicy(t testing.TB, grants map[string][]string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"grants": grants})
	p := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// pair starts a server B granting client A every skill, and A.
func pair(t testing.TB, mod func(*Config)) (a, b *Node) {
	t.Helper()
	a = newTestNode(t, nil)
	b = newTestNode(t, func(c *Config) {
		c.PolicyFile = writePolicy(t, map[string][]string{a.ID().String(): {"*"}})
		if mod != nil {
			mod(c)
		}
	})
	return a, b
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func codeOf(err error) int {
	if pe, ok := err.(*protocol.Error); ok {
		return pe.Code
	}
	return 0
}

func readAudit(t testing.TB, n *Node) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(n.DataDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// counterSkill registers a skill on n that counts its runs.
func counterSkill(n *Node, name string) *atomic.Int64 {
	var c atomic.Int64
	skills.Add(n.Registry(), name, "counts calls", nil, func(context.Context, struct{}) (map[string]int64, error) {
		return map[string]int64{"count": c.Add(1)}, nil
	})
	return &c
}
