package transport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"

	pool "github.com/libp2p/go-buffer-pool"
	"github.com/multiformats/go-varint"
)

// The varint is github.com/multiformats/go-varint rather than
// encoding/binary.Uvarint: it is the one libp2p itself uses (multistream,
// msgio), so frames match every other length-prefixed libp2p protocol; it stops
// after 9 bytes (lengths up to 2^63-1); and it refuses non-minimal encodings,
// so each length has exactly one encoding on the wire and a decoded stream
// re-encodes to the same bytes.

// DefaultMaxMessage is the default cap on one frame's payload, 8 MiB
// (SPEC §2, --max-message).
const DefaultMaxMessage = 8 << 20

// ErrFrameTooLarge reports a frame whose declared length exceeds the reader's
// cap. ReadFrame returns it wrapped with the declared length and the cap,
// before allocating anything for the payload; the stream is then unusable,
// since the payload was not consumed.
var ErrFrameTooLarge = errors.New("transport: frame too large")

// ErrReserveRefused reports that the caller refused the memory of a frame's
// declared length: ReadFrameReserve returns it wrapped together with the
// refusal, having read the length prefix and nothing of the payload. Like
// [ErrFrameTooLarge] it leaves the stream's framing lost; a server answers
// it with one error and resets the stream.
var ErrReserveRefused = errors.New("transport: frame memory refused")

// ErrMalformedLength reports a length prefix that is not a valid unsigned
// varint: longer than 9 bytes, over 2^63-1, or not minimally encoded. ReadFrame
// returns it wrapped together with go-varint's error; like [ErrFrameTooLarge]
// it means the peer broke the framing, not that the stream failed.
var ErrMalformedLength = errors.New("transport: read frame: malformed length prefix")

// WriteFrame writes payload to w as one frame: its length as an unsigned
// varint, then the payload. Header and payload go out in a single Write call
// from a pooled buffer, so a frame is never split across writes by this
// package. A nil or empty payload writes a zero-length frame. WriteFrame does
// not enforce a cap; the caller knows its peer's. Concurrent calls on one w
// need the caller's synchronisation, as for any io.Writer.
func WriteFrame(w io.Writer, payload []byte) error {
	n := len(payload)
	size := varint.UvarintSize(uint64(n)) + n
	buf := pool.Get(size)
	defer pool.Put(buf)
	h := varint.PutUvarint(buf, uint64(n))
	copy(buf[h:], payload)
	if _, err := w.Write(buf[:size]); err != nil {
		return fmt.Errorf("transport: write frame: %w", err)
	}
	return nil
}

// allocChunk is how much of a large frame's payload ReadFrame allocates before
// the bytes arrive. A frame up to this size is read into one allocation; a
// larger one grows by doubling as its bytes come in, so a peer that declares a
// large frame (within the cap) and then stalls pins memory in proportion to
// what it actually sent (at least allocChunk), not the declared length.
const allocChunk = 1 << 20

// FrameReader reads frames written by [WriteFrame] from an underlying reader,
// refusing any frame larger than its cap. It buffers: once wrapped, the
// underlying reader must be read only through the FrameReader. It is not safe
// for concurrent use.
type FrameReader struct {
	r   *bufio.Reader
	max int
}

// NewFrameReader returns a FrameReader over r whose frames may carry at most
// maxSize payload bytes; maxSize <= 0 means [DefaultMaxMessage]. If r is a
// *bufio.Reader it is used as is, otherwise it is wrapped in one.
func NewFrameReader(r io.Reader, maxSize int) *FrameReader {
	if maxSize <= 0 {
		maxSize = DefaultMaxMessage
	}
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReader(r)
	}
	return &FrameReader{r: br, max: maxSize}
}

// ReadFrame reads the next frame and returns its payload in a slice that the
// caller owns (and may give back with [ReleaseFrame]). A zero-length frame
// returns an empty, non-nil slice.
//
// It returns io.EOF only when the stream ends cleanly between frames, and
// io.ErrUnexpectedEOF when it ends inside a length prefix or a payload. A
// length over the cap returns an error wrapping [ErrFrameTooLarge] before any
// allocation for the payload. A malformed length prefix (longer than 9 bytes,
// over 2^63-1, or not minimally encoded) returns an error wrapping
// [ErrMalformedLength]. Errors of the underlying reader are wrapped. After
// any error the stream's framing is lost and the FrameReader should be
// discarded.
//
// A payload larger than 1 MiB is allocated as its bytes arrive, so a peer
// that declares a large frame and stalls pins memory in proportion to what
// it sent; [FrameReader.ReadFrameReserve] instead accounts the declared
// length first and allocates it at once.
func (fr *FrameReader) ReadFrame() ([]byte, error) {
	size, err := fr.readLength()
	if err != nil {
		return nil, err
	}
	if size <= allocChunk {
		return fr.readExact(size)
	}
	buf := make([]byte, 0, allocChunk)
	for len(buf) < size {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(len(buf), size-len(buf)))
		}
		// Never read past this frame: the next frame's bytes are not ours.
		m, err := io.ReadFull(fr.r, buf[len(buf):min(cap(buf), size)])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, fr.payloadErr(err, size)
		}
	}
	return buf, nil
}

