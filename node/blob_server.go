package node

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	pool "github.com/libp2p/go-buffer-pool"
	"github.com/libp2p/go-libp2p/core/network"

	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// Stream handling constants of the blob protocols (blobVersions).
const (
	// blobService is the resource manager service of the blob handler.
	blobService = "mcpv2.blob"
	// blobBuffer is the copy buffer of one transfer, on either side.
	blobBuffer = 256 << 10
	// blobReserve is the memory a blob stream reserves: the copy buffer, the
	// header and the reader's small buffer.
	blobReserve = blobBuffer + 16<<10
	// blobLockWait bounds how long a transfer waits for an earlier transfer
	// of the same upload (whose connection died unnoticed) to let go.
	blobLockWait = 10 * time.Second
	// blobAudit names blob transfers in the audit log: method "blob", skill
	// "upload_file", whose grant they need.
	blobAudit, blobSkill = "blob", "upload_file"
)

// blobIdle drops a blob stream on which nothing arrives or can be sent for
// this long: a stalled peer.
const blobIdle = 30 * time.Second

// blobIdleTimeout returns the idle timeout of the blob streams n serves:
// blobIdle, unless a test set n.blobIdleTest.
func (n *Node) blobIdleTimeout() time.Duration {
	if d := n.blobIdleTest.Load(); d > 0 {
		return time.Duration(d)
	}
	return blobIdle
}

// idleReader reads from a stream, pushing its read deadline idle into the
// future as reads happen (at most a few times per idle period), so a
// transfer may last as long as bytes keep coming. While hold is set it
// leaves the deadline alone.
type idleReader struct {
	s    network.Stream
	idle time.Duration
	last time.Time
	hold bool
}

func (r *idleReader) Read(p []byte) (int, error) {
	if now := time.Now(); !r.hold && now.Sub(r.last) > r.idle/8 {
		_ = r.s.SetReadDeadline(now.Add(r.idle))
		r.last = now
	}
	return r.s.Read(p)
}

// handleBlob serves one stream of a blob protocol version (/mcpv2/blob/1.0.0,
// 1.1.0 or 1.2.0: the stream's protocol says which): one transfer into the
// file store (see blob_wire.go for the exchange). It follows handleRPC's order:
// service scope, memory reservation, deadlines, capped reads; Close on
// success, Reset on error. Every transfer, allowed or refused, completed or
// broken, is one audit line (method "blob", skill "upload_file").
func (n *Node) handleBlob(s network.Stream) {
	if !n.track() {
		_ = s.Reset()
		return
	}
	defer n.wg.Done()
	if err := s.Scope().SetService(blobService); err != nil {
		n.log.Debug("blob: service scope refused", "err", err)
		_ = s.Reset()
		return
	}
	if err := s.Scope().ReserveMemory(blobReserve, network.ReservationPriorityHigh); err != nil {
		n.log.Debug("blob: memory refused", "err", err)
		_ = s.Reset()
		return
	}
	defer s.Scope().ReleaseMemory(blobReserve)
	stop := context.AfterFunc(n.ctx, func() { _ = s.Reset() })
	defer stop()

	v := blobVersionOf(s.Protocol())
	if v == nil { // a handler registered for another protocol: a bug
		n.log.Error("blob: stream of an unknown blob protocol", "protocol", s.Protocol())
		_ = s.Reset()
		return
	}
	start := time.Now()
	c := meshPeer(s.Conn())
	perr := n.serveBlob(s, c, v)
	n.metrics.blobDone(perr)
	n.audit(n.ctx, c, blobAudit, blobSkill, perr, start)
}

