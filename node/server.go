package node

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// Stream handling constants of /mcpv2/rpc/1.0.0.
const (
	// rpcService is the resource manager service of the RPC handler.
	rpcService = "mcpv2.rpc"
	// idleTimeout closes a stream that sends no request for this long.
	idleTimeout = 60 * time.Second
	// writeTimeout bounds writing one response.
	writeTimeout = 30 * time.Second
	// streamReserve is the memory reserved for a stream as it opens: its
	// read buffer and one request and one response of up to smallMessage
	// bytes each. Only a larger message reserves its own size, so a call of
	// ordinary size costs the resource manager nothing per frame.
	streamReserve = 64 << 10
	// smallMessage is the largest request or response that rides on the
	// stream's reservation.
	smallMessage = 16 << 10
	// responseBuffer is the capacity a response starts with; a larger one
	// grows as it is written.
	responseBuffer = 4 << 10
	// drainTimeout bounds how long an oversized frame is drained so that
	// the caller can read the error before the stream is reset.
	drainTimeout = 2 * time.Second
)

// track registers a stream handler with the node's WaitGroup; false means
// the node is closing and the handler must not start.
func (n *Node) track() bool {
	n.closeMu.Lock()
	defer n.closeMu.Unlock()
	if n.closed {
		return false
	}
	n.wg.Add(1)
	return true
}

// handleRPC serves one /mcpv2/rpc/1.0.0 stream: any number of request frames,
// each answered in order. It follows go-libp2p's handler order: service
// scope, memory reservation, deadlines, capped reads; Close on success, Reset
// on error. A frame's declared length over smallMessage is reserved in the
// stream's scope before it is read, and a response over it before it is
// written; both are released once the response is out. Smaller ones are
// covered by streamReserve. A request runs with a context that
// is cancelled when the caller resets the stream (a clean half-close is not
// a cancellation: the caller still reads the answer).
func (n *Node) handleRPC(s network.Stream) {
	if !n.track() {
		_ = s.Reset()
		return
	}
	defer n.wg.Done()
	if err := s.Scope().SetService(rpcService); err != nil {
		n.log.Debug("rpc: service scope refused", "err", err)
		_ = s.Reset()
		return
	}
	if err := s.Scope().ReserveMemory(streamReserve, network.ReservationPriorityAlways); err != nil {
		n.log.Debug("rpc: memory refused", "err", err)
		_ = s.Reset()
		return
	}
	defer s.Scope().ReleaseMemory(streamReserve)
	stop := context.AfterFunc(n.ctx, func() { _ = s.Reset() })
	defer stop()

	caller := meshPeer(s.Conn())
	fr := transport.NewFrameReader(s, n.maxMsg)
	// One context for the stream's requests, cancelled when the caller
	// resets the stream (lateWatch), which ends the stream too: a context
	// per request cost every call a registration with n.ctx, under a lock
	// all streams share.
	ctx, cancel := context.WithCancel(n.ctx)
	defer cancel()
	watch := newLateWatch(s, fr, cancel)
	defer watch.stop()
	var dl deadlines
	dl.idle(s, time.Now())
	for {
		size := 0 // the frame's declared length, reserved unless refused
		msg, err := fr.ReadFrameReserve(func(k int) error {
			if k <= smallMessage {
				return nil
			}
			size = k
			return s.Scope().ReserveMemory(k, network.ReservationPriorityMedium)
		})
		if err != nil {
			if !errors.Is(err, transport.ErrReserveRefused) {
				s.Scope().ReleaseMemory(size) // reserved (or 0), but the payload was not read
			}
			n.endRPC(s, caller, err, size)
			return
		}
		watch.arm(time.Now())
		out, _ := n.AppendHandle(ctx, caller, msg, transport.GetBuffer(responseBuffer))
		watched := watch.disarm()
		transport.ReleaseFrame(msg)
		now := time.Now()
		err = n.writeResponse(s, caller, out, &dl, now)
		transport.ReleaseFrame(out)
		s.Scope().ReleaseMemory(size)
		if err != nil {
			n.log.Debug("rpc: write", "peer", caller.ID, "err", err)
			_ = s.Reset() // also ends the watch
		} else {
			if watched != nil {
				dl.read = time.Time{} // the watch cleared the idle deadline
			}
			dl.idle(s, now)
		}
		var werr error
		if watched != nil {
			werr = <-watched
		}
		switch {
		case err != nil:
			return
		case werr != nil:
			n.endRPC(s, caller, werr, 0)
			return
		}
	}
}

