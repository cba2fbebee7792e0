package mcp

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/protocol"
)

// Stateful MCP sessions (the 2025-11-25 era) are held by their callers
// under the identity rule (edge.Slots, docs/spec.md §0): a face's sessions
// are capped in all, a share is kept for secret holders, a credential
// holds at most sessionsPerOwner (a new one closes the caller's own oldest
// idle session first), and the callers of one IP without the secret hold
// at most a share of the total together.

// sessionsPerOwner is how many sessions one credential may hold at once.
const sessionsPerOwner = 16

// sessionBook knows who holds each stateful session of one face, and
// whether it is in use. mu guards m and closed; it is never held while
// calling into the go-sdk or the Slots. The book owns the timers that
// close the sessions of clients that left (streamEnded): timers counts
// those armed or running, and close stops them and waits.
type sessionBook struct {
	slots     edge.Slots
	goneAfter time.Duration // HTTPOptions.ClientGone
	mu        sync.Mutex
	m         map[string]*heldSession // by Mcp-Session-Id
	closed    bool                    // close ran: no timer is armed any more
	timers    sync.WaitGroup
}

// heldSession is one session in the book.
type heldSession struct {
	owner    string
	holder   string // the caller's Holder: the go-sdk binds the session to it
	priv     bool
	release  func()
	inflight int         // requests of the session being served
	began    time.Time   // when its initialize started
	last     time.Time   // when the last request started
	brokeOff time.Time   // when its client last cut a standing stream (GET)
	gone     *time.Timer // closes the session if its client does not come back; nil when none is armed
}

// heldBy reports whether c holds the session: the same Holder (what the
// go-sdk binds the session to) and the same privilege. A request of
// another caller naming the session is refused by the go-sdk, and must
// not touch the book's entry either.
func (h *heldSession) heldBy(c protocol.Caller) bool {
	return h.holder == c.Holder() && h.priv == edge.Privileged(c)
}

// stopGone disarms h's timer, if one is armed and has not fired. b.mu is
// held.
func (b *sessionBook) stopGone(h *heldSession) {
	if h.gone != nil && h.gone.Stop() {
		b.timers.Done()
	}
	h.gone = nil
}

// DefaultClientGone is how long a session whose client cut its standing
// stream (the GET of server-sent events: its connection closed, as when
// the client's process ends) may go without a new request or stream
// before the face takes the client for gone and closes the session. The
// go-sdk's client reconnects a broken stream at once; a client that never
// opened one is not affected (it ends by DELETE or SessionIdle). Without
// this, a gone client's session stayed until SessionIdle, and each change
// of the files sent it a list_changed that nothing could deliver.
const DefaultClientGone = 10 * time.Second

// streamEnded notes that a standing stream of session id, served to c,
// was cut by its client (its request's context is done, not the
// session's end): the session is closed goneAfter later unless its client
// came back in between. Only the session's holder counts: a stream of
// another caller naming the id is no sign that the holder left.
func (b *sessionBook) streamEnded(f *Face, id string, c protocol.Caller) {
	ended := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.m[id]
	if h == nil || !h.heldBy(c) || b.closed {
		return
	}
	h.brokeOff = ended
	b.stopGone(h)
	b.timers.Add(1)
	h.gone = time.AfterFunc(b.goneAfter, func() {
		defer b.timers.Done()
		if f.ctx.Err() != nil {
			return // the face is closing: it ends every session
		}
		b.mu.Lock()
		h := b.m[id]
		gone := h != nil && h.brokeOff.Equal(ended) && h.inflight == 0 && !h.last.After(ended)
		b.mu.Unlock()
		if gone && f.CloseSession(id) == nil {
			f.log.Debug("mcp: closed the session of a client that left (its stream cut, nothing since)", "owner", h.owner, "after", b.goneAfter)
		}
	})
}

// close stops the book's timers and waits for those already running; no
// timer is armed after it. Face.Close calls it, after cancelling the
// face's context.
func (b *sessionBook) close() {
	b.mu.Lock()
	b.closed = true
	for _, h := range b.m {
		b.stopGone(h)
	}
	b.mu.Unlock()
	b.timers.Wait()
}

// newSessionBook caps a face's sessions at total; a session whose client
// left is closed goneAfter after.
func newSessionBook(total int, goneAfter time.Duration) *sessionBook {
	return &sessionBook{m: map[string]*heldSession{}, goneAfter: goneAfter, slots: edge.Slots{What: "MCP sessions", Total: total,
		Reserved: max(1, total/8), PerOwner: sessionsPerOwner, PerIP: max(sessionsPerOwner, total/16)}}
}

// admit takes a slot for a new session of c on f, closing c's own oldest
// idle session when c's credential (or, for a secret holder, the face)
// holds its most. It returns the release, or nil and the refusal.
func (b *sessionBook) admit(f *Face, c protocol.Caller) (func(), string) {
	b.prune(f)
	ip := edge.ClientIP(c)
	release, why, msg := b.slots.Acquire(c, ip)
	if release == nil && (why == edge.CapOwner || (why == edge.CapTotal && edge.Privileged(c))) {
		if b.evictOldestIdle(f, c) {
			release, _, msg = b.slots.Acquire(c, ip)
		}
	}
	return release, msg
}

// add records the new session id held by c, with the slot release; began
// is when its initialize started (the ranking of a caller's sessions is by
// that, not by when add ran).
func (b *sessionBook) add(id string, c protocol.Caller, release func(), began time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m[id] = &heldSession{owner: c.Owner, holder: c.Holder(), priv: edge.Privileged(c), release: release, began: began, last: began}
}

