package edge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/mcpv2/mcpv2/protocol"
)

// Caps of a Cache of peer faces.
const (
	// DefaultFacesPerIP is how many faces the callers of one client IP
	// may have made and still in a Cache at once (Cache.MaxPerIP's
	// default); past it their oldest idle face is dropped, and when every
	// one of theirs is busy a new one is refused (429).
	DefaultFacesPerIP = 8
	// peerReachTimeout bounds the check that a peer answers before its
	// face is made.
	peerReachTimeout = 10 * time.Second
	// facesRetryAfter is the Retry-After of a face refused for the caps.
	facesRetryAfter = 5 * time.Second
)

// Errors of Cache.Acquire.
var (
	// ErrFacesBusy is returned when the Cache is full and every value in
	// it is busy (or, for a caller with an owner, every value of the
	// share such callers may fill): nothing can be dropped to make room.
	ErrFacesBusy = errors.New("edge: every peer face is busy")
	// ErrFacesPerIP is returned when the owner has MaxPerIP values in the
	// Cache and every one of them is busy.
	ErrFacesPerIP = errors.New("edge: the faces of this client IP are at their cap")
)

// BusyCloser is what a Cache keeps: a face of a mesh peer, which says
// whether someone uses it. A busy value is never dropped to make room.
type BusyCloser interface {
	io.Closer
	// Busy reports whether the value holds what a client would lose if it
	// were closed now: an MCP session, a running A2A task. It is called
	// with the Cache's lock held, so it must not call back into the Cache.
	Busy() bool
}

// Cache keeps the faces of mesh peers by PeerID, at most Max of them, each
// made on first use by New. A value is in use while a request holds it
// (Acquire until release: standing streams included) or while it reports
// Busy; only a value in neither state is dropped (closed) to make room,
// the one used longest ago first. When none can be dropped the new one is
// refused (ErrFacesBusy), never a busy one closed.
//
// Each value is owned by the client IP whose request made it; the values
// of one owner are capped at MaxPerIP (that owner's own oldest idle value
// is dropped first), and values with an owner fill at most Max−Reserved
// places, so that callers without one (secret holders) keep a share no
// crowd of anonymous callers can take.
//
// Safe for concurrent use; mu guards m, seq and closed. New and Busy run
// with mu held, so they must not call back into the Cache; Close runs
// without it.
type Cache[V BusyCloser] struct {
	// Max caps the values kept (at least 1).
	Max int
	// MaxPerIP caps the values one owner made (0: DefaultFacesPerIP).
	MaxPerIP int
	// Reserved is how many of the Max places only values without an owner
	// may fill (0: none).
	Reserved int
	// New makes key's value.
	New func(key string) V

	mu     sync.Mutex
	m      map[string]*cacheEntry[V]
	seq    uint64 // counts uses, for least-recently-used order
	closed bool
}

type cacheEntry[V BusyCloser] struct {
	v     V
	owner string // the client IP that made it; "" for none
	inUse int    // requests holding it (Acquire, not yet released)
	last  uint64 // c.seq at its last use
}

// Acquire returns key's value, held (not dropped) until release is
// called, which the caller must call once when its request ends. A value
// not yet in the Cache is made only when reach, if not nil, returns nil:
// its error is returned as it is, and nothing is made. owner is the client
// IP the caps apply to, "" for a caller they do not apply to. It returns
// ErrFacesPerIP or ErrFacesBusy when no place can be made, and
// net.ErrClosed after Close.
func (c *Cache[V]) Acquire(ctx context.Context, key, owner string, reach func(context.Context) error) (v V, release func(), err error) {
	if e, ok := c.hold(key); ok {
		return e.v, c.releaser(e), nil
	} else if c.isClosed() {
		return v, nil, net.ErrClosed
	}
	if reach != nil {
		if err := reach(ctx); err != nil {
			return v, nil, err
		}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return v, nil, net.ErrClosed
	}
	if e, ok := c.m[key]; ok { // made by a request that reached it too
		c.use(e)
		c.mu.Unlock()
		return e.v, c.releaser(e), nil
	}
	drop, dropped, err := c.makeRoom(owner)
	var e *cacheEntry[V]
	if err == nil {
		e = &cacheEntry[V]{v: c.New(key), owner: owner}
		if c.m == nil {
			c.m = map[string]*cacheEntry[V]{}
		}
		c.m[key] = e
		c.use(e)
	}
	c.mu.Unlock()
	if dropped {
		_ = drop.Close()
	}
	if err != nil {
		return v, nil, err
	}
	return e.v, c.releaser(e), nil
}

