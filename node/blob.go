package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	pool "github.com/libp2p/go-buffer-pool"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"
	msmux "github.com/multiformats/go-multistream"
	"golang.org/x/time/rate"

	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// Sender defaults of SendFile.
const (
	// DefaultSendAttempts is how many attempts in a row may fail without the
	// receiver's offset moving before SendFile gives up.
	DefaultSendAttempts = 5
	// DefaultDirectWait is how long SendFile waits for a direct connection
	// when the only one to the receiver is a limited (relayed) one.
	DefaultDirectWait = 10 * time.Second
	// blobOpenTimeout bounds opening a stream and its protocol negotiation.
	blobOpenTimeout = 30 * time.Second
	// blobOffsetTimeout bounds waiting for the receiver's offset: it may wait
	// for an earlier transfer to let go and rehash the bytes it kept.
	blobOffsetTimeout = 60 * time.Second
	// blobCommitTimeout bounds waiting for the final answer after the last
	// byte: the receiver fsyncs and renames.
	blobCommitTimeout = 2 * time.Minute
	// blobBackoff and blobMaxBackoff shape the pause between attempts: it
	// doubles with each failure in a row, so the DefaultSendAttempts
	// failures before giving up span 7.5 s. That outlasts a hole punch in
	// progress (its dial times out after 5 s): the peer behind a relay tries
	// one on every new relayed connection, and while its dial to us is
	// pending our own dials to that peer fail ("connection failed"), as
	// the NAT lab shows behind symmetric NAT, where the punch cannot work.
	blobBackoff, blobMaxBackoff = 500 * time.Millisecond, 5 * time.Second
)

// SendOptions adjust SendFile. The zero value is the default of every field.
type SendOptions struct {
	// Name is the name to store the file under (default: the base name of
	// the path).
	Name string
	// Session is a mesh session token for the receiver (SPEC §6); empty
	// means one is minted for each attempt when the client has a secret.
	Session string
	// SHA256, when set, is declared as the content's hash instead of hashing
	// the file first: the caller vouches for it, and a wrong one makes the
	// receiver discard the upload with a hash mismatch.
	SHA256 string
	// Progress, when set, is called from SendFile's goroutine at the start
	// of each attempt, after each chunk written, and when an attempt fails
	// and will be retried. It must not block for long.
	Progress func(SendProgress)
	// MaxAttempts is how many attempts in a row may fail without the
	// receiver's offset moving (default DefaultSendAttempts). Attempts that
	// make progress reset the count, so a transfer over relayed connections
	// with a data limit completes across as many connections as it needs.
	MaxAttempts int
	// DirectWait is how long to wait for a direct connection when the only
	// one is limited (default DefaultDirectWait; negative: do not wait).
	DirectWait time.Duration
	// RateLimit caps the sending rate in bytes per second (0: none).
	RateLimit float64
}

// SendProgress is the state of a transfer, reported to SendOptions.Progress.
type SendProgress struct {
	// Attempt counts attempts from 1.
	Attempt int
	// Offset is where this attempt started: the bytes the receiver already
	// had. Above zero on a first attempt, a previous send is being resumed.
	Offset int64
	// Sent is Offset plus the bytes written by this attempt.
	Sent int64
	// Size is the file's size.
	Size int64
	// Err is set when this attempt failed and another one follows.
	Err error
	// Dropped, in the first report of an attempt, names this sender's
	// older unfinished uploads that the receiver removed to make room for
	// this one (its cap on one sender's unfinished uploads); they start
	// from zero if sent again.
	Dropped []store.DroppedUpload
}

// sendError marks a failure that another attempt cannot fix.
type sendError struct{ err error }