// serveBlob runs the exchange of version v and ends the stream; it returns
// the error for the audit line, nil when a file was stored.
func (n *Node) serveBlob(s network.Stream, c Caller, v *blobVersion) *protocol.Error {
	// The whole header must arrive within one idle period; then the data may
	// take as long as it keeps coming.
	ir := &idleReader{s: s, idle: n.blobIdleTimeout(), hold: true}
	_ = s.SetReadDeadline(time.Now().Add(ir.idle))
	br := bufio.NewReader(ir)
	raw, err := transport.NewFrameReader(br, MaxBlobHeader).ReadFrame()
	ir.hold = false
	if errors.Is(err, transport.ErrFrameTooLarge) {
		return n.blobRefuse(s, c, protocol.Errorf(protocol.CodeInvalidRequest, "blob: header exceeds the %d-byte cap", MaxBlobHeader))
	}
	if err != nil {
		n.log.Debug("blob: read header", "peer", c.ID, "err", err)
		_ = s.Reset()
		return protocol.Errorf(protocol.CodeInvalidRequest, "blob: no header")
	}
	h, perr := decodeBlobHeader(raw, v)
	if perr != nil {
		return n.blobRefuse(s, c, perr)
	}
	if ok, wait := n.limits.allow(c.ID, 1, time.Now()); !ok {
		return n.blobRefuse(s, c, &protocol.Error{Code: protocol.CodeRateLimited,
			Message: fmt.Sprintf("rate limited: retry after %dms", wait.Milliseconds()),
			Data:    map[string]any{"retry_after_ms": wait.Milliseconds()}})
	}
	if perr := n.authorize(c, &protocol.Slot{Context: &protocol.SlotContext{Session: h.Session}}, protocol.PurposeBlob, blobSkill); perr != nil {
		return n.blobRefuse(s, c, perr)
	}
	files := n.store.Files()
	if h.Size > files.MaxSize() {
		return n.blobRefuse(s, c, protocol.Errorf(protocol.CodeInvalidParams,
			"blob: %q is %d bytes, over this node's %d-byte file limit", h.Name, h.Size, files.MaxSize()))
	}
	declared := h.sum(v.alg)
	if info, ok := n.blobStored(files, c, h, v); ok {
		// Already here (say, a retry after a lost final answer): nothing to
		// send. A 1.1.0 or 1.2.0 sender checks the hash and sends just the
		// trailer.
		off := blobOffset{Offset: &h.Size}
		if v.trailer {
			*off.prefix(v.alg) = info.Sum(v.alg)
		}
		if !n.blobWrite(s, c, jsonFrame(off)) {
			return protocol.Errorf(protocol.CodeInvalidRequest, "blob: the sender went away")
		}
		if v.trailer {
			sum, perr := readTrailer(br, v.alg, "; nothing was stored")
			if perr != nil {
				return n.blobRefuse(s, c, perr)
			}
			if sum != info.Sum(v.alg) {
				return n.blobRefuse(s, c, protocol.Errorf(protocol.CodeInvalidParams,
					"blob: the trailer's %s %s is not that of the stored %q (%s), which the sender accepted; nothing was stored: %v", v.alg, sum, h.Name, info.Sum(v.alg), store.ErrHashMismatch))
			}
		}
		return n.blobFinish(s, c, v, info)
	}

	ctx, cancel := context.WithTimeout(n.ctx, blobLockWait)
	p, err := files.OpenPartialHash(ctx, c.ID, h.Name, h.Size, v.alg, declared)
	cancel()
	if err != nil {
		return n.blobRefuse(s, c, n.blobStoreError(c, h, "open the partial upload", err))
	}
	defer func() { _ = p.Close() }() // a no-op once committed or discarded
	if h.Restart && p.Offset() > 0 {
		n.log.Debug("blob: the sender restarts an upload whose kept bytes differ from its file", "peer", c.ID, "name", h.Name, "dropped", p.Offset())
		if err := p.Restart(); err != nil {
			return n.blobRefuse(s, c, n.blobStoreError(c, h, "restart the partial upload", err))
		}
	}

	// A newer transfer of the same upload (the sender resuming on a new
	// connection) takes over: this stream ends and lets go of the partial.
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-p.Superseded():
			n.log.Debug("blob: superseded by a newer transfer", "peer", c.ID, "name", h.Name)
			_ = s.Reset()
		case <-done:
		}
	}()
	defer func() { close(done); wg.Wait() }()

	off := p.Offset()
	if d := p.Dropped(); len(d) > 0 {
		n.log.Info("blob: dropped a sender's oldest unfinished uploads to admit a new one (max-partial)",
			"peer", c.ID, "name", h.Name, "dropped", len(d))
	}
	of := blobOffset{Offset: &off, Dropped: p.Dropped()}
	if v.trailer && off > 0 {
		*of.prefix(v.alg) = p.PrefixSum()
	}
	if !n.blobWrite(s, c, jsonFrame(of)) {
		return protocol.Errorf(protocol.CodeInvalidRequest, "blob: the sender went away")
	}

	tr := n.inTransfers.add(c.ID, h.Name, h.Size) // Node.Transfers; nil past its bound
	defer n.inTransfers.remove(tr)
	tr.attemptAt(0, off)
	got, rerr := receiveInto(p, br, h.Size-off, tr)
	n.metrics.blobReceived(got, off > 0)
	if rerr != nil {
		// Keep what arrived: the sender resumes from it.
		if err := p.Close(); err != nil {
			n.log.Error("blob: keep partial upload", "name", h.Name, "err", err)
		}
		have := off + got
		var werr *writeError
		if errors.As(rerr, &werr) {
			return n.blobRefuse(s, c, n.blobStoreError(c, h, "write", werr.err))
		}
		n.log.Debug("blob: transfer broken", "peer", c.ID, "name", h.Name, "have", have, "size", h.Size, "err", rerr)
		perr := protocol.Errorf(protocol.CodeInvalidRequest,
			"blob: the stream ended after %d of %d bytes; the partial upload is kept: send again to resume", have, h.Size)
		if errors.Is(rerr, io.ErrUnexpectedEOF) { // a half-close: the sender is still listening
			return n.blobRefuse(s, c, perr)
		}
		_ = s.Reset()
		return perr
	}
	var sum string // 1.0.0: the header's alone
	if v.trailer {
		var perr *protocol.Error
		if sum, perr = readTrailer(br, v.alg, "; the partial upload is kept: send again to finish it"); perr != nil {
			// Every byte is here: kept, a resume sends just the trailer.
			if err := p.Close(); err != nil {
				n.log.Error("blob: keep partial upload", "name", h.Name, "err", err)
			}
			return n.blobRefuse(s, c, perr)
		}
	}
	info, err := p.CommitSum(sum)
	if err != nil {
		return n.blobRefuse(s, c, n.blobStoreError(c, h, "commit", err))
	}
	n.log.Debug("blob: stored", "peer", c.ID, "name", info.Filename, "size", info.Size, "resumed_at", off, "hash", v.alg)
	return n.blobFinish(s, c, v, info)
}

