package node

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiters keeps one token bucket per caller. It sweeps idle buckets lazily
// on insert, so it starts no goroutine. mu guards m and inserts.
type limiters struct {
	rps   rate.Limit
	burst int

	// idle is how long an unused bucket is kept: limiterIdle, or longer
	// when the bucket takes longer to refill (a limit of N per hour), so
	// that dropping it never hands back a full burst early.
	idle time.Duration

	mu      sync.Mutex
	m       map[string]*limiterEntry
	inserts int
}

type limiterEntry struct {
	l    *rate.Limiter
	last time.Time
}

// limiterIdle is how long an unused bucket is kept.
const limiterIdle = 10 * time.Minute

func newLimiters(rps float64, burst int) *limiters {
	if burst < 1 {
		burst = 1
	}
	idle := limiterIdle
	if rps > 0 {
		idle = max(idle, time.Duration(float64(burst)/rps*float64(time.Second)))
	}
	return &limiters{rps: rate.Limit(rps), burst: burst, idle: idle, m: map[string]*limiterEntry{}}
}

// allow takes n tokens from key's bucket. When it cannot, it returns false and
// how long until n tokens would be there.
func (ls *limiters) allow(key string, n int, now time.Time) (bool, time.Duration) {
	if ls.rps <= 0 {
		return true, 0
	}
	e := ls.entry(key, now)
	if n > ls.burst {
		n = ls.burst
	}
	r := e.l.ReserveN(now, n)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// entry returns key's bucket, made when there is none, marked used at now.
func (ls *limiters) entry(key string, now time.Time) *limiterEntry {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	e, ok := ls.m[key]
	if !ok {
		ls.inserts++
		if ls.inserts%1024 == 0 {
			for k, v := range ls.m {
				if now.Sub(v.last) > ls.idle {
					delete(ls.m, k)
				}
			}
		}
		e = &limiterEntry{l: rate.NewLimiter(ls.rps, ls.burst)}
		ls.m[key] = e
	}
	e.last = now
	return e
}

// DefaultFindRate is Config.FindRate's default: the finds per second of
// one caller's orchestrations, as the edge allows one client IP on GET
// /mcpv2/find (edge.DefaultFindRateLimit).
const DefaultFindRate = 2

// maxFindWait is how long one find of an orchestration waits for its turn
// in the caller's find budget; a find that would wait longer is refused
// (-32005), so that a plan of many finds fails fast instead of hanging.
const maxFindWait = 2 * time.Second

// newFindLimiters returns the per-caller find budget of rate finds per
// second (0: DefaultFindRate; negative: none), with a burst of the rate
// rounded up, as the edge's.
func newFindLimiters(rate float64) *limiters {
	if rate == 0 {
		rate = DefaultFindRate
	}
	if rate < 0 {
		return newLimiters(0, 1) // rps 0: allow and wait always pass
	}
	return newLimiters(rate, int(math.Ceil(rate)))
}

// wait takes one token from key's bucket, waiting for it when it comes
// within maxWait (or ctx's end, whichever is first). When it does not, it
// takes nothing and returns false and how long until a token would be
// there; when ctx ends first, ctx's error.
func (ls *limiters) wait(ctx context.Context, key string, maxWait time.Duration, now time.Time) (bool, time.Duration, error) {
	if ls.rps <= 0 {
		return true, 0, nil
	}
	e := ls.entry(key, now)
	r := e.l.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if !r.OK() || d > maxWait {
		r.CancelAt(now)
		return false, d, nil
	}
	if d <= 0 {
		return true, 0, nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true, 0, nil
	case <-ctx.Done():
		r.Cancel()
		return false, 0, ctx.Err()
	}
}
