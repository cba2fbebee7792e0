package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/libp2p/go-libp2p/core/host"

	"github.com/mcpv2/mcpv2/protocol"
)

// Rows 11 and 14: the resident memory of a `mcpv2 node` (mesh on, no edge)
// against the lean baseline binary (bench/bare) in its echo role, a bare
// host with a kad-dht server that also echoes: both idle (row 11), then
// each after loadCalls warm 1 KiB calls or echoes (row 14). The two are
// started side by side in every round, in alternating order.

// memTarget11 and memTarget14 are the targets of rows 11 and 14 (ratios
// of VmRSS, mcpv2 over bare).
const (
	memTarget11 = 1.2
	memTarget14 = 1.3
)

// memRound is one side's readings in one round.
type memRound struct {
	idle, loaded memInfo
}

// runMemory measures rows 11 and 14 (row 14's calls only when it is
// selected).
func runMemory(ctx context.Context, e *env, p plan) ([]line, error) {
	withCalls := e.cfg.selected(14)
	var res [2][]memRound // [mcpv2, bare] per round
	for r := range p.rounds {
		got, err := memoryRound(ctx, e, p, r, withCalls)
		if err != nil {
			return nil, err
		}
		for i := range got {
			res[i] = append(res[i], got[i])
		}
		e.log.Info("memory round", "round", r+1, "mcpv2 idle", fmtMiB(float64(got[0].idle.rss)), "bare idle", fmtMiB(float64(got[1].idle.rss)),
			"mcpv2 loaded", fmtMiB(float64(got[0].loaded.rss)), "bare loaded", fmtMiB(float64(got[1].loaded.rss)))
	}
	idle := func(m memRound) memInfo { return m.idle }
	loaded := func(m memRound) memInfo { return m.loaded }
	a, b := medianMem(res[0], idle), medianMem(res[1], idle)
	l11 := line{row: 11, baseline: "bare host + kad-dht (server mode), lean binary", aMed: memCell(a), bMed: memCell(b),
		ratio: float64(a.rss) / float64(b.rss), target: fmt.Sprintf("≤ %.1f×", memTarget11)}
	l11.judge(true, l11.ratio <= memTarget11)
	e.log.Info("measured", "row", 11, "mcpv2", l11.aMed, "bare", l11.bMed, "ratio", fmtRatio(l11.ratio))
	lines := []line{l11}
	if !withCalls {
		return lines, nil
	}
	a, b = medianMem(res[0], loaded), medianMem(res[1], loaded)
	growth := func(rs []memRound) float64 {
		var g []float64
		for _, m := range rs {
			g = append(g, float64(m.loaded.rss-m.idle.rss))
		}
		return median(g)
	}
	l14 := line{row: 14, payload: "1 KiB, TCP", baseline: "bare host + kad-dht echoing the same bytes, lean binary",
		aMed:  fmt.Sprintf("%s; growth %s", memCell(a), fmtMiB(growth(res[0]))),
		bMed:  fmt.Sprintf("%s; growth %s", memCell(b), fmtMiB(growth(res[1]))),
		ratio: float64(a.rss) / float64(b.rss), target: fmt.Sprintf("≤ %.1f×", memTarget14)}
	l14.judge(true, l14.ratio <= memTarget14)
	e.log.Info("measured", "row", 14, "mcpv2", l14.aMed, "bare", l14.bMed, "ratio", fmtRatio(l14.ratio))
	return append(lines, l14), nil
}

