package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// runRSS measures row 11: the resident memory of a `mcpv2 node` (mesh on,
// no edge) after it idled, against a bare host with a kad-dht server that
// idled as long, the two started side by side in every round.
func runRSS(ctx context.Context, e *env, p plan) ([]line, error) {
	var rss [2][]float64
	for r := range p.rounds {
		dir := filepath.Join(e.dir, fmt.Sprintf("rss-node-%d", r))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		start := []func() (*child, error){
			func() (*child, error) { return e.startNode(ctx, "an idle mcpv2 node", nodeArgs(dir)) },
			func() (*child, error) { return e.procs.startRole(ctx, "dht", &readyInfo{}) },
		}
		if r%2 == 1 {
			start[0], start[1] = start[1], start[0]
		}
		var cs [2]*child
		for i, f := range start {
			c, err := f()
			if err != nil {
				for _, c := range cs {
					if c != nil {
						e.procs.kill(c)
					}
				}
				return nil, err
			}
			cs[i] = c
		}
		if r%2 == 1 {
			cs[0], cs[1] = cs[1], cs[0]
		}
		select {
		case <-time.After(p.idle):
		case <-ctx.Done():
		}
		var err error
		for i, c := range cs {
			if err == nil {
				if err = c.alive(); err == nil {
					var v int64
					v, err = procRSS(c.pid())
					rss[i] = append(rss[i], float64(v))
				}
			}
			e.procs.kill(c)
		}
		if err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		_ = os.RemoveAll(dir)
	}
	a, b := median(rss[0]), median(rss[1])
	l := line{row: 11, baseline: "bare host + kad-dht (server mode)", aMed: fmtMiB(a), bMed: fmtMiB(b),
		ratio: a / b, target: "≤ 1.5×"}
	l.judge(true, l.ratio <= 1.5)
	e.log.Info("measured", "row", 11, "mcpv2", l.aMed, "baseline", l.bMed)
	return []line{l}, nil
}
