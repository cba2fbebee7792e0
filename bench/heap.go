package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
)

// Row 12: the heap over a long run of warm calls, server and client in
// this one process.

// heapConc is the calls in flight in the heap row.
const heapConc = 4

// maxHeapGrowth is the growth of HeapInuse that still counts as none.
const maxHeapGrowth = 1 << 20

// heapResult is what the heap row measured.
type heapResult struct {
	// at10 and at100 are HeapInuse after runtime.GC() at 10% and 100% of
	// the calls.
	at10, at100 uint64
	// allocs and bytes are per warm call: MemStats.Mallocs and TotalAlloc
	// between the two points, over the calls between them.
	allocs, bytes float64
	calls         int
}

// runHeap measures row 12.
func runHeap(ctx context.Context, e *env, p plan) ([]line, error) {
	r, err := measureHeap(ctx, filepath.Join(e.dir, "heap"), p.heapCalls)
	if err != nil {
		return nil, err
	}
	growth := float64(r.at100) - float64(r.at10)
	l1 := line{row: 12, payload: "1 KiB", baseline: "HeapInuse at 10% of the calls",
		aMed:  fmt.Sprintf("%s after %d calls (%+.1f KiB)", fmtMiB(float64(r.at100)), r.calls, growth/1024),
		bMed:  fmt.Sprintf("%s after %d calls", fmtMiB(float64(r.at10)), r.calls/10),
		ratio: math.NaN(), target: "growth ≈ 0 (≤ 1 MiB)"}
	l1.judge(true, growth <= maxHeapGrowth)
	l2 := line{row: 12, payload: "1 KiB", aMed: fmt.Sprintf("%.1f allocs, %.1f KiB per warm call", r.allocs, r.bytes/1024),
		ratio: math.NaN(), target: "reported (client + server)"}
	l2.judge(false, false)
	e.log.Info("measured", "row", 12, "heap10", fmtMiB(float64(r.at10)), "heap100", fmtMiB(float64(r.at100)), "allocs/call", r.allocs)
	return []line{l1, l2}, nil
}

// measureHeap runs a node.New server and a client in this process, makes
// calls warm 1 KiB ping calls with heapConc in flight, and reads the heap
// at 10% and 100% of them.
func measureHeap(ctx context.Context, dir string, calls int) (heapResult, error) {
	if calls < 20 {
		return heapResult{}, fmt.Errorf("the heap row needs at least 20 calls, got %d", calls)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return heapResult{}, err
	}
	srv, err := node.New(node.Config{DataDir: dir, ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, RateLimit: -1})
	if err != nil {
		return heapResult{}, err
	}
	defer srv.Close()
	addr, err := nodeTCPAddr(srv)
	if err != nil {
		return heapResult{}, err
	}
	mc, err := newMeshClient(nil)
	if err != nil {
		return heapResult{}, err
	}
	defer mc.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*sideTimeout)
	defer cancel()
	call := meshCall(mc.Client, addr, judgedPayload)
	if err := runCalls(ctx, heapConc, 200, call); err != nil { // warm-up
		return heapResult{}, err
	}
	first := calls / 10
	if err := runCalls(ctx, heapConc, first, call); err != nil {
		return heapResult{}, err
	}
	m10 := memAfterGC()
	if err := runCalls(ctx, heapConc, calls-first, call); err != nil {
		return heapResult{}, err
	}
	m100 := memAfterGC()
	n := float64(calls - first)
	return heapResult{at10: m10.HeapInuse, at100: m100.HeapInuse, calls: calls,
		allocs: float64(m100.Mallocs-m10.Mallocs) / n, bytes: float64(m100.TotalAlloc-m10.TotalAlloc) / n}, nil
}

// nodeTCPAddr returns the first TCP address of an in-process node.
func nodeTCPAddr(n *node.Node) (protocol.Address, error) {
	for _, a := range n.P2PAddrs() {
		if strings.Contains(a, "/tcp/") {
			return protocol.ParseAddress(a)
		}
	}
	return protocol.Address{}, fmt.Errorf("the in-process node has no TCP address: %v", n.P2PAddrs())
}

// memAfterGC collects garbage and returns the memory statistics.
func memAfterGC() runtime.MemStats {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}
