package node

import (
	"context"
	"encoding/json"
	"errors"
	"io"
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
	// streamReserve is the memory reserved for a stream's buffers.
	streamReserve = 64 << 10
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
// on error. Each frame's declared length is reserved in the stream's scope
// before it is read, and each response's size before it is written; both
// are released once the response is out. A request runs with a context that
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

	caller := Caller{ID: s.Conn().RemotePeer().String(), Via: "mesh", Remote: s.Conn().RemoteMultiaddr().String(), Kind: protocol.CallerPeer}
	rd := n.startFrameReader(s)
	defer rd.close() // after the Reset or Close below: it unblocks the reader
	for {
		f := <-rd.frames
		if f.err != nil {
			s.Scope().ReleaseMemory(f.size) // reserved, but the payload was not read
		}
		switch {
		case f.err == nil:
		case errors.Is(f.err, io.EOF):
			_ = s.Close()
			return
		case errors.Is(f.err, transport.ErrFrameTooLarge):
			n.refuseFrame(s, caller, protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: message exceeds the %d-byte cap", n.maxMsg))
			return
		case errors.Is(f.err, transport.ErrReserveRefused):
			n.log.Debug("rpc: memory for request refused", "peer", caller.ID, "err", f.err)
			n.refuseFrame(s, caller, protocol.Errorf(protocol.CodeInternal, "resource limit: this peer is too busy for a %d-byte request", f.declared))
			return
		default:
			n.log.Debug("rpc: read", "peer", caller.ID, "err", f.err)
			_ = s.Reset()
			return
		}
		out, _ := n.Handle(f.ctx, caller, f.msg)
		f.msg = nil
		err := n.writeResponse(s, caller, out)
		s.Scope().ReleaseMemory(f.size)
		if err != nil {
			n.log.Debug("rpc: write", "peer", caller.ID, "err", err)
			_ = s.Reset()
			return
		}
		_ = s.SetReadDeadline(time.Now().Add(idleTimeout))
		rd.done <- struct{}{}
	}
}

// writeResponse writes one response frame (nothing for nil) with its size
// reserved in the stream's scope; when the scope refuses it, the caller
// gets one resource-limit error instead.
func (n *Node) writeResponse(s network.Stream, c Caller, out []byte) error {
	if out == nil {
		return nil
	}
	if err := s.Scope().ReserveMemory(len(out), network.ReservationPriorityMedium); err != nil {
		n.log.Debug("rpc: memory for response refused", "peer", c.ID, "size", len(out), "err", err)
		perr := protocol.Errorf(protocol.CodeInternal, "resource limit: this peer is too busy to send a %d-byte response", len(out))
		n.audit(c, "", "", perr, time.Now())
		out, _ = json.Marshal(protocol.ErrorResponse(nil, perr))
	} else {
		defer s.Scope().ReleaseMemory(len(out))
	}
	_ = s.SetWriteDeadline(time.Now().Add(writeTimeout))
	return transport.WriteFrame(s, out)
}

// rpcFrame is one frame read from a stream, or the error that ended it.
type rpcFrame struct {
	msg []byte
	// size is the memory reserved for msg in the stream's scope; the
	// handler releases it (also with an error, when the payload was
	// reserved but not read).
	size int
	// declared is the frame's declared length, once its prefix was read.
	declared int
	// ctx is the request's context, cancelled when the caller resets the
	// stream while the request runs, or when the node closes.
	ctx context.Context
	err error
}

// frameReader owns the goroutine that reads a stream's frames for
// handleRPC. After handing over a frame it keeps reading the stream, one
// byte ahead at most, so that a reset while the request runs cancels the
// request's context; it reads the next frame only once the handler is done
// with the last, so a stream holds one request in memory at a time.
type frameReader struct {
	frames chan rpcFrame // to the handler; after an error, nothing more
	done   chan struct{} // from the handler: the last frame is answered
	quit   chan struct{} // closed by close: the handler has returned
	exited chan struct{} // closed when the goroutine has returned
}

func (n *Node) startFrameReader(s network.Stream) *frameReader {
	rd := &frameReader{
		frames: make(chan rpcFrame),
		done:   make(chan struct{}, 1),
		quit:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	go rd.run(n.ctx, s, transport.NewFrameReader(s, n.maxMsg))
	return rd
}

// close stops the goroutine and waits for it. The handler has reset or
// closed the stream first, so a read in progress returns.
func (rd *frameReader) close() {
	close(rd.quit)
	<-rd.exited
}

func (rd *frameReader) run(parent context.Context, s network.Stream, fr *transport.FrameReader) {
	defer close(rd.exited)
	_ = s.SetReadDeadline(time.Now().Add(idleTimeout))
	for {
		size, declared := 0, 0
		msg, err := fr.ReadFrameReserve(func(k int) error {
			declared = k
			if err := s.Scope().ReserveMemory(k, network.ReservationPriorityMedium); err != nil {
				return err
			}
			size = k
			return nil
		})
		if err != nil {
			rd.send(s, rpcFrame{size: size, declared: declared, err: err})
			return
		}
		_ = s.SetReadDeadline(time.Time{}) // a request may run longer than idleTimeout
		ctx, cancel := context.WithCancel(parent)
		if !rd.send(s, rpcFrame{msg: msg, size: size, ctx: ctx}) {
			cancel()
			return
		}
		msg = nil
		// Watch the stream while the request runs. The caller sends its
		// next request only after the answer, so this usually returns only
		// then, or at the idle deadline the handler sets after answering.
		werr := fr.Wait()
		if werr != nil && !errors.Is(werr, io.EOF) {
			cancel() // reset (or failed) while the request may still run
		}
		select {
		case <-rd.done:
		case <-rd.quit:
			cancel()
			return
		}
		cancel()
		if werr != nil {
			rd.send(s, rpcFrame{err: werr})
			return
		}
	}
}

// send hands f to the handler; false when the handler has returned, in
// which case f's reservation is released here.
func (rd *frameReader) send(s network.Stream, f rpcFrame) bool {
	select {
	case rd.frames <- f:
		return true
	case <-rd.quit:
		s.Scope().ReleaseMemory(f.size)
		return false
	}
}

// refuseFrame answers a frame the node will not read (over the cap, or its
// memory refused) with one error, drains (without keeping) what the caller
// is still sending for a short while so the error is not lost to the
// reset, and resets the stream (SPEC §2).
func (n *Node) refuseFrame(s network.Stream, c Caller, perr *protocol.Error) {
	n.audit(c, "", "", perr, time.Now())
	b, _ := json.Marshal(protocol.ErrorResponse(nil, perr))
	_ = s.SetWriteDeadline(time.Now().Add(drainTimeout))
	if err := transport.WriteFrame(s, b); err == nil {
		_ = s.CloseWrite()
		_ = s.SetReadDeadline(time.Now().Add(drainTimeout))
		_, _ = io.CopyN(io.Discard, s, int64(2*n.maxMsg))
	}
	_ = s.Reset()
}
