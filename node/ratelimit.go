package node

import (
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
	ls.mu.Lock()
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
	ls.mu.Unlock()
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
