package transport

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/multiformats/go-varint"
)

// writeCounter records each Write call separately.
type writeCounter struct{ writes [][]byte }

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, bytes.Clone(p))
	return len(p), nil
}

func TestWriteFrameWireFormat(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload []byte
		header  []byte
	}{
		{"nil", nil, []byte{0x00}},
		{"empty", []byte{}, []byte{0x00}},
		{"one", []byte("x"), []byte{0x01}},
		{"127", bytes.Repeat([]byte("a"), 127), []byte{0x7f}},
		{"128", bytes.Repeat([]byte("a"), 128), []byte{0x80, 0x01}},
		{"300", bytes.Repeat([]byte("a"), 300), []byte{0xac, 0x02}},
		{"16384", bytes.Repeat([]byte("a"), 16384), []byte{0x80, 0x80, 0x01}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w writeCounter
			if err := WriteFrame(&w, tc.payload); err != nil {
				t.Fatal(err)
			}
			if len(w.writes) != 1 {
				t.Fatalf("%d Write calls, want exactly 1", len(w.writes))
			}
			want := append(bytes.Clone(tc.header), tc.payload...)
			if !bytes.Equal(w.writes[0], want) {
				t.Fatalf("wrote % x..., want % x...", head(w.writes[0]), head(want))
			}
		})
	}
}

func head(b []byte) []byte { return b[:min(len(b), 8)] }