// memoryRound starts a node and a bare echo host side by side (the order
// alternating with the round), lets them idle, reads their memory, then,
// when withCalls is set, makes p.loadCalls calls to each (the order
// alternating too) and reads each one's memory right after its calls.
func memoryRound(ctx context.Context, e *env, p plan, r int, withCalls bool) (_ [2]memRound, err error) {
	var out [2]memRound
	dir := filepath.Join(e.dir, fmt.Sprintf("rss-node-%d", r))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return out, err
	}
	defer os.RemoveAll(dir)
	var cs [2]*child
	defer func() {
		for _, c := range cs {
			if c != nil {
				e.procs.kill(c)
			}
		}
	}()
	var bare readyInfo
	start := []func() error{
		func() (err error) { cs[0], err = e.startNode(ctx, "an idle mcpv2 node", nodeArgs(dir)); return err },
		func() (err error) { cs[1], err = e.startBare(ctx, "echo", &bare); return err },
	}
	sides := []int{0, 1}
	if r%2 == 1 {
		sides = []int{1, 0}
	}
	for _, i := range sides {
		if err := start[i](); err != nil {
			return out, err
		}
	}
	select {
	case <-time.After(p.idle):
	case <-ctx.Done():
		return out, context.Cause(ctx)
	}
	for i, c := range cs {
		if err := c.alive(); err != nil {
			return out, err
		}
		if out[i].idle, err = procMem(c.pid()); err != nil {
			return out, err
		}
	}
	if !withCalls {
		return out, nil
	}
	addr, err := childTCP(cs[0])
	if err != nil {
		return out, err
	}
	read := func(i int) func() error {
		return func() (err error) {
			if err = cs[i].alive(); err == nil {
				out[i].loaded, err = procMem(cs[i].pid())
			}
			return err
		}
	}
	load := []func() error{
		func() error { return loadNode(ctx, addr, p.loadCalls, read(0)) },
		func() error { return loadEcho(ctx, bare, p.loadCalls, read(1)) },
	}
	for _, i := range sides {
		if err := load[i](); err != nil {
			return out, err
		}
	}
	return out, nil
}

// loadNode makes calls warm 1 KiB pings to the node at addr from a fresh
// mesh client, inFlight at a time, then runs after (the reading) while the
// client is still connected.
func loadNode(ctx context.Context, addr protocol.Address, calls int, after func() error) error {
	mc, err := newMeshClient(nil)
	if err != nil {
		return err
	}
	defer mc.Close()
	ctx, cancel := context.WithTimeout(ctx, sideTimeout)
	defer cancel()
	if _, err := mc.Connect(ctx, addr); err != nil {
		return err
	}
	if err := runCalls(ctx, inFlight, calls, meshCall(mc.Client, addr, judgedPayload)); err != nil {
		return err
	}
	return after()
}

// loadEcho makes calls echoes of the 1 KiB ping request to the bare echo
// host, on inFlight streams of a fresh bare client host, then runs after
// while the client is still connected.
func loadEcho(ctx context.Context, echo readyInfo, calls int, after func() error) error {
	msg, err := pingRequest(judgedPayload)
	if err != nil {
		return err
	}
	a, err := echo.addrOf("/tcp/")
	if err != nil {
		return err
	}
	var h host.Host
	if h, err = bareHost(false); err != nil {
		return err
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(ctx, sideTimeout)
	defer cancel()
	pid, err := dialAddr(ctx, h, a)
	if err != nil {
		return err
	}
	ss, err := openEchoStreams(ctx, h, pid, inFlight)
	if err != nil {
		return err
	}
	defer closeEchoStreams(ss)
	if err := runCalls(ctx, inFlight, calls, echoCall(ss, msg)); err != nil {
		return err
	}
	return after()
}

// childTCP returns the TCP mesh address of a `mcpv2 node` child, from its
// banner.
func childTCP(c *child) (protocol.Address, error) {
	for _, a := range c.values("MCPV2_P2P_ADDRESS") {
		if containsProto(a, "/tcp/") {
			return protocol.ParseAddress(a)
		}
	}
	return protocol.Address{}, fmt.Errorf("%w: %s's banner has no TCP address: %q", errNotReady, c.name, c.lines)
}

// medianMem is the median, field by field, of the readings f picks.
func medianMem(rs []memRound, f func(memRound) memInfo) memInfo {
	var rss, anon, file, pss []float64
	for _, r := range rs {
		m := f(r)
		rss, anon, file, pss = append(rss, float64(m.rss)), append(anon, float64(m.anon)), append(file, float64(m.file)), append(pss, float64(m.pss))
	}
	return memInfo{rss: int64(median(rss)), anon: int64(median(anon)), file: int64(median(file)), pss: int64(median(pss))}
}

// memCell formats a reading as "VmRSS (anon RssAnon, file RssFile)".
func memCell(m memInfo) string {
	return fmt.Sprintf("%s (anon %.1f, file %.1f)", fmtMiB(float64(m.rss)), float64(m.anon)/(1<<20), float64(m.file)/(1<<20))
}
