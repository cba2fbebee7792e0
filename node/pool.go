package node

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// Client-side streams.
const (
	// maxStreamsPerPeer bounds the RPC streams open to one peer, in use and
	// idle together; more calls at once wait for one of them. It stays
	// below the 64 a node accepts from one peer (node.go), so that streams
	// this client has closed but the peer has not yet reaped never take it
	// over its cap, which it would answer with resets.
	maxStreamsPerPeer = 48
	// idleKeep is how long an idle stream is reused; below the server's 60 s
	// idle timeout so that a reused stream is never one the server closed.
	idleKeep = 45 * time.Second
)

// pooledStream is a client RPC stream with its frame reader. One call uses
// it at a time (the pool hands it to one); mu guards busy and cut, which
// the cancellation hook reads from its own goroutine.
type pooledStream struct {
	s    network.Stream
	fr   *transport.FrameReader
	last time.Time
	// deadline is the deadline the stream carries (zero: none), the last
	// call's (exchange).
	deadline time.Time
	// hookCtx is the context whose end cuts the call on this stream short
	// (the last call's), and stopHook deregisters that hook (nil: none).
	// Calls in a row under one context share the hook: registering one
	// per call cost two allocations and an insert and a delete in the
	// context's map of children, under its lock, which every call in
	// flight under that context takes.
	hookCtx  context.Context
	stopHook func() bool

	mu sync.Mutex
	// busy is the context of the call in progress, nil between calls: a
	// hook cuts the stream only during a call of its own context.
	busy context.Context
	// cut is set by a hook that cut the call in progress: the stream then
	// carries a past deadline and is not reused.
	cut bool
}

// watch makes the end of ctx cut the call about to run on the stream
// short (a past deadline), reusing the hook of the previous call when it
// had the same context. It reports false, and the call must not start,
// when ctx has already ended.
func (ps *pooledStream) watch(ctx context.Context) bool {
	ps.mu.Lock()
	ps.busy, ps.cut = ctx, false
	ps.mu.Unlock()
	if ps.hookCtx != ctx {
		ps.unwatch()
		if ctx.Done() != nil { // a context that cannot end needs no hook
			ps.hookCtx = ctx
			ps.stopHook = context.AfterFunc(ctx, func() {
				ps.mu.Lock()
				defer ps.mu.Unlock()
				if ps.busy == ctx {
					_ = ps.s.SetDeadline(time.Unix(1, 0))
					ps.cut = true
				}
			})
		}
	}
	// After busy is set: a hook that ran before it found the stream idle,
	// and then ctx's error is already set.
	return ctx.Err() == nil
}

// done ends the call's watch and reports whether the stream is fit for
// another call: false when the hook cut it.
func (ps *pooledStream) done() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.busy = nil
	return !ps.cut
}

// unwatch deregisters the stream's hook, if any: before another context's
// hook replaces it, and when the stream is closed (a hook kept past that
// would keep the stream reachable from its context).
func (ps *pooledStream) unwatch() {
	if ps.stopHook != nil {
		ps.stopHook()
	}
	ps.hookCtx, ps.stopHook = nil, nil
}

// peerStreams are the client's streams to one peer.
type peerStreams struct {
	idle []*pooledStream
	// open counts the streams to the peer, idle and in use.
	open int
	// wake is closed (and replaced) when a stream goes back to idle or is
	// gone, to wake the calls waiting for one; waiting counts them.
	wake    chan struct{}
	waiting int
}

// streamPool keeps the client's streams per peer: consecutive calls reuse
// an idle stream (and its connection), at most maxStreamsPerPeer are open
// to a peer, and a call beyond that waits for one. mu guards peers and
// closed.
type streamPool struct {
	h      host.Host
	now    func() time.Time // the Client's clock
	mu     sync.Mutex
	peers  map[peer.ID]*peerStreams
	closed bool
}

// newStreamPool returns an empty pool of streams from h; now is the clock
// that ages idle streams.
func newStreamPool(h host.Host, now func() time.Time) *streamPool {
	return &streamPool{h: h, now: now, peers: map[peer.ID]*peerStreams{}}
}

// get returns an idle stream to pid (reused true) or opens a new one,
// waiting while maxStreamsPerPeer are in use. The stream goes back with put
// or away with discard.
func (p *streamPool) get(ctx context.Context, pid peer.ID, maxMsg int) (*pooledStream, bool, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, false, net.ErrClosed
		}
		ps := p.peers[pid]
		if ps == nil {
			ps = &peerStreams{wake: make(chan struct{})}
			p.peers[pid] = ps
		}
		now := p.now()
		for len(ps.idle) > 0 {
			s := ps.idle[len(ps.idle)-1]
			ps.idle = ps.idle[:len(ps.idle)-1]
			if now.Sub(s.last) < idleKeep {
				p.mu.Unlock()
				return s, true, nil
			}
			s.unwatch()
			_ = s.s.Close()
			ps.open--
		}
		if ps.open < maxStreamsPerPeer {
			ps.open++
			p.mu.Unlock()
			s, err := p.h.NewStream(network.WithAllowLimitedConn(ctx, "mcpv2 rpc"), pid, libp2pproto.ID(protocol.RPCProtocolID))
			if err != nil {
				p.gone(pid)
				return nil, false, err
			}
			return &pooledStream{s: s, fr: transport.NewFrameReader(s, maxMsg)}, false, nil
		}
		wake := ps.wake
		ps.waiting++
		p.mu.Unlock()
		var err error
		select {
		case <-wake:
		case <-ctx.Done():
			err = fmt.Errorf("waiting for one of the %d streams in use: %w", maxStreamsPerPeer, ctx.Err())
		}
		p.mu.Lock()
		ps.waiting--
		p.mu.Unlock()
		if err != nil {
			return nil, false, err
		}
	}
}

// put returns a healthy stream to the pool (closes it once the pool is
// closed).
func (p *streamPool) put(pid peer.ID, s *pooledStream) {
	s.last = p.now()
	p.mu.Lock()
	if ps := p.peers[pid]; !p.closed && ps != nil {
		ps.idle = append(ps.idle, s)
		ps.signal()
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.discard(pid, s, false)
}

// discard ends a stream from get that does not go back: reset after a
// failure, else closed.
func (p *streamPool) discard(pid peer.ID, s *pooledStream, reset bool) {
	s.unwatch()
	if reset {
		_ = s.s.Reset()
	} else {
		_ = s.s.Close()
	}
	p.gone(pid)
}

// gone uncounts a stream to pid that is no more.
func (p *streamPool) gone(pid peer.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.peers[pid]
	if ps == nil {
		return
	}
	ps.open--
	ps.signal()
	if ps.open <= 0 && len(ps.idle) == 0 {
		delete(p.peers, pid) // the map holds only peers with streams
	}
}

// signal wakes the calls waiting for a stream, if any; under
// streamPool.mu.
func (ps *peerStreams) signal() {
	if ps.waiting > 0 {
		close(ps.wake)
		ps.wake = make(chan struct{})
	}
}

// closeAll closes the idle streams; the streams in use are closed as they
// come back (put).
func (p *streamPool) closeAll() {
	p.mu.Lock()
	p.closed = true
	var idle []*pooledStream
	for pid, ps := range p.peers {
		idle = append(idle, ps.idle...)
		ps.open -= len(ps.idle)
		ps.idle = nil
		if ps.open <= 0 {
			delete(p.peers, pid)
		}
	}
	p.mu.Unlock()
	for _, s := range idle {
		s.unwatch()
		_ = s.s.Close()
	}
}