// hold takes key's entry, if there is one.
func (c *Cache[V]) hold(key string) (*cacheEntry[V], bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if ok {
		c.use(e)
	}
	return e, ok
}

func (c *Cache[V]) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// use marks e used and held. mu is held.
func (c *Cache[V]) use(e *cacheEntry[V]) {
	c.seq++
	e.last = c.seq
	e.inUse++
}

func (c *Cache[V]) releaser(e *cacheEntry[V]) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			e.inUse--
		})
	}
}

// makeRoom removes from m the value that must go for one more of owner
// and returns it (dropped), to be closed once mu is released; dropped is
// false when there is room. mu is held.
func (c *Cache[V]) makeRoom(owner string) (drop V, dropped bool, err error) {
	if owner != "" {
		_, perIP := c.caps()
		mine := c.count(func(e *cacheEntry[V]) bool { return e.owner == owner })
		if mine >= perIP {
			if drop, dropped = c.dropIdle(func(e *cacheEntry[V]) bool { return e.owner == owner }); !dropped {
				err = ErrFacesPerIP
			}
			return drop, dropped, err
		}
		if owned := c.count(func(e *cacheEntry[V]) bool { return e.owner != "" }); owned >= max(c.Max-c.Reserved, 1) {
			if drop, dropped = c.dropIdle(func(e *cacheEntry[V]) bool { return e.owner != "" }); !dropped {
				err = ErrFacesBusy
			}
			return drop, dropped, err
		}
	}
	if len(c.m) >= max(c.Max, 1) {
		if drop, dropped = c.dropIdle(func(*cacheEntry[V]) bool { return true }); !dropped {
			err = ErrFacesBusy
		}
	}
	return drop, dropped, err
}

func (c *Cache[V]) count(match func(*cacheEntry[V]) bool) int {
	n := 0
	for _, e := range c.m {
		if match(e) {
			n++
		}
	}
	return n
}

// dropIdle removes the least recently used entry that match accepts and
// that is neither held nor busy, and returns its value. mu is held.
func (c *Cache[V]) dropIdle(match func(*cacheEntry[V]) bool) (V, bool) {
	var (
		oldest string
		found  *cacheEntry[V]
	)
	for k, e := range c.m {
		if !match(e) || e.inUse > 0 || (found != nil && e.last > found.last) || e.v.Busy() {
			continue
		}
		oldest, found = k, e
	}
	if found == nil {
		var zero V
		return zero, false
	}
	delete(c.m, oldest)
	return found.v, true
}

// Len returns how many values the Cache keeps.
func (c *Cache[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// Close closes every value and empties the cache, returning the values'
// Close errors joined; later Acquires fail with net.ErrClosed. It is
// idempotent: a second call returns net.ErrClosed.
func (c *Cache[V]) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return net.ErrClosed
	}
	m := c.m
	c.m, c.closed = nil, true
	c.mu.Unlock()
	var errs []error
	for _, e := range m {
		errs = append(errs, e.v.Close())
	}
	return errors.Join(errs...)
}