func TestWriteFrameWrapsWriterError(t *testing.T) {
	boom := errors.New("boom")
	err := WriteFrame(failWriter{boom}, []byte("hi"))
	if !errors.Is(err, boom) || err.Error() != "transport: write frame: boom" {
		t.Fatalf("err = %v", err)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

func TestReadFrameRoundTrip(t *testing.T) {
	sizes := []int{0, 1, 127, 128, 16383, 16384, 100_000, allocChunk - 1, allocChunk, allocChunk + 1, 3*allocChunk + 17, DefaultMaxMessage}
	var stream bytes.Buffer
	payloads := make([][]byte, len(sizes))
	for i, n := range sizes {
		payloads[i] = randomBytes(n, uint64(i))
		if err := WriteFrame(&stream, payloads[i]); err != nil {
			t.Fatal(err)
		}
	}
	fr := NewFrameReader(&stream, 0) // 0: DefaultMaxMessage
	for i, want := range payloads {
		got, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d (%d bytes): %v", i, len(want), err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("frame %d: got %d bytes, want %d, contents differ", i, len(got), len(want))
		}
	}
	if _, err := fr.ReadFrame(); err != io.EOF {
		t.Fatalf("after the last frame: err = %v, want io.EOF", err)
	}
}

func TestReadFrameZeroLength(t *testing.T) {
	// Zero-length frames alone, in a row, and between others.
	input := []byte{0x00, 0x00, 0x02, 'h', 'i', 0x00}
	fr := NewFrameReader(bytes.NewReader(input), 16)
	for i, want := range []string{"", "", "hi", ""} {
		got, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got == nil {
			t.Fatalf("frame %d: nil slice, want a non-nil empty or full one", i)
		}
		if string(got) != want {
			t.Fatalf("frame %d = %q, want %q", i, got, want)
		}
	}
	if _, err := fr.ReadFrame(); err != io.EOF {
		t.Fatalf("err = %v, want io.EOF", err)
	}
}

func TestReadFrameManyBackToBack(t *testing.T) {
	const frames = 5000
	rng := rand.New(rand.NewPCG(1, 2))
	var stream bytes.Buffer
	want := make([][]byte, frames)
	for i := range want {
		n := rng.IntN(300) // crosses the one-/two-byte varint boundary often
		if i%100 == 0 {
			n = rng.IntN(20_000)
		}
		want[i] = randomBytes(n, uint64(i))
		if err := WriteFrame(&stream, want[i]); err != nil {
			t.Fatal(err)
		}
	}
	encoded := stream.Bytes()

	readers := map[string]func() io.Reader{
		"whole":       func() io.Reader { return bytes.NewReader(encoded) },
		"one byte":    func() io.Reader { return iotest.OneByteReader(bytes.NewReader(encoded)) },
		"half":        func() io.Reader { return iotest.HalfReader(bytes.NewReader(encoded)) },
		"data+EOF":    func() io.Reader { return iotest.DataErrReader(bytes.NewReader(encoded)) },
		"own bufio":   func() io.Reader { return bufio.NewReaderSize(bytes.NewReader(encoded), 16) },
		"pipe writes": func() io.Reader { return pipeFrames(t, want) },
	}
	for name, mk := range readers {
		t.Run(name, func(t *testing.T) {
			fr := NewFrameReader(mk(), 1<<20)
			for i := range want {
				got, err := fr.ReadFrame()
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if !bytes.Equal(got, want[i]) {
					t.Fatalf("frame %d differs", i)
				}
			}
			if _, err := fr.ReadFrame(); err != io.EOF {
				t.Fatalf("err = %v, want io.EOF", err)
			}
		})
	}
}

// pipeFrames writes frames into an io.Pipe from a goroutine, so the reader
// sees exactly the boundaries of WriteFrame's single writes.
func pipeFrames(t *testing.T, frames [][]byte) io.Reader {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, f := range frames {
			if err := WriteFrame(pw, f); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.Close()
	}()
	t.Cleanup(func() { pr.Close(); <-done })
	return pr
}

func TestReadFrameTruncatedAndMalformed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		input  []byte
		frames int // complete frames before the error
		want   error
	}{
		{"empty stream", nil, 0, io.EOF},
		{"clean end after a frame", []byte{0x01, 'a'}, 1, io.EOF},
		{"cut inside the length", []byte{0x80}, 0, io.ErrUnexpectedEOF},
		{"cut inside a long length", []byte{0xff, 0xff, 0xff}, 0, io.ErrUnexpectedEOF},
		{"cut inside the payload", []byte{0x05, 'a', 'b'}, 0, io.ErrUnexpectedEOF},
		{"length without payload", []byte{0x05}, 0, io.ErrUnexpectedEOF},
		{"second frame cut", []byte{0x01, 'a', 0x02, 'b'}, 1, io.ErrUnexpectedEOF},
		{"non-minimal length", []byte{0x80, 0x00}, 0, ErrMalformedLength},
		{"non-minimal zero", []byte{0x80, 0x80, 0x00}, 0, ErrMalformedLength},
		{"ten-byte length", bytes.Repeat([]byte{0xff}, 10), 0, ErrMalformedLength},
		{"nine bytes, continuation set", append(bytes.Repeat([]byte{0x80}, 8), 0x80, 0x01), 0, ErrMalformedLength},
		{"over the cap", []byte{0x11}, 0, ErrFrameTooLarge},
		{"max uint63 length", append(bytes.Repeat([]byte{0xff}, 8), 0x7f), 0, ErrFrameTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr := NewFrameReader(bytes.NewReader(tc.input), 16)
			for i := range tc.frames {
				if _, err := fr.ReadFrame(); err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
			}
			got, err := fr.ReadFrame()
			if got != nil {
				t.Errorf("payload %q returned with the error", got)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.want == io.EOF && err != io.EOF {
				t.Fatalf("clean end must be io.EOF itself, got %#v", err)
			}
		})
	}
}

func TestReadFrameWrapsReaderError(t *testing.T) {
	boom := errors.New("boom")
	for name, r := range map[string]io.Reader{
		"in the length":  iotest.ErrReader(boom),
		"in the payload": io.MultiReader(bytes.NewReader([]byte{0x03, 'a'}), iotest.ErrReader(boom)),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewFrameReader(r, 16).ReadFrame()
			if !errors.Is(err, boom) || errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("err = %v, want the reader's error", err)
			}
		})
	}
}

