package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// How a side is measured: calls one at a time (latency), calls from many
// callers for a while (throughput), a fixed number of calls, and the
// alternation of the sides of a pair over the rounds.

// sideTimeout bounds one side's round of any row.
const sideTimeout = 2 * time.Minute

// callFunc is one call of a side; worker is the caller's index among those
// running at once.
type callFunc func(ctx context.Context, worker int) error

// warmUp calls for about d with conc callers, at least 3 calls each.
func warmUp(ctx context.Context, conc int, d time.Duration, call callFunc) error {
	_, _, err := throughputRound(ctx, conc, d, 3, call)
	return err
}

// latencyRound warms up, then times calls one at a time for about p.latDur
// (and at least p.latMin calls).
func latencyRound(ctx context.Context, p plan, call callFunc) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, sideTimeout)
	defer cancel()
	if err := warmUp(ctx, 1, p.warm, call); err != nil {
		return nil, err
	}
	var lat []time.Duration
	end := time.Now().Add(p.latDur)
	for len(lat) < p.latMin || time.Now().Before(end) {
		t := time.Now()
		if err := call(ctx, 0); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t))
	}
	return lat, nil
}

// throughputRound runs conc callers for about d, each making at least
// minEach calls, and returns the calls made and the time taken. The first
// error stops every caller and is returned.
func throughputRound(ctx context.Context, conc int, d time.Duration, minEach int, call callFunc) (int64, time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		n    atomic.Int64
		wg   sync.WaitGroup
		stop = time.Now().Add(d)
	)
	start := time.Now()
	for w := range conc {
		wg.Go(func() {
			for i := 0; i < minEach || time.Now().Before(stop); i++ {
				if ctx.Err() != nil {
					return
				}
				if err := call(ctx, w); err != nil {
					cancel(err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return 0, took, err
	}
	return n.Load(), took, nil
}

// alternate runs the sides of a pair for rounds rounds in the order
// A,B,B,A,A,B,… (three sides: A,B,C,C,B,A,…).
func alternate(ctx context.Context, rounds int, sides ...func(round int) error) error {
	for r := range rounds {
		for i := range sides {
			j := i
			if r%2 == 1 {
				j = len(sides) - 1 - i
			}
			if err := ctx.Err(); err != nil {
				return context.Cause(ctx)
			}
			if err := sides[j](r); err != nil {
				return err
			}
		}
	}
	return nil
}

// runCalls makes exactly n calls with conc callers; the first error stops
// them all and is returned.
func runCalls(ctx context.Context, conc, n int, call callFunc) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		left atomic.Int64
		wg   sync.WaitGroup
	)
	left.Store(int64(n))
	for w := range conc {
		wg.Go(func() {
			for left.Add(-1) >= 0 && ctx.Err() == nil {
				if err := call(ctx, w); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}