// begin marks a request of c naming session id in use; end (the result)
// marks it done. An id not in the book, or a session c does not hold (the
// go-sdk refuses that request), is a no-op.
func (b *sessionBook) begin(id string, c protocol.Caller) (end func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.m[id]
	if h == nil || !h.heldBy(c) {
		return func() {}
	}
	h.inflight++
	h.last = time.Now()
	return func() {
		b.mu.Lock()
		h.inflight--
		b.mu.Unlock()
	}
}

// prune drops the sessions that the go-sdk no longer holds (ended by
// DELETE, idle timeout or close), releasing their slots.
func (b *sessionBook) prune(f *Face) {
	live := map[string]bool{}
	for ss := range f.srv.Sessions() {
		live[ss.ID()] = true
	}
	var gone []func()
	b.mu.Lock()
	for id, h := range b.m {
		if !live[id] {
			b.stopGone(h)
			gone = append(gone, h.release)
			delete(b.m, id)
		}
	}
	b.mu.Unlock()
	for _, r := range gone {
		r()
	}
}

// evictOldestIdle closes the session used longest ago, with no request in
// flight, of c's credential (a secret holder: of any secret holder), and
// reports whether it closed one.
func (b *sessionBook) evictOldestIdle(f *Face, c protocol.Caller) bool {
	priv := edge.Privileged(c)
	b.mu.Lock()
	var oldest string
	var when time.Time
	for id, h := range b.m {
		mine := h.owner == c.Owner && h.priv == priv
		if mine && h.inflight == 0 && (oldest == "" || h.last.Before(when)) {
			oldest, when = id, h.last
		}
	}
	h := b.m[oldest]
	delete(b.m, oldest)
	if h != nil {
		b.stopGone(h)
	}
	b.mu.Unlock()
	if oldest == "" {
		return false
	}
	for ss := range f.srv.Sessions() {
		if ss.ID() == oldest {
			_ = ss.Close()
		}
	}
	h.release()
	f.log.Debug("mcp: closed the caller's oldest idle session for a new one", "owner", c.Owner)
	return true
}

// SessionInfo is one stateful MCP session of a face, as the dashboard's
// Access page lists it.
type SessionInfo struct {
	// ID is the Mcp-Session-Id.
	ID string `json:"id"`
	// Owner is the handle of the caller's credential (protocol.Caller.Owner).
	Owner string `json:"owner"`
	// Privileged says a secret holder holds it.
	Privileged bool `json:"privileged"`
	// Started is when its initialize started; LastUsed when its last
	// request did.
	Started  time.Time `json:"started"`
	LastUsed time.Time `json:"last_used"`
	// InFlight counts its requests being served now.
	InFlight int `json:"in_flight"`
}

// Sessions lists the face's stateful sessions (those of the 2025-11-25
// era, which the go-sdk keeps), the one used most recently first; none
// before Mount.
func (f *Face) Sessions() []SessionInfo {
	out := []SessionInfo{}
	if f.http == nil {
		return out
	}
	b := f.http.book
	b.prune(f)
	b.mu.Lock()
	for id, h := range b.m {
		out = append(out, SessionInfo{ID: id, Owner: h.owner, Privileged: h.priv, Started: h.began, LastUsed: h.last, InFlight: h.inflight})
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(x, y SessionInfo) int { return y.LastUsed.Compare(x.LastUsed) })
	return out
}

// ErrNoSession is returned by CloseSession for an id the face does not
// hold.
var ErrNoSession = errors.New("no such MCP session")

// CloseSession ends the stateful session id: its client's next request
// gets 404 and must initialize again.
func (f *Face) CloseSession(id string) error {
	if f.http == nil {
		return ErrNoSession
	}
	for ss := range f.srv.Sessions() {
		if ss.ID() == id {
			err := ss.Close()
			f.http.book.prune(f)
			return err
		}
	}
	return fmt.Errorf("%w: %q", ErrNoSession, protocol.Clip(id, 80))
}

// serveStateful serves a request of the 2025-11-25 era: a new session only
// within the caps, each request of a session marked in use.
func (f *Face) serveStateful(w *statusWriter, r *http.Request, c protocol.Caller) {
	h := f.http
	id := r.Header.Get("Mcp-Session-Id")
	if id != "" || r.Method != http.MethodPost {
		defer h.book.begin(id, c)()
		if r.Method == http.MethodGet && id != "" {
			// The standing stream, where the face writes the status
			// notifications of the session's tasks.
			f.notes.stream(id, w, func(sw http.ResponseWriter) { h.stateful.ServeHTTP(sw, withHTTPCaller(r, c)) })
		} else {
			h.stateful.ServeHTTP(w, withHTTPCaller(r, c))
		}
		// A stream the go-sdk served (not one it refused: another
		// caller's session 403, an unknown one 404, a second stream 409)
		// that its client cut.
		if r.Method == http.MethodGet && id != "" && w.status == http.StatusOK && r.Context().Err() != nil {
			h.book.streamEnded(f, id, c)
		}
		return
	}
	release, msg := h.book.admit(f, c)
	if release == nil {
		w.Header().Set("Retry-After", "60")
		h.e.Refuse(w, r, http.StatusServiceUnavailable, protocol.Errorf(protocol.CodeRateLimited,
			"%s (or speak MCP 2026-07-28, which needs no session)", msg))
		return
	}
	began, added := time.Now(), false
	// The session goes into the book before the answer's header leaves:
	// the go-sdk may keep the handler running after the client has its
	// session and uses it, and the book must know it by then.
	w.onHeader = func(status int) {
		if nid := w.Header().Get("Mcp-Session-Id"); nid != "" && status < 400 {
			h.book.add(nid, c, release, began)
			added = true
		}
	}
	h.stateful.ServeHTTP(w, withHTTPCaller(r, c))
	w.onHeader = nil
	if added {
		h.book.prune(f) // an initialize that failed has closed its session
		return
	}
	release()
}