// watchDelay is how long a request runs before its stream is watched for
// a reset (lateWatch).
const watchDelay = 10 * time.Millisecond

// lateWatch starts watchReset for a request only once it has run for
// watchDelay. Most calls are answered sooner, and then cost neither a
// goroutine nor the hand-off from it to the handler when the next request
// arrives; a caller that resets its stream still cancels a request that
// runs longer, at most watchDelay late. One lateWatch serves a stream's
// requests in turn; cancel cancels the stream's context (a reset ends the
// stream); mu guards armed, started, pending and watched.
//
// The timer is not set per request: setting a timer to fire before every
// other one the process has pending wakes the runtime's sleeping poller
// thread (or starts another) to take note, a futex or a write on every
// call of a lone caller (strace -c of a node under one call at a time:
// 2.5 writes and 4 futex calls a call, against an echo's 1.3 and 2.8). It
// is set when a request starts and none is pending; when it fires it
// starts the watch if the request then running has run for watchDelay,
// waits out the rest if it has not, and sleeps if the stream is idle. So
// calls in a row set it about once per watchDelay.
type lateWatch struct {
	s      network.Stream
	fr     *transport.FrameReader
	cancel context.CancelFunc
	timer  *time.Timer

	mu      sync.Mutex
	armed   bool      // a request is running
	started time.Time // when it started
	pending bool      // the timer is set
	watched <-chan error
}

func newLateWatch(s network.Stream, fr *transport.FrameReader, cancel context.CancelFunc) *lateWatch {
	w := &lateWatch{s: s, fr: fr, cancel: cancel}
	w.timer = time.AfterFunc(time.Hour, w.fire)
	w.timer.Stop()
	return w
}

// arm marks the start of the request about to run, at now.
func (w *lateWatch) arm(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed, w.started, w.watched = true, now, nil
	if !w.pending {
		w.pending = true
		w.timer.Reset(watchDelay)
	}
}

// fire runs when the timer fires: it starts the watch when the request
// running has run for watchDelay, sets the timer for the rest of it when
// it has not, and lets the timer sleep when no request runs.
func (w *lateWatch) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = false
	if !w.armed || w.watched != nil {
		return
	}
	if left := watchDelay - time.Since(w.started); left > 0 {
		w.pending = true
		w.timer.Reset(left)
		return
	}
	_ = w.s.SetReadDeadline(time.Time{}) // a request may run longer than idleTimeout
	w.watched = watchReset(w.fr, w.cancel)
}

// disarm marks the end of the request, once it has its answer, and returns
// the watch's channel if the watch started (its result must then be
// received before fr is read again), else nil. The timer stays set: the
// next request may use it.
func (w *lateWatch) disarm() <-chan error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = false
	return w.watched
}

// stop ends the watch for good, when the stream's handler returns: a timer
// left set would keep the stream reachable until it fired.
func (w *lateWatch) stop() {
	w.timer.Stop()
	w.mu.Lock()
	w.armed, w.pending = false, false
	w.mu.Unlock()
}

// watchReset watches the stream under fr while a request runs, so that a
// caller that resets it cancels the request: on a reset (or a failure, but
// not a clean half-close) it calls cancel. It reads one byte ahead at most
// and consumes nothing: the returned channel yields [transport.FrameReader.Wait]'s
// result once the next frame has begun to arrive (nil), the stream has
// ended, or the read deadline the handler sets after answering has passed.
// fr must not be read before that, and the handler must receive it before
// returning. The caller sends its next request only after the answer, so
// one stream holds one request in memory at a time.
func watchReset(fr *transport.FrameReader, cancel context.CancelFunc) <-chan error {
	done := make(chan error, 1)
	go func() {
		err := fr.Wait()
		if err != nil && !errors.Is(err, io.EOF) {
			cancel()
		}
		done <- err
	}()
	return done
}

