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
// on error.
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

	caller := Caller{ID: s.Conn().RemotePeer().String(), Via: "mesh", Remote: s.Conn().RemoteMultiaddr().String()}
	fr := transport.NewFrameReader(s, n.maxMsg)
	for {
		_ = s.SetReadDeadline(time.Now().Add(idleTimeout))
		msg, err := fr.ReadFrame()
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			_ = s.Close()
			return
		case errors.Is(err, transport.ErrFrameTooLarge):
			n.refuseOversize(s, caller)
			return
		default:
			n.log.Debug("rpc: read", "peer", caller.ID, "err", err)
			_ = s.Reset()
			return
		}
		_ = s.SetReadDeadline(time.Time{})
		out := n.serveFrame(s, caller, msg)
		if out == nil {
			continue
		}
		_ = s.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err := transport.WriteFrame(s, out); err != nil {
			n.log.Debug("rpc: write", "peer", caller.ID, "err", err)
			_ = s.Reset()
			return
		}
	}
}

// serveFrame runs one request with its memory accounted to the stream.
func (n *Node) serveFrame(s network.Stream, c Caller, msg []byte) []byte {
	if err := s.Scope().ReserveMemory(len(msg), network.ReservationPriorityMedium); err != nil {
		n.log.Debug("rpc: memory for request refused", "peer", c.ID, "size", len(msg), "err", err)
		perr := protocol.Errorf(protocol.CodeInternal, "resource limit: this peer is too busy for a %d-byte request", len(msg))
		n.audit(c, "", "", perr, time.Now())
		b, _ := json.Marshal(protocol.ErrorResponse(nil, perr))
		return b
	}
	defer s.Scope().ReleaseMemory(len(msg))
	out, _ := n.Handle(n.ctx, c, msg)
	return out
}

// refuseOversize answers a frame over the cap with one -32600 error, drains
// (without keeping) what the caller is still sending for a short while so the
// error is not lost to the reset, and resets the stream (SPEC §2).
func (n *Node) refuseOversize(s network.Stream, c Caller) {
	perr := protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: message exceeds the %d-byte cap", n.maxMsg)
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
