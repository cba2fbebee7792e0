package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// Row 13: what --metrics costs. Three `mcpv2 node`s side by side in one
// run, the same flags but for the metrics: off, on (the node's, the
// edge's and go-libp2p's collectors), and on with the resource manager's
// (--metrics-rcmgr). Warm calls at one in flight (latency; the three take
// turns call by call) and at inFlight (calls/s and the node's CPU per
// call; alternated round by round), then each node's RSS.

// metricsVariant is one node of row 13.
type metricsVariant struct {
	name  string
	flags []string
	c     *child
	addr  protocol.Address
	url   string // its /metrics, "" when off
	mc    *meshClient
}

// runMetricsCost measures row 13.
func runMetricsCost(ctx context.Context, e *env, p plan) (_ []line, err error) {
	vs := []*metricsVariant{
		{name: "off"},
		{name: "on", flags: []string{"--metrics", "127.0.0.1:0"}},
		{name: "on + rcmgr", flags: []string{"--metrics", "127.0.0.1:0", "--metrics-rcmgr"}},
	}
	defer func() {
		for _, v := range vs {
			if v.mc != nil {
				_ = v.mc.Close()
			}
			if v.c != nil {
				e.procs.kill(v.c)
			}
		}
	}()
	for i, v := range vs {
		dir := filepath.Join(e.dir, fmt.Sprintf("metrics-node-%d", i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if v.c, err = e.startNode(ctx, "the metrics "+v.name+" node", append(nodeArgs(dir), v.flags...)); err != nil {
			return nil, err
		}
		for _, a := range v.c.values("MCPV2_P2P_ADDRESS") {
			if containsProto(a, "/tcp/") {
				if v.addr, err = protocol.ParseAddress(a); err != nil {
					return nil, err
				}
			}
		}
		if v.addr.PeerID == "" {
			return nil, fmt.Errorf("%w: the metrics %s node's banner has no TCP address: %q", errNotReady, v.name, v.c.lines)
		}
		if v.url = v.c.value("MCPV2_METRICS"); (v.url != "") != (v.flags != nil) {
			return nil, fmt.Errorf("the metrics %s node's banner: MCPV2_METRICS=%q", v.name, v.url)
		}
		if v.mc, err = newMeshClient(nil); err != nil {
			return nil, err
		}
		if _, err := v.mc.Connect(ctx, v.addr); err != nil {
			return nil, err
		}
	}

	// Latency, one call in flight: the variants take turns call by call
	// (the first of each turn rotating), so that the load of the machine,
	// which changes by the second, falls on all of them alike.
	lat := make([][]time.Duration, len(vs))
	calls := make([]callFunc, len(vs))
	for i, v := range vs {
		calls[i] = meshCall(v.mc.Client, v.addr, judgedPayload)
	}
	for r := range p.rounds {
		if err := interleavedLatency(ctx, p, r, calls, lat); err != nil {
			return nil, fmt.Errorf("latency: %w", err)
		}
	}
	var sides []func(int) error
	// Calls/s and the node's CPU per call, inFlight at once.
	rate, cpu := make([][]float64, len(vs)), make([][]float64, len(vs))
	sides = sides[:0]
	for i, v := range vs {
		call := meshCall(v.mc.Client, v.addr, judgedPayload)
		sides = append(sides, func(int) error {
			rctx, cancel := context.WithTimeout(ctx, sideTimeout)
			defer cancel()
			if err := warmUp(rctx, inFlight, p.warm, call); err != nil {
				return err
			}
			c0, err := procCPU(v.c.pid())
			if err != nil {
				return err
			}
			calls, took, err := throughputRound(rctx, inFlight, p.tputDur, 1, call)
			if err != nil {
				return err
			}
			c1, err := procCPU(v.c.pid())
			if err != nil {
				return err
			}
			rate[i] = append(rate[i], float64(calls)/took.Seconds())
			cpu[i] = append(cpu[i], float64((c1-c0).Microseconds())/float64(calls))
			return nil
		})
	}
	if err := alternate(ctx, p.rounds, sides...); err != nil {
		return nil, fmt.Errorf("calls/s: %w", err)
	}
	// The metrics were counted: a scrape shows the mesh pings.
	rss := make([]float64, len(vs))
	for i, v := range vs {
		if v.url != "" {
			if err := checkScrape(ctx, v.url); err != nil {
				return nil, fmt.Errorf("the metrics %s node: %w", v.name, err)
			}
		}
		r, err := procRSS(v.c.pid())
		if err != nil {
			return nil, err
		}
		rss[i] = float64(r)
	}

	var lines []line
	off := 0
	for i := 1; i < len(vs); i++ {
		judged := vs[i].name == "on"
		target, rtarget := "≤ 1.03×", "≥ 0.97×"
		if !judged {
			target, rtarget = "(info)", "(info)"
		}
		l := line{row: 13, payload: vs[i].name + ": 1 KiB, 1 in flight", baseline: "metrics off",
			aMed: fmtDur(median(lat[i])), aP99: fmtDur(quantile(lat[i], 0.99)),
			bMed: fmtDur(median(lat[off])), bP99: fmtDur(quantile(lat[off], 0.99)),
			ratio: median(lat[i]) / median(lat[off]), target: target}
		l.judge(judged, l.ratio <= 1.03)
		lines = append(lines, l)
		r := line{row: 13, payload: fmt.Sprintf("%s: 1 KiB calls/s, %d in flight", vs[i].name, inFlight), baseline: "metrics off",
			aMed: fmtRate(median(rate[i]), "calls"), bMed: fmtRate(median(rate[off]), "calls"),
			ratio: median(rate[i]) / median(rate[off]), target: rtarget}
		r.judge(judged, r.ratio >= 0.97)
		lines = append(lines, r)
		c := line{row: 13, payload: vs[i].name + ": node CPU per call", baseline: "metrics off",
			aMed: fmtMicros(median(cpu[i]), false), bMed: fmtMicros(median(cpu[off]), false),
			ratio: median(cpu[i]) / median(cpu[off]), target: target}
		c.judge(judged, c.ratio <= 1.03)
		lines = append(lines, c)
		m := line{row: 13, payload: vs[i].name + ": node RSS after the run", baseline: "metrics off",
			aMed: fmtMiB(rss[i]), bMed: fmtMiB(rss[off]), ratio: rss[i] / rss[off], target: "(info)"}
		m.judge(false, true)
		lines = append(lines, m)
		e.log.Info("measured", "row", 13, "variant", vs[i].name, "latency", fmtDur(median(lat[i])), "off", fmtDur(median(lat[off])),
			"calls/s", fmtRate(median(rate[i]), "calls"), "off calls/s", fmtRate(median(rate[off]), "calls"),
			"cpu/call", fmtMicros(median(cpu[i]), false), "off cpu/call", fmtMicros(median(cpu[off]), false))
	}
	return lines, nil
}

// interleavedLatency is one latency round of calls taken in turns: each
// warms up, then turn after turn each makes one timed call, for about
// p.latDur (and at least p.latMin calls each).
func interleavedLatency(ctx context.Context, p plan, round int, calls []callFunc, lat [][]time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, sideTimeout)
	defer cancel()
	for _, call := range calls {
		if err := warmUp(ctx, 1, p.warm, call); err != nil {
			return err
		}
	}
	end := time.Now().Add(time.Duration(len(calls)) * p.latDur)
	for k := 0; k < p.latMin || time.Now().Before(end); k++ {
		for j := range calls {
			i := (j + k + round) % len(calls)
			t := time.Now()
			if err := calls[i](ctx, 0); err != nil {
				return err
			}
			lat[i] = append(lat[i], time.Since(t))
		}
	}
	return nil
}

// checkScrape reads url (a node's /metrics) and fails unless it counts
// mesh pings that succeeded.
func checkScrape(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("scrape %s: %w", url, err)
	}
	const want = `mcpv2_calls_total{caller="peer",face="mesh",outcome="ok",skill="ping"}`
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
		return errors.New("scrape " + url + ": no " + want + " in the answer")
	}
	return nil
}