// Serve returns the handler of peer's face in c, for PeerFace's forPeer:
// it acquires the face for the request (made when the peer answers the
// node, see Acquire), serves it with serve, and releases it when serve
// returns. A caller who is not a secret holder is capped by its client
// IP. A peer that does not answer is refused 502 (the reason goes to the
// log, not to the caller), the caps 429 and 503 with Retry-After.
func (c *Cache[V]) Serve(s *Server, peer string, serve func(V, http.ResponseWriter, *http.Request, protocol.Caller)) func(http.ResponseWriter, *http.Request, protocol.Caller) {
	return func(w http.ResponseWriter, r *http.Request, caller protocol.Caller) {
		owner := clientIP(r.RemoteAddr)
		if caller.Kind == protocol.CallerSecretHolder {
			owner = ""
		}
		v, release, err := c.Acquire(r.Context(), peer, owner, func(ctx context.Context) error {
			return s.reachPeer(ctx, caller, peer)
		})
		if err != nil {
			maxFaces, perIP := c.caps()
			s.refuseFace(w, r, peer, maxFaces, perIP, err)
			return
		}
		defer release()
		serve(v, w, r, caller)
	}
}

// unreachable is reachPeer's error: the peer did not answer; err, the
// Forward's, is kept for PeerUnreachable's reason and never shown.
type unreachable struct{ err error }

func (u *unreachable) Error() string { return "edge: the peer did not answer" }
func (u *unreachable) Unwrap() error { return u.err }

// reachPeer checks that peer answers the node (its agent/card, forwarded
// as c, under peerReachTimeout) before a face is made for it.
func (s *Server) reachPeer(ctx context.Context, c protocol.Caller, peer string) error {
	ctx, cancel := context.WithTimeout(ctx, peerReachTimeout)
	defer cancel()
	out, err := s.b.Forward(protocol.Uncounted(ctx), c, peer, []byte(`{"jsonrpc":"2.0","id":1,"method":"`+protocol.MethodAgentCard+`"}`))
	if err == nil && len(out) > 0 {
		return nil
	}
	s.log.Debug("peer face: the peer did not answer", "peer", peer, "err", err)
	return &unreachable{err}
}

// refuseFace answers a request for a peer face that Acquire refused.
func (s *Server) refuseFace(w http.ResponseWriter, r *http.Request, peer string, maxFaces, perIP int, err error) {
	retry := func() {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(facesRetryAfter)))
	}
	data := map[string]int64{"retry_after_ms": facesRetryAfter.Milliseconds()}
	var u *unreachable
	switch {
	case errors.As(err, &u):
		// The gateway's answer, whatever the dial found (issue 18).
		s.Refuse(w, r, http.StatusBadGateway, PeerUnreachable(peer, u.err))
	case errors.Is(err, ErrFacesPerIP):
		retry()
		s.Refuse(w, r, http.StatusTooManyRequests, &protocol.Error{Code: protocol.CodeRateLimited, Data: data,
			Message: fmt.Sprintf("rate limited: the callers of your IP address have %d peer faces here, in use, the most one IP may; end a session or task on one, or retry later", perIP)})
	case errors.Is(err, ErrFacesBusy):
		retry()
		s.Refuse(w, r, http.StatusServiceUnavailable, &protocol.Error{Code: protocol.CodeRateLimited, Data: data,
			Message: fmt.Sprintf("busy: this edge serves %d peer faces, each in use, its most; retry later", maxFaces)})
	case r.Context().Err() != nil:
		s.Refuse(w, r, http.StatusGatewayTimeout, protocol.Errorf(protocol.CodeInternal, "peer %s was not reached before the request ended", peer))
	default:
		retry()
		s.Refuse(w, r, http.StatusServiceUnavailable, protocol.Errorf(protocol.CodeInternal, "internal error: the edge is stopping"))
	}
}

// caps returns Max and the per-IP cap in effect.
func (c *Cache[V]) caps() (int, int) {
	perIP := c.MaxPerIP
	if perIP <= 0 {
		perIP = DefaultFacesPerIP
	}
	return c.Max, perIP
}

// decodes reports whether s decodes as a libp2p PeerID.
func decodes(s string) bool {
	_, err := peer.Decode(s)
	return err == nil
}
