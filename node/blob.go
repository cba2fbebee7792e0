package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	pool "github.com/libp2p/go-buffer-pool"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
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
	// SHA256, when set, is declared as the content's hash (in the header,
	// and in 1.1.0's trailer) and SendFile does not hash the file at all:
	// the caller vouches for it, and a wrong one makes the receiver discard
	// the upload with a hash mismatch. SendFile then offers only the
	// versions whose hash is SHA-256 (1.1.0, then 1.0.0). Unset, SendFile
	// hashes the file as it sends it (by BLAKE3 over 1.2.0, by SHA-256 over
	// 1.1.0), or first (a receiver that serves only 1.0.0).
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
	// Discarded, when above zero, says that the receiver held this many
	// bytes under the same name and size that are not the start of this
	// file (an interrupted upload of other content, or a stored file of the
	// same size): SendFile told it to start over, and the same attempt goes
	// on from zero. Offset and Sent are 0 in that report.
	Discarded int64
}

// sendError marks a failure that another attempt cannot fix.
type sendError struct{ err error }

func (e *sendError) Error() string { return e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

// Signals of sendAttempt to SendFile, which act on them at once: neither
// counts as a failed attempt.
var (
	// errNeedHash: the peer speaks only 1.0.0, whose header needs the hash.
	errNeedHash = errors.New("the receiver needs the hash up front (blob 1.0.0)")
	// errRestart: the receiver's kept bytes are not the start of the file.
	errRestart = errors.New("the receiver holds other content under this name and size")
)

// blobProtocols are the blob protocols a sender offers, preferred first
// (every version, newest first); sha256Protocols those it offers when the
// caller declares the SHA-256 (SendOptions.SHA256).
var (
	blobProtocols   = []libp2pproto.ID{blob12.id, blob11.id, blob10.id}
	sha256Protocols = []libp2pproto.ID{blob11.id, blob10.id}
)

// SendFile sends the file at path to the mesh peer at addr over
// /mcpv2/blob/1.2.0, or the newest older version the peer serves (1.1.0,
// then 1.0.0; libp2p's protocol negotiation picks it), and returns the
// stored file as the receiver reports it: with its BLAKE3 over 1.2.0, its
// SHA-256 over the others (the other digest empty). Over 1.2.0 and 1.1.0 it
// streams the file's raw bytes at once, hashing them as they go (BLAKE3 and
// SHA-256), and ends with the hash; over 1.0.0 it hashes the file first.
// The receiver commits the file atomically only when the hash matches.
// Resuming over 1.2.0 or 1.1.0, it first
// checks that the bytes the receiver holds are the start of this file (by
// their hash) and has the receiver start over when they are not (reported
// as SendProgress.Discarded). A broken stream is retried
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
	if h.SHA256 != "" && !store.ValidSHA256(h.SHA256) {
		return store.FileInfo{}, fmt.Errorf("node: blob: SendOptions.SHA256 %.80q is not 64 lowercase hex digits", h.SHA256)
	}
	lctx := network.WithAllowLimitedConn(ctx, "mcpv2 blob")
	pid, err := n.connect(lctx, addr, o.DirectWait)
	if err != nil {
		return store.FileInfo{}, err
	}
	offer := blobProtocols
	if h.SHA256 != "" {
		offer = sha256Protocols
	}
	hashFirst := func() error { // for a peer that speaks only 1.0.0
		sum, err := hashFile(ctx, f, h.Size)
		if err != nil {
			return fmt.Errorf("node: blob: hash %s: %w", path, err)
		}
		h.SHA256 = sum
		return nil
	}
	if h.SHA256 == "" && knownOnly10(n.host.Peerstore(), pid) {
		if err := hashFirst(); err != nil {
			return store.FileInfo{}, err
		}
		offer = sha256Protocols
	}

	tr := n.transfers.add(pid.String(), h.Name, h.Size) // Transfers; nil past its bound
	defer n.transfers.remove(tr)

	var lim *rate.Limiter
	if o.RateLimit > 0 {
		burst := int(min(max(o.RateLimit/8, 4<<10), blobBuffer))
		lim = rate.NewLimiter(rate.Limit(o.RateLimit), burst)
	}
	best, failures, restart := int64(-1), 0, false
	for attempt := 1; ; attempt++ {
		hdr := h
		hdr.Restart, restart = restart, false
		if hdr.Session == "" { // a current token for each attempt, however late
			hdr.Session = n.meshSession(pid, protocol.PurposeBlob)
		}
		info, off, err := n.sendAttempt(ctx, pid, offer, f, hdr, attempt, &o, lim, tr)
		if err == nil {
			return info, nil
		}
		var pe *protocol.Error
		var se *sendError
		switch {
		case errors.Is(err, errNeedHash) && h.SHA256 == "":
			if err := hashFirst(); err != nil {
				return store.FileInfo{}, err
			}
			offer = sha256Protocols
			attempt-- // the same attempt, now with the hash
			continue
		case errors.Is(err, errRestart) && !hdr.Restart:
			restart = true
			attempt--
			continue
		case errors.Is(err, errRestart):
			return store.FileInfo{}, fmt.Errorf("node: blob: send %q to %s: %w, even after it was told to start over", h.Name, pid, err)
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

// knownOnly10 reports whether identify has told ps that pid serves blob
// 1.0.0 and no newer version: then the hash is needed before the first
// stream.
func knownOnly10(ps peerstore.Peerstore, pid peer.ID) bool {
	got, err := ps.SupportsProtocols(pid, blobProtocols...)
	return err == nil && len(got) == 1 && got[0] == blob10.id
}

// sendAttempt runs one stream of a transfer, over the first of offer the
// peer serves (1.0.0's header needs h.SHA256: without it the stream is reset
// and errNeedHash returned). off is the receiver's offset at its start, -1
// when it did not get that far; tr (when set) is told the attempt and its
// progress. errRestart means the receiver's kept bytes are not the start of
// f: the stream was reset before any byte, and the next one must say
// "restart".
func (n *Client) sendAttempt(ctx context.Context, pid peer.ID, offer []libp2pproto.ID, f *os.File, h BlobHeader, attempt int, o *SendOptions, lim *rate.Limiter, tr *transfer) (_ store.FileInfo, off int64, err error) {
	off = -1
	octx, cancel := context.WithTimeout(network.WithAllowLimitedConn(ctx, "mcpv2 blob"), blobOpenTimeout)
	s, err := n.host.NewStream(octx, pid, offer...)
	cancel()
	if err != nil {
		var ns msmux.ErrNotSupported[libp2pproto.ID]
		if errors.As(err, &ns) {
			return store.FileInfo{}, off, &sendError{fmt.Errorf("the peer serves none of %v", offer)}
		}
		return store.FileInfo{}, off, fmt.Errorf("open stream: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = s.Reset()
		}
	}()
	v := blobVersionOf(s.Protocol())
	if v == nil {
		return store.FileInfo{}, off, &sendError{fmt.Errorf("the peer picked %q, which was not offered", s.Protocol())}
	}
	switch {
	case v == blob10 && h.SHA256 == "":
		return store.FileInfo{}, off, errNeedHash
	case !v.trailer:
		h.Restart = false
	}
	if v.alg != store.HashSHA256 { // 1.2.0: no sha256 member, and no BLAKE3 is declared
		h.SHA256 = ""
	}
	declared := h.sum(v.alg)
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
	or, err := decodeBlobOffset(raw, v, h.Size)
	if err != nil {
		return store.FileInfo{}, off, &sendError{err}
	}
	if or.Error != nil {
		return store.FileInfo{}, off, or.Error
	}
	off = *or.Offset
	_ = s.SetReadDeadline(time.Time{})

	// 1.1.0 and 1.2.0: the trailer's hash. Declared: the caller's.
	// Otherwise a running hash of the file, from its first byte: the
	// receiver's prefix is checked against it, and it goes on over the
	// bytes sent.
	var sum hash.Hash
	if v.trailer && declared == "" {
		if h.Restart && off > 0 {
			return store.FileInfo{}, off, &sendError{fmt.Errorf("the receiver resumed at %d after being told to start over", off)}
		}
		sum = v.alg.New()
		if prefix := *or.prefix(v.alg); off > 0 || prefix != "" {
			if err := store.HashPrefix(ctx, sum, f, off); err != nil {
				return store.FileInfo{}, off, &sendError{fmt.Errorf("hash the first %d bytes of the file: %w", off, err)}
			}
			if got := hex.EncodeToString(sum.Sum(nil)); got != prefix {
				// Not the start of this file: nothing is appended to it.
				if o.Progress != nil {
					o.Progress(SendProgress{Attempt: attempt, Size: h.Size, Dropped: or.Dropped, Discarded: off})
				}
				return store.FileInfo{}, off, errRestart
			}
		}
	}
	tr.attemptAt(attempt, off)
	report := func(sent int64) {
		tr.progress(sent)
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
		default:
			if a.res, err = decodeBlobResult(raw, v); err != nil {
				a.err = &sendError{err}
				break
			}
			if a.res.Error != nil && writing.Load() {
				_ = s.Reset() // stop the writer: the receiver has given up
			}
		}
		answers <- a
	}()

	werr := sendData(ctx, s, f, off, h.Size, sum, lim, report)
	want := declared // the digest the receiver must report
	if werr == nil && v.trailer {
		if sum != nil {
			want = hex.EncodeToString(sum.Sum(nil))
		}
		_ = s.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err := transport.WriteFrame(s, trailerFrame(v.alg, want)); err != nil {
			werr = fmt.Errorf("write the trailer: %w", ctxErr(ctx, err))
		}
	}
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
	case a.err == nil && (a.res.Filename != h.Name || a.res.Size != h.Size || want != "" && a.res.sum(v.alg) != want):
		return store.FileInfo{}, off, &sendError{fmt.Errorf("the receiver reports %q stored, %d bytes, %s %s; sent %q, %d bytes, %s %s",
			a.res.Filename, a.res.Size, v.alg, a.res.sum(v.alg), h.Name, h.Size, v.alg, want)}
	case a.err == nil:
		_ = s.Close()
		ok = true
		// decodeBlobResult sets the digest of v's hash alone.
		return store.FileInfo{Filename: a.res.Filename, Size: a.res.Size, SHA256: a.res.SHA256, BLAKE3: a.res.BLAKE3}, off, nil
	case werr != nil:
		return store.FileInfo{}, off, werr
	}
	return store.FileInfo{}, off, a.err
}

// sendData writes bytes off..size of f to s through a pooled buffer,
// hashing them into sum (when set), pacing with lim (when set) and reporting
// the running total. Each write must complete within the idle timeout, so a
// stalled receiver is dropped. A failure to read f is a *sendError.
func sendData(ctx context.Context, s network.Stream, f *os.File, off, size int64, sum hash.Hash, lim *rate.Limiter, report func(int64)) error {
	buf := pool.Get(blobBuffer)
	defer pool.Put(buf)
	if lim != nil {
		buf = buf[:lim.Burst()]
	}
	// The hash of a chunk runs beside its write to the stream, on another
	// core when there is one; the next read waits for both.
	var hashCh chan []byte
	var hashed chan struct{}
	if sum != nil {
		hashCh, hashed = make(chan []byte), make(chan struct{}, 1)
		go func() {
			for c := range hashCh {
				sum.Write(c)
				hashed <- struct{}{}
			}
		}()
		defer close(hashCh)
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
		if sum != nil {
			hashCh <- chunk
		}
		_ = s.SetWriteDeadline(time.Now().Add(blobIdle))
		_, err := s.Write(chunk)
		if sum != nil {
			<-hashed // the chunk's buffer is free again
		}
		if err != nil {
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
	if err := store.HashPrefix(ctx, h, f, size); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