func TestFrameTooLargeMessage(t *testing.T) {
	_, err := NewFrameReader(bytes.NewReader(varint.ToUvarint(9_000_000)), 0).ReadFrame()
	want := "transport: frame of 9000000 bytes exceeds the 8388608-byte cap: transport: frame too large"
	if !errors.Is(err, ErrFrameTooLarge) || err.Error() != want {
		t.Fatalf("err = %q, want %q", err, want)
	}
	// Exactly the cap is allowed.
	var b bytes.Buffer
	if err := WriteFrame(&b, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	if p, err := NewFrameReader(&b, 16).ReadFrame(); err != nil || len(p) != 16 {
		t.Fatalf("frame at the cap: %d bytes, %v", len(p), err)
	}
}

// TestReadFrameRefusesBeforeAllocating shows that a declared length over the
// cap is refused without allocating it: a reader declares a 1 GiB frame and
// supplies three bytes.
func TestReadFrameRefusesBeforeAllocating(t *testing.T) {
	input := append(varint.ToUvarint(1<<30), "abc"...)
	src := bytes.NewReader(input)
	br := bufio.NewReader(src) // reused, so the runs measure ReadFrame alone

	run := func() {
		src.Reset(input)
		br.Reset(src)
		_, err := NewFrameReader(br, DefaultMaxMessage).ReadFrame()
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("err = %v, want ErrFrameTooLarge", err)
		}
	}
	allocs := testing.AllocsPerRun(100, run)
	bytesPerRun := allocatedBytes(100, run)
	t.Logf("refusing a 1 GiB frame: %.0f allocations, %d bytes per run", allocs, bytesPerRun)
	// The error value is built with fmt.Errorf: a handful of small allocations.
	if allocs > 10 {
		t.Errorf("%.0f allocations per refusal, want at most 10", allocs)
	}
	if bytesPerRun > 4<<10 {
		t.Errorf("%d bytes allocated per refusal, want under 4 KiB (nothing like 1 GiB)", bytesPerRun)
	}
}

// TestReadFrameStalledLargeFrame shows that a frame under the cap whose bytes
// do not arrive pins at most allocChunk, not its declared length.
func TestReadFrameStalledLargeFrame(t *testing.T) {
	const declared = 64 << 20
	input := append(varint.ToUvarint(declared), "abcdefghij"...)
	run := func() {
		_, err := NewFrameReader(bytes.NewReader(input), 128<<20).ReadFrame()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
		}
	}
	// allocChunk (1 MiB) plus small change; a fixed bound, so that a larger
	// allocChunk fails here too.
	const bound = 2 << 20
	if b := allocatedBytes(5, run); b > bound {
		t.Fatalf("%d bytes allocated for a stalled %d-byte frame, want at most %d", b, declared, bound)
	}
}

func TestReadFrameReserve(t *testing.T) {
	var stream bytes.Buffer
	for _, p := range [][]byte{[]byte("first"), {}, randomBytes(allocChunk+5, 3), []byte("last")} {
		if err := WriteFrame(&stream, p); err != nil {
			t.Fatal(err)
		}
	}
	fr := NewFrameReader(bytes.NewReader(stream.Bytes()), 2*allocChunk)
	var asked []int
	reserve := func(n int) error { asked = append(asked, n); return nil }
	for i, size := range []int{5, 0, allocChunk + 5, 4} {
		p, err := fr.ReadFrameReserve(reserve)
		// A small payload comes from the pool (capacity up to twice its
		// length); a large one is allocated at exactly what was reserved.
		if err != nil || len(p) != size || size > pooledMax && cap(p) != size || cap(p) > 2*size {
			t.Fatalf("frame %d: %d bytes (cap %d), %v; want exactly %d", i, len(p), cap(p), err, size)
		}
	}
	if _, err := fr.ReadFrameReserve(reserve); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
	if want := []int{5, 0, allocChunk + 5, 4}; !slices.Equal(asked, want) {
		t.Fatalf("reserve was asked for %v, want %v", asked, want)
	}

	// Over the cap: refused as by ReadFrame, and reserve is never asked.
	asked = nil
	_, err := NewFrameReader(bytes.NewReader(varint.ToUvarint(1<<30)), 0).ReadFrameReserve(reserve)
	if !errors.Is(err, ErrFrameTooLarge) || len(asked) != 0 {
		t.Fatalf("over the cap: %v, reserve asked %v", err, asked)
	}
}

// TestReadFrameReserveRefused: a refusal wraps ErrReserveRefused and the
// caller's error, allocates nothing for the declared 8 MiB and reads none of
// the payload.
func TestReadFrameReserveRefused(t *testing.T) {
	busy := errors.New("scope is full")
	payload := []byte("payload bytes")
	input := append(varint.ToUvarint(DefaultMaxMessage), payload...)
	src := bytes.NewReader(input)
	br := bufio.NewReaderSize(src, 16)
	run := func() {
		src.Reset(input)
		br.Reset(src)
		_, err := NewFrameReader(br, 0).ReadFrameReserve(func(n int) error {
			if n != DefaultMaxMessage {
				t.Errorf("reserve(%d), want the declared %d", n, DefaultMaxMessage)
			}
			return busy
		})
		if !errors.Is(err, ErrReserveRefused) || !errors.Is(err, busy) {
			t.Fatalf("err = %v, want ErrReserveRefused and the scope's error", err)
		}
	}
	run()
	rest, _ := io.ReadAll(br)
	if !bytes.Equal(rest, payload) {
		t.Fatalf("after the refusal %q is left to read, want the whole payload %q", rest, payload)
	}
	if b := allocatedBytes(20, run); b > 4<<10 {
		t.Fatalf("%d bytes allocated per refusal of an 8 MiB frame, want under 4 KiB", b)
	}
}