// ReadFrameReserve reads the next frame as ReadFrame does, but first calls
// reserve with its declared length (within the cap, 0 included), before
// anything is allocated for the payload: the caller accounts the memory, for
// example in a libp2p resource scope, and the payload is then allocated in
// one piece of exactly that length. A non-nil error from reserve refuses the
// frame: ReadFrameReserve returns an error wrapping [ErrReserveRefused] and
// reserve's error, having read nothing of the payload.
//
// Once reserve has returned nil the reservation is the caller's to release,
// whatever ReadFrameReserve then returns; a caller that must know whether it
// holds one records it in reserve. Errors are otherwise those of ReadFrame.
func (fr *FrameReader) ReadFrameReserve(reserve func(n int) error) ([]byte, error) {
	size, err := fr.readLength()
	if err != nil {
		return nil, err
	}
	if err := reserve(size); err != nil {
		return nil, fmt.Errorf("transport: %d-byte frame: %w: %w", size, ErrReserveRefused, err)
	}
	return fr.readExact(size)
}

// Wait blocks until the first byte of the next frame has arrived, or the
// stream ends or fails. It consumes nothing: it returns nil when a frame is
// waiting, io.EOF when the stream ended cleanly between frames, and the
// underlying reader's error wrapped otherwise (a reset, an expired
// deadline). A server runs it while a request is in flight to learn that
// the caller gave up. Like ReadFrame, it must not run concurrently with
// another method of fr.
func (fr *FrameReader) Wait() error {
	_, err := fr.r.Peek(1)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF):
		return io.EOF
	default:
		return fmt.Errorf("transport: wait for a frame: %w", err)
	}
}

// readLength reads a frame's length prefix and checks it against the cap.
func (fr *FrameReader) readLength() (int, error) {
	n, err := varint.ReadUvarint(fr.r)
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		return 0, io.EOF // clean boundary: nothing of a frame was read
	case errors.Is(err, io.ErrUnexpectedEOF):
		return 0, fmt.Errorf("transport: read frame: stream ended inside the length prefix: %w", io.ErrUnexpectedEOF)
	case errors.Is(err, varint.ErrOverflow), errors.Is(err, varint.ErrNotMinimal):
		return 0, fmt.Errorf("%w: %w", ErrMalformedLength, err)
	default:
		return 0, fmt.Errorf("transport: read frame: %w", err)
	}
	if n > uint64(fr.max) {
		return 0, fmt.Errorf("transport: frame of %d bytes exceeds the %d-byte cap: %w", n, fr.max, ErrFrameTooLarge)
	}
	return int(n), nil // n <= fr.max, an int
}

// pooledMax is the largest payload read into a buffer from the pool, whose
// capacity is the next power of two; a larger one is allocated at exactly
// its length, which is what ReadFrameReserve's caller accounted for.
const pooledMax = 16 << 10

// readExact reads a payload of size bytes into one buffer, from the pool
// when it is small.
func (fr *FrameReader) readExact(size int) ([]byte, error) {
	var buf []byte
	switch {
	case size == 0:
		return []byte{}, nil
	case size <= pooledMax:
		buf = pool.Get(size)
	default:
		buf = make([]byte, size)
	}
	if _, err := io.ReadFull(fr.r, buf); err != nil {
		ReleaseFrame(buf)
		return nil, fr.payloadErr(err, size)
	}
	return buf, nil
}

// ReleaseFrame gives the payload of a frame (from ReadFrame or
// ReadFrameReserve) back for reuse by later frames, once nothing refers to
// it any more: a server that has answered a request, a client that has
// decoded an answer. Releasing is optional; a payload never released is
// garbage collected like any slice. buf must not be used afterwards.
func ReleaseFrame(buf []byte) {
	if cap(buf) <= 2*pooledMax { // a large one is not worth pinning
		pool.Put(buf)
	}
}

// GetBuffer returns a buffer of length 0 and capacity at least size from
// the pool frames are read into, for a message that ReleaseFrame gives
// back once written.
func GetBuffer(size int) []byte {
	return pool.Get(size)[:0]
}

// payloadErr turns a short read of a declared payload into the error
// ReadFrame returns: an end of stream inside a payload is
// io.ErrUnexpectedEOF.
func (fr *FrameReader) payloadErr(err error, size int) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("transport: read frame: stream ended inside a %d-byte payload: %w", size, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("transport: read frame: %w", err)
}