func (e *sendError) Error() string { return e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

// SendFile sends the file at path to the mesh peer at addr over
// /mcpv2/blob/1.0.0 and returns the stored file as the receiver reports it.
// It hashes the file first, then streams its raw bytes; the receiver commits
// the file atomically only when the hash matches. A broken stream is retried
// with backoff, each attempt resuming at the receiver's offset, until
// MaxAttempts attempts in a row make no progress; the receiver keeps what it
// got, so a later SendFile of the same file resumes too. Streams may use a
// limited (relayed) connection: when that is the only one, SendFile first
// waits up to DirectWait for a direct one. A refusal by the receiver (not
// permitted, too large, hash mismatch) is returned as its *protocol.Error and
// is not retried. Safe for concurrent use.
func (n *Client) SendFile(ctx context.Context, addr protocol.Address, path string, o SendOptions) (store.FileInfo, error) {
	if addr.Kind != protocol.AddrMesh {
		return store.FileInfo{}, fmt.Errorf("node: blob: %s is not a mesh address (an HTTP edge takes upload_file)", addr)
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultSendAttempts
	}
	if o.DirectWait == 0 {
		o.DirectWait = DefaultDirectWait
	}
	f, err := os.Open(path)
	if err != nil {
		return store.FileInfo{}, fmt.Errorf("node: blob: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return store.FileInfo{}, fmt.Errorf("node: blob: %w", err)
	}
	if !st.Mode().IsRegular() {
		return store.FileInfo{}, fmt.Errorf("node: blob: %s is not a regular file", path)
	}
	h := BlobHeader{Name: o.Name, Size: st.Size(), SHA256: o.SHA256, Session: o.Session}
	if h.Name == "" {
		h.Name = filepath.Base(path)
	}
	if err := store.ValidateName(h.Name); err != nil {
		return store.FileInfo{}, fmt.Errorf("node: blob: %w", err)
	}
	if h.SHA256 == "" {
		if h.SHA256, err = hashFile(ctx, f, h.Size); err != nil {
			return store.FileInfo{}, fmt.Errorf("node: blob: hash %s: %w", path, err)
		}
	}
	lctx := network.WithAllowLimitedConn(ctx, "mcpv2 blob")
	pid, err := n.connect(lctx, addr, o.DirectWait)
	if err != nil {
		return store.FileInfo{}, err
	}

	var lim *rate.Limiter
	if o.RateLimit > 0 {
		burst := int(min(max(o.RateLimit/8, 4<<10), blobBuffer))
		lim = rate.NewLimiter(rate.Limit(o.RateLimit), burst)
	}
	best, failures := int64(-1), 0
	for attempt := 1; ; attempt++ {
		hdr := h
		if hdr.Session == "" && len(n.secret) > 0 { // a fresh token per attempt
			hdr.Session, _ = protocol.MintToken(n.secret, n.host.ID().String(), n.now(), 5*time.Minute)
		}
		info, off, err := n.sendAttempt(ctx, pid, f, hdr, attempt, &o, lim)
		if err == nil {
			return info, nil
		}
		var pe *protocol.Error
		var se *sendError
		switch {
		case errors.As(err, &pe):
			return store.FileInfo{}, pe
		case ctx.Err() != nil:
			return store.FileInfo{}, fmt.Errorf("node: blob: send %q to %s: %w (the receiver keeps what it got: send again to resume)", h.Name, pid, ctx.Err())
		case errors.As(err, &se):
			return store.FileInfo{}, fmt.Errorf("node: blob: send %q to %s: %w", h.Name, pid, se.err)
		}
		if off > best {
			best, failures = off, 1
		} else {
			failures++
		}
		if failures >= o.MaxAttempts {
			return store.FileInfo{}, fmt.Errorf("node: blob: send %q to %s: gave up after %d failed attempts in a row (the receiver keeps what it got: send again to resume): %w",
				h.Name, pid, failures, err)
		}
		if o.Progress != nil {
			o.Progress(SendProgress{Attempt: attempt, Offset: max(off, 0), Sent: max(off, 0), Size: h.Size, Err: err})
		}
		pause := min(blobBackoff<<min(failures-1, 8), blobMaxBackoff)
		select {
		case <-ctx.Done():
			return store.FileInfo{}, fmt.Errorf("node: blob: send %q to %s: %w (the receiver keeps what it got: send again to resume)", h.Name, pid, ctx.Err())
		case <-time.After(pause):
		}
		_, _ = n.Connect(lctx, addr) // re-adds the address; NewStream dials as needed
	}
}

// sendAttempt runs one stream of a transfer. off is the receiver's offset at
// its start, -1 when it did not get that far.
func (n *Client) sendAttempt(ctx context.Context, pid peer.ID, f *os.File, h BlobHeader, attempt int, o *SendOptions, lim *rate.Limiter) (_ store.FileInfo, off int64, err error) {
	off = -1
	octx, cancel := context.WithTimeout(network.WithAllowLimitedConn(ctx, "mcpv2 blob"), blobOpenTimeout)
	s, err := n.host.NewStream(octx, pid, libp2pproto.ID(protocol.BlobProtocolID))
	cancel()
	if err != nil {
		var ns msmux.ErrNotSupported[libp2pproto.ID]
		if errors.As(err, &ns) {
			return store.FileInfo{}, off, &sendError{fmt.Errorf("the peer does not serve %s", protocol.BlobProtocolID)}
		}
		return store.FileInfo{}, off, fmt.Errorf("open stream: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = s.Reset()
		}
	}()
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()

	hb, err := json.Marshal(h)
	if err != nil {
		return store.FileInfo{}, off, &sendError{err}
	}
	_ = s.SetWriteDeadline(time.Now().Add(writeTimeout))
	if err := transport.WriteFrame(s, hb); err != nil {
		return store.FileInfo{}, off, err
	}
	fr := transport.NewFrameReader(s, maxBlobReply)
	_ = s.SetReadDeadline(time.Now().Add(blobOffsetTimeout))
	raw, err := fr.ReadFrame()
	if err != nil {
		return store.FileInfo{}, off, fmt.Errorf("read the receiver's offset: %w", err)
	}
	var or blobOffset
	if err := json.Unmarshal(raw, &or); err != nil || (or.Error == nil && or.Offset == nil) {
		return store.FileInfo{}, off, &sendError{fmt.Errorf("the receiver answered the header with %.100q", raw)}
	}
	if or.Error != nil {
		return store.FileInfo{}, off, or.Error
	}
	if *or.Offset < 0 || *or.Offset > h.Size {
		return store.FileInfo{}, off, &sendError{fmt.Errorf("the receiver asked to resume at %d of %d bytes", *or.Offset, h.Size)}
	}
	off = *or.Offset
	_ = s.SetReadDeadline(time.Time{})
	report := func(sent int64) {
		if o.Progress != nil {
			o.Progress(SendProgress{Attempt: attempt, Offset: off, Sent: sent, Size: h.Size})
		}
	}
	if o.Progress != nil {
		o.Progress(SendProgress{Attempt: attempt, Offset: off, Sent: off, Size: h.Size, Dropped: or.Dropped})
	}

	// The receiver answers once, at the end, or early with an error (then
	// the writer is stopped by a reset): read that answer concurrently.
	type answer struct {
		res blobResult
		err error
	}
	answers := make(chan answer, 1)
	var writing atomic.Bool
	writing.Store(true)
	go func() {
		var a answer
		raw, err := fr.ReadFrame()
		switch {
		case err != nil:
			a.err = fmt.Errorf("read the receiver's answer: %w", err)
		case json.Unmarshal(raw, &a.res) != nil || (a.res.Error == nil && a.res.Filename == ""):
			a.err = &sendError{fmt.Errorf("the receiver answered with %.100q", raw)}
		case a.res.Error != nil && writing.Load():
			_ = s.Reset() // stop the writer: the receiver has given up
		}
		answers <- a
	}()

	werr := sendData(ctx, s, f, off, h.Size, lim, report)
	writing.Store(false)
	if werr == nil {
		if werr = s.CloseWrite(); werr == nil {
			_ = s.SetReadDeadline(time.Now().Add(blobCommitTimeout))
		}
	}
	if werr != nil {
		// The receiver may have said why it stopped reading.
		_ = s.SetReadDeadline(time.Now().Add(drainTimeout))
	}
	a := <-answers
	switch {
	case a.err == nil && a.res.Error != nil:
		return store.FileInfo{}, off, a.res.Error
	case a.err == nil:
		_ = s.Close()
		ok = true
		return store.FileInfo{Filename: a.res.Filename, Size: a.res.Size, SHA256: a.res.SHA256}, off, nil
	case werr != nil:
		return store.FileInfo{}, off, werr
	}
	return store.FileInfo{}, off, a.err
}

// sendData writes bytes off..size of f to s through a pooled buffer,
// pacing with lim (when set) and reporting the running total. Each write
// must complete within the idle timeout, so a stalled receiver is dropped. A
// failure to read f is a *sendError.
func sendData(ctx context.Context, s network.Stream, f *os.File, off, size int64, lim *rate.Limiter, report func(int64)) error {
	buf := pool.Get(blobBuffer)
	defer pool.Put(buf)
	if lim != nil {
		buf = buf[:lim.Burst()]
	}
	r := io.NewSectionReader(f, off, size-off)
	for pos := off; pos < size; {
		chunk := buf[:min(int64(len(buf)), size-pos)]
		if _, err := io.ReadFull(r, chunk); err != nil {
			return &sendError{fmt.Errorf("read the file at %d: %w (did it change while sending?)", pos, err)}
		}
		if lim != nil {
			if err := lim.WaitN(ctx, len(chunk)); err != nil {
				return ctxErr(ctx, err)
			}
		}
		_ = s.SetWriteDeadline(time.Now().Add(blobIdleTimeout()))
		if _, err := s.Write(chunk); err != nil {
			return fmt.Errorf("write at %d: %w", pos, ctxErr(ctx, err))
		}
		pos += int64(len(chunk))
		report(pos)
	}
	return nil
}

// hashFile returns the hex SHA-256 of the first size bytes of f, stopping
// early when ctx ends.
func hashFile(ctx context.Context, f *os.File, size int64) (string, error) {
	h := sha256.New()
	buf := pool.Get(blobBuffer)
	defer pool.Put(buf)
	r := io.NewSectionReader(f, 0, size)
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		m, err := r.Read(buf)
		h.Write(buf[:m])
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