// endRPC ends the stream after err from reading it: a clean end is closed,
// a frame over the cap or whose declared length the scope refused is
// answered with one error (refuseFrame), anything else resets.
func (n *Node) endRPC(s network.Stream, c Caller, err error, declared int) {
	switch {
	case errors.Is(err, io.EOF):
		_ = s.Close()
	case errors.Is(err, transport.ErrFrameTooLarge):
		n.refuseFrame(s, c, protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: message exceeds the %d-byte cap", n.maxMsg))
	case errors.Is(err, transport.ErrReserveRefused):
		n.log.Debug("rpc: memory for request refused", "peer", c.ID, "err", err)
		n.refuseFrame(s, c, protocol.Errorf(protocol.CodeInternal, "resource limit: this peer is too busy for a %d-byte request", declared))
	default:
		n.log.Debug("rpc: read", "peer", c.ID, "err", err)
		_ = s.Reset()
	}
}

// writeResponse writes one response frame (nothing for nil) with its size
// reserved in the stream's scope; when the scope refuses it, the caller
// gets one resource-limit error instead.
func (n *Node) writeResponse(s network.Stream, c Caller, out []byte, dl *deadlines, now time.Time) error {
	if out == nil {
		return nil
	}
	if len(out) > smallMessage { // smaller ones ride on streamReserve
		if err := s.Scope().ReserveMemory(len(out), network.ReservationPriorityMedium); err != nil {
			n.log.Debug("rpc: memory for response refused", "peer", c.ID, "size", len(out), "err", err)
			perr := protocol.Errorf(protocol.CodeInternal, "resource limit: this peer is too busy to send a %d-byte response", len(out))
			n.audit(n.ctx, c, "", "", perr, time.Now())
			out, _ = json.Marshal(protocol.ErrorResponse(nil, perr))
		} else {
			defer s.Scope().ReleaseMemory(len(out))
		}
	}
	dl.writing(s, now)
	return transport.WriteFrame(s, out)
}

// deadlineSlack is how stale a stream's deadline may get before it is
// moved: setting one costs yamux a timer, and a call every few
// microseconds does not need its own.
const deadlineSlack = 5 * time.Second

// deadlines remembers when a stream's read and write deadlines were last
// set, so that each is moved at most once per deadlineSlack: the idle
// timeout is then 55-60 s after the last answer, and a response gets
// 25-30 s to be written.
type deadlines struct{ read, write time.Time }

// idle arms the read deadline of an idle stream, unless it was armed less
// than deadlineSlack ago.
func (d *deadlines) idle(s network.Stream, now time.Time) {
	if now.Sub(d.read) >= deadlineSlack {
		_ = s.SetReadDeadline(now.Add(idleTimeout))
		d.read = now
	}
}

// writing arms the write deadline of a response, unless it was armed less
// than deadlineSlack ago.
func (d *deadlines) writing(s network.Stream, now time.Time) {
	if now.Sub(d.write) >= deadlineSlack {
		_ = s.SetWriteDeadline(now.Add(writeTimeout))
		d.write = now
	}
}

// refuseFrame answers a frame the node will not read (over the cap, or its
// memory refused) with one error, drains (without keeping) what the caller
// is still sending for a short while so the error is not lost to the
// reset, and resets the stream (SPEC §2).
func (n *Node) refuseFrame(s network.Stream, c Caller, perr *protocol.Error) {
	n.audit(n.ctx, c, "", "", perr, time.Now())
	b, _ := json.Marshal(protocol.ErrorResponse(nil, perr))
	_ = s.SetWriteDeadline(time.Now().Add(drainTimeout))
	if err := transport.WriteFrame(s, b); err == nil {
		_ = s.CloseWrite()
		_ = s.SetReadDeadline(time.Now().Add(drainTimeout))
		_, _ = io.CopyN(io.Discard, s, int64(2*n.maxMsg))
	}
	_ = s.Reset()
}