// writeError marks a failure of the store while receiving, as opposed to a
// failure of the stream.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }

// receiveInto copies exactly want bytes from r into p through a pooled
// buffer, telling tr (when set) the bytes p holds after each chunk. Bytes
// read before an error are written too, so nothing received is lost. It
// returns how many bytes it wrote; a stream ending early gives
// io.ErrUnexpectedEOF, a store failure a *writeError.
func receiveInto(p *store.Partial, r io.Reader, want int64, tr *transfer) (int64, error) {
	buf := pool.Get(blobBuffer)
	defer pool.Put(buf)
	var got int64
	for got < want {
		m, err := io.ReadFull(r, buf[:min(int64(len(buf)), want-got)])
		if m > 0 {
			if _, werr := p.Write(buf[:m]); werr != nil {
				return got, &writeError{werr}
			}
			got += int64(m)
			tr.progress(p.Offset())
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

// readTrailer reads and decodes the trailer frame of a stream hashed by
// alg (1.1.0 or 1.2.0). after ends the message of an error: what becomes of
// the bytes.
func readTrailer(r io.Reader, alg store.Hash, after string) (string, *protocol.Error) {
	raw, err := transport.NewFrameReader(r, maxBlobTrailer).ReadFrame()
	var perr *protocol.Error
	switch {
	case errors.Is(err, transport.ErrFrameTooLarge):
		perr = protocol.Errorf(protocol.CodeInvalidRequest, "blob: the trailer exceeds the %d-byte cap", maxBlobTrailer)
	case err != nil:
		perr = protocol.Errorf(protocol.CodeInvalidRequest, "blob: no trailer frame (the file's %s) after the last byte", alg)
	default:
		var sum string
		if sum, perr = decodeBlobTrailer(raw, alg); perr == nil {
			return sum, nil
		}
	}
	perr.Message += after
	return "", perr
}

// blobStored returns the stored file of h's name when it already has h's
// size and declared digest (of v's hash). Without a declared digest (1.1.0,
// 1.2.0) it returns one of h's size, for the sender to check by its hash,
// unless the sender asked to restart or c keeps a partial upload of it
// (which goes first: the stored file may be an older version of the same
// size). The file's digest of v's hash is computed when the store does not
// know it (it arrived by the other hash), and only for a file of h's size;
// not for longer than the sender waits for the offset frame, nor past the
// node's close.
func (n *Node) blobStored(files *store.Files, c Caller, h BlobHeader, v *blobVersion) (store.FileInfo, bool) {
	declared := h.sum(v.alg)
	if h.Restart || (declared == "" && files.PartialHeld(c.ID, h.Name, h.Size, v.alg, "") > 0) {
		return store.FileInfo{}, false
	}
	if st, err := files.Stat(h.Name); err != nil || st.Size != h.Size {
		return store.FileInfo{}, false
	}
	ctx, cancel := context.WithTimeout(n.ctx, blobOffsetTimeout)
	defer cancel()
	f, info, err := files.OpenHash(ctx, h.Name, v.alg)
	if err != nil {
		return store.FileInfo{}, false
	}
	_ = f.Close()
	return info, info.Size == h.Size && (declared == "" || info.Sum(v.alg) == declared)
}

// blobStoreError maps a store failure to the error sent to the caller.
// Store errors name the file but never the host path.
func (n *Node) blobStoreError(c Caller, h BlobHeader, op string, err error) *protocol.Error {
	var qe *store.QuotaError
	switch {
	case errors.As(err, &qe):
		// A quota (max-partial, max-store): -32004 with the numbers as data.
		var pe *protocol.Error
		errors.As(qe, &pe)
		pe.Message = "blob: " + err.Error()
		return pe
	case errors.Is(err, store.ErrHashMismatch), errors.Is(err, store.ErrInvalidName), errors.Is(err, store.ErrTooLarge):
		return protocol.Errorf(protocol.CodeInvalidParams, "blob: %v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return protocol.Errorf(protocol.CodeInternal, "blob: an earlier transfer of %q is still running; try again", h.Name)
	}
	n.log.Error("blob: store", "op", op, "peer", c.ID, "name", h.Name, "err", err)
	return protocol.Errorf(protocol.CodeInternal, "blob: could not store %q", h.Name)
}

// blobWrite writes one frame under the write timeout; false means the
// stream is gone (and has been reset).
func (n *Node) blobWrite(s network.Stream, c Caller, frame []byte) bool {
	_ = s.SetWriteDeadline(time.Now().Add(writeTimeout))
	if err := transport.WriteFrame(s, frame); err != nil {
		n.log.Debug("blob: write", "peer", c.ID, "err", err)
		_ = s.Reset()
		return false
	}
	_ = s.SetWriteDeadline(time.Time{})
	return true
}

// blobFinish sends the final answer of a stored file over v and closes the
// stream.
func (n *Node) blobFinish(s network.Stream, c Caller, v *blobVersion, info store.FileInfo) *protocol.Error {
	if !n.blobWrite(s, c, resultFrame(v, info)) {
		// Stored all the same; a resend finds it (blobStored).
		return nil
	}
	_ = s.Close()
	return nil
}

// blobRefuse sends perr as the stream's last frame, half-closes, discards
// what the sender is still sending for a short while so that the answer is
// not lost to the reset (a reset drops unread data), and resets the stream.
// It returns perr.
func (n *Node) blobRefuse(s network.Stream, c Caller, perr *protocol.Error) *protocol.Error {
	n.log.Debug("blob: refused", "peer", c.ID, "code", perr.Code, "message", perr.Message)
	_ = s.SetWriteDeadline(time.Now().Add(drainTimeout))
	if err := transport.WriteFrame(s, blobErrorFrame(perr)); err == nil {
		_ = s.CloseWrite()
		_ = s.SetReadDeadline(time.Now().Add(drainTimeout))
		_, _ = io.Copy(io.Discard, s)
	}
	_ = s.Reset()
	return perr
}

func jsonFrame(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