// TestFrameReaderWait: Wait reports a waiting frame without consuming it,
// io.EOF at a clean end, and the reader's error otherwise.
func TestFrameReaderWait(t *testing.T) {
	var stream bytes.Buffer
	if err := WriteFrame(&stream, []byte("next")); err != nil {
		t.Fatal(err)
	}
	fr := NewFrameReader(bytes.NewReader(stream.Bytes()), 0)
	if err := fr.Wait(); err != nil {
		t.Fatalf("Wait with a frame waiting: %v", err)
	}
	if p, err := fr.ReadFrame(); err != nil || string(p) != "next" {
		t.Fatalf("the frame after Wait: %q, %v", p, err)
	}
	if err := fr.Wait(); err != io.EOF {
		t.Fatalf("Wait at the end: %v, want io.EOF", err)
	}
	boom := errors.New("stream reset")
	if err := NewFrameReader(iotest.ErrReader(boom), 0).Wait(); !errors.Is(err, boom) || errors.Is(err, io.EOF) {
		t.Fatalf("Wait on a failing reader: %v, want its error", err)
	}
	// A stream that ends inside a frame is not a clean end: Wait sees its
	// first byte, ReadFrame the truncation.
	fr = NewFrameReader(bytes.NewReader([]byte{0x05, 'a'}), 0)
	if err := fr.Wait(); err != nil {
		t.Fatalf("Wait on a truncated frame: %v", err)
	}
	if _, err := fr.ReadFrame(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame: %v", err)
	}
}

// allocatedBytes returns the average number of heap bytes f allocates.
func allocatedBytes(runs int, f func()) uint64 {
	f() // warm up
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, 0x6d637076))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// FuzzReadFrame feeds arbitrary bytes to a FrameReader with a small cap. It
// must never panic, never return a frame over the cap, fail only with the
// documented errors, and the frames it returns must re-encode to a prefix of
// the input: the whole input when it ended with io.EOF.
func FuzzReadFrame(f *testing.F) {
	const maxFrame = 64
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := NewFrameReader(bytes.NewReader(data), maxFrame)
		var reencoded bytes.Buffer
		for {
			p, err := fr.ReadFrame()
			if err != nil {
				switch {
				case err == io.EOF:
					if !bytes.Equal(reencoded.Bytes(), data) {
						t.Fatalf("clean EOF but frames re-encode to % x, input % x", reencoded.Bytes(), data)
					}
				case errors.Is(err, io.ErrUnexpectedEOF),
					errors.Is(err, ErrFrameTooLarge),
					errors.Is(err, ErrMalformedLength):
				default:
					t.Fatalf("unexpected error kind: %v", err)
				}
				break
			}
			if len(p) > maxFrame {
				t.Fatalf("frame of %d bytes over the %d-byte cap", len(p), maxFrame)
			}
			if err := WriteFrame(&reencoded, p); err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(data, reencoded.Bytes()) {
				t.Fatalf("frames re-encode to % x, not a prefix of the input % x", reencoded.Bytes(), data)
			}
		}
	})
}

func BenchmarkWriteReadFrame(b *testing.B) {
	for _, bc := range []struct {
		name string
		size int
	}{{"1KiB", 1 << 10}, {"1MiB", 1 << 20}} {
		size := bc.size
		b.Run(bc.name, func(b *testing.B) {
			payload := randomBytes(size, 7)
			var stream bytes.Buffer
			stream.Grow(size + varint.MaxLenUvarint63)
			fr := NewFrameReader(&stream, DefaultMaxMessage)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := WriteFrame(&stream, payload); err != nil {
					b.Fatal(err)
				}
				p, err := fr.ReadFrame()
				if err != nil || len(p) != size {
					b.Fatalf("read %d bytes: %v", len(p), err)
				}
			}
		})
	}
}
