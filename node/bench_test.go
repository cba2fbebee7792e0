package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/network"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// The mesh call is measured against the floor under it: a raw libp2p stream
// that echoes the same framed bytes between the same two hosts, with the
// same payloads (16 B, 1 KiB, 64 KiB). Run both in one go for a ratio; the
// full side-by-side table (other processes, QUIC, concurrency, CPU) is
// `go run ./bench` (docs/benchmarks.md):
//
//	go test -run '^$' -bench 'MeshCall|RawStreamEcho' -benchtime 3s ./node/

const echoProto = "/mcpv2-bench/echo/1.0.0"

// benchPayloads are the ping payload sizes of the call benchmarks.
var benchPayloads = []int{16, 1 << 10, 64 << 10}

// pingArgs returns ping arguments carrying a payload of size bytes.
func pingArgs(size int) json.RawMessage {
	return json.RawMessage(`{"payload":"` + strings.Repeat("x", size) + `"}`)
}

func BenchmarkMeshCall(b *testing.B) {
	a, srv := pair(b, func(c *Config) { c.RateLimit = -1 })
	addr := addrOf(b, srv)
	ctx := context.Background()
	for _, size := range benchPayloads {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			args := pingArgs(size)
			if _, err := a.Client().CallSkill(ctx, addr, "ping", args, protocol.CallOptions{}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := a.Client().CallSkill(ctx, addr, "ping", args, protocol.CallOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRawStreamEcho(b *testing.B) {
	a, srv := pair(b, nil)
	srv.Host().SetStreamHandler(echoProto, func(s network.Stream) {
		defer s.Close()
		fr := transport.NewFrameReader(s, 1<<20)
		for {
			msg, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if err := transport.WriteFrame(s, msg); err != nil {
				return
			}
		}
	})
	pid, err := a.Client().Connect(context.Background(), addrOf(b, srv))
	if err != nil {
		b.Fatal(err)
	}
	s, err := a.Host().NewStream(context.Background(), pid, libp2pproto.ID(echoProto))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fr := transport.NewFrameReader(s, 1<<20)
	for _, size := range benchPayloads {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			// The same bytes a ping call sends.
			params, _ := json.Marshal(protocol.CallParams{Name: "ping", Arguments: pingArgs(size)})
			msg, _ := json.Marshal(protocol.Slot{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: protocol.MethodToolsCall, Params: params})
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				if err := transport.WriteFrame(s, msg); err != nil {
					b.Fatal(err)
				}
				if _, err := fr.ReadFrame(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMeshCallParallel is BenchmarkMeshCall with 64 calls in flight
// (b.SetParallelism 32 on 2 cores), where per-call CPU shows rather than
// round-trip latency.
func BenchmarkMeshCallParallel(b *testing.B) {
	a, srv := pair(b, func(c *Config) { c.RateLimit = -1 })
	addr := addrOf(b, srv)
	ctx := context.Background()
	for _, size := range benchPayloads[:2] {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			args := pingArgs(size)
			b.ReportAllocs()
			b.SetParallelism(64 / max(1, runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := a.Client().CallSkill(ctx, addr, "ping", args, protocol.CallOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkGuardedCall is a warm call of a skill whose string argument
// the guard scans (every custom skill's, by default: docs/guard.md), the
// cost the guard adds to BenchmarkMeshCall's ping (whose payload, an
// echo, is not scanned). The skill is a template; its query is prose.
func BenchmarkGuardedCall(b *testing.B) {
	skillsFile := filepath.Join(b.TempDir(), "skills.json")
	if err := os.WriteFile(skillsFile, []byte(`{"skills":[{"name":"search","input_schema":{"type":"object","properties":{"query":{"type":"string"}}},
		"handler":{"type":"template","template":"ok"}}]}`), 0o600); err != nil {
		b.Fatal(err)
	}
	a, srv := pair(b, func(c *Config) { c.RateLimit = -1; c.SkillsFile = skillsFile })
	addr := addrOf(b, srv)
	ctx := context.Background()
	for _, q := range []string{"best pizza in Naples", strings.Repeat("How do teams plan travel for a conference in Lisbon? ", 19)} {
		b.Run(fmt.Sprintf("query=%d", len(q)), func(b *testing.B) {
			args, _ := json.Marshal(map[string]string{"query": q})
			if _, err := a.Client().CallSkill(ctx, addr, "search", args, protocol.CallOptions{}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Client().CallSkill(ctx, addr, "search", args, protocol.CallOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
