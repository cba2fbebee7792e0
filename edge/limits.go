package edge

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiterSet keeps one token bucket per key (a session nonce, a client IP).
// A bucket is as full as a new one after it has been idle long enough, so a
// sweep on every sweepEvery-th insert drops full buckets without changing any
// answer; it starts no goroutine. mu guards m and inserts.
type limiterSet struct {
	limit rate.Limit
	burst int
	off   bool

	mu      sync.Mutex
	m       map[string]*rate.Limiter
	inserts int
}

// sweepEvery is how many inserts pass between sweeps of full buckets.
const sweepEvery = 1024

// newLimiterSet returns buckets of perSecond tokens per second and a burst
// of the same size (at least 1): up to perSecond requests within any second.
// A negative perSecond turns the limit off.
func newLimiterSet(perSecond float64) *limiterSet {
	if perSecond < 0 {
		return &limiterSet{off: true}
	}
	burst := int(math.Ceil(perSecond))
	if burst < 1 {
		burst = 1
	}
	return &limiterSet{limit: rate.Limit(perSecond), burst: burst, m: map[string]*rate.Limiter{}}
}

// allow takes one token from key's bucket at now. When there is none it
// takes nothing and returns false and how long until one is there.
func (ls *limiterSet) allow(key string, now time.Time) (bool, time.Duration) {
	if ls.off {
		return true, 0
	}
	ls.mu.Lock()
	l, ok := ls.m[key]
	if !ok {
		ls.inserts++
		if ls.inserts%sweepEvery == 0 {
			for k, v := range ls.m {
				if v.TokensAt(now) >= float64(ls.burst) {
					delete(ls.m, k)
				}
			}
		}
		l = rate.NewLimiter(ls.limit, ls.burst)
		ls.m[key] = l
	}
	ls.mu.Unlock()
	r := l.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// size returns the number of buckets kept, for tests.
func (ls *limiterSet) size() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.m)
}

// retryAfterSeconds is the Retry-After value for a wait: whole seconds,
// rounded up, at least 1.
func retryAfterSeconds(d time.Duration) int {
	s := int(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}

// KeyedLimiter is the edge's token buckets per key (the ones it keeps per
// session and per client IP), for a face that authenticates its callers
// itself: A2A over libp2p keeps one per PeerID. Safe for concurrent use;
// it starts no goroutine.
type KeyedLimiter struct{ ls *limiterSet }

// NewKeyedLimiter returns buckets of perSecond tokens per second and a
// burst of the same size (at least 1), as Config.RateLimit's; a negative
// perSecond turns the limit off.
func NewKeyedLimiter(perSecond float64) *KeyedLimiter {
	return &KeyedLimiter{ls: newLimiterSet(perSecond)}
}

// Allow takes one token from key's bucket at now. When there is none it
// takes nothing and returns false and the whole seconds (at least 1) until
// one is there, a Retry-After value.
func (k *KeyedLimiter) Allow(key string, now time.Time) (ok bool, retryAfter int) {
	ok, wait := k.ls.allow(key, now)
	if ok {
		return true, 0
	}
	return false, retryAfterSeconds(wait)
}
