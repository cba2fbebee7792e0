package node

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	pool "github.com/libp2p/go-buffer-pool"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	relayclient "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/zeebo/blake3"

	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

const mib = 1 << 20

// digests are a content's digests by both hashes, in lowercase hex.
type digests struct{ SHA256, BLAKE3 string }

// of returns the digest of h.
func (d digests) of(h store.Hash) string {
	if h == store.HashBLAKE3 {
		return d.BLAKE3
	}
	return d.SHA256
}

// digestsOf hashes data by both hashes.
func digestsOf(data []byte) digests {
	s, b := sha256.Sum256(data), blake3.Sum256(data)
	return digests{hex.EncodeToString(s[:]), hex.EncodeToString(b[:])}
}

// blobFile writes size pseudo-random bytes (seeded, so incompressible and
// reproducible) to a temp file and returns its path and digests.
func blobFile(t testing.TB, size int64, seed uint64) (string, digests) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "blob.bin")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	h, b := sha256.New(), blake3.New()
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	if _, err := io.CopyN(io.MultiWriter(f, h, b), r, size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, digests{hex.EncodeToString(h.Sum(nil)), hex.EncodeToString(b.Sum(nil))}
}

// sendVersions are the versions whose behaviour the table tests check
// alike: those a sender that does not know the hash uses (1.0.0 needs it
// up front and has tests of its own).
var sendVersions = []*blobVersion{blob12, blob11}

// eachVersion runs f as a subtest for each of sendVersions, named by the
// version ("1.2.0").
func eachVersion(t *testing.T, f func(t *testing.T, v *blobVersion)) {
	t.Helper()
	for _, v := range sendVersions {
		t.Run(path.Base(string(v.id)), func(t *testing.T) { f(t, v) })
	}
}

// serveUpTo makes n a node of an older release: it stops serving the blob
// versions newer than v. Call it before a peer connects, so that identify
// tells the peer.
func serveUpTo(n *Node, v *blobVersion) {
	for _, w := range blobVersions {
		if w == v {
			return
		}
		n.Host().RemoveStreamHandler(w.id)
	}
}

// blobPair is pair whose server serves the blob versions up to v: a sender
// uses v.
func blobPair(t testing.TB, v *blobVersion, mod func(*Config)) (a, b *Node) {
	a, b = pair(t, mod)
	serveUpTo(b, v)
	return a, b
}

// checkSent checks SendFile's result: name and size, the digest of v's hash
// and no other.
func checkSent(t testing.TB, v *blobVersion, info store.FileInfo, name string, size int64, want digests) {
	t.Helper()
	other := store.HashSHA256
	if v.alg == other {
		other = store.HashBLAKE3
	}
	if info.Filename != name || info.Size != size || info.Sum(v.alg) != want.of(v.alg) || info.Sum(other) != "" {
		t.Fatalf("SendFile over %s: %+v, want %s, %d bytes, %s %s alone", v.id, info, name, size, v.alg, want.of(v.alg))
	}
}

// addrOfKind returns n's first address whose multiaddr contains kind
// ("/tcp/" or "/quic-v1").
func addrOfKind(t testing.TB, n *Node, kind string) protocol.Address {
	t.Helper()
	for _, s := range n.P2PAddrs() {
		if strings.Contains(s, kind) {
			a, err := protocol.ParseAddress(s)
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
	}
	t.Fatalf("no %s address in %v", kind, n.P2PAddrs())
	return protocol.Address{}
}

// countingStream counts the bytes read from a stream, and keeps the first
// bytes of the stream.
type countingStream struct {
	network.Stream
	n    *atomic.Int64
	head *[]byte // guarded by blobWatch.mu, as the handler's goroutine reads
	mu   *sync.Mutex
	read *chan struct{} // blobWatch.read; nil: none
}

func (c countingStream) Read(p []byte) (int, error) {
	m, err := c.Stream.Read(p)
	c.n.Add(int64(m))
	c.mu.Lock()
	if k := min(m, 512-len(*c.head)); k > 0 {
		*c.head = append(*c.head, p[:k]...)
	}
	if c.read != nil && *c.read != nil && m > 0 {
		close(*c.read)
		*c.read = nil
	}
	c.mu.Unlock()
	return m, err
}

// blobWatch records what n's blob handlers read: the bytes, and for each
// stream its protocol and first bytes (the header frame).
type blobWatch struct {
	bytes atomic.Int64
	mu    sync.Mutex
	heads []*[]byte
	proto []libp2pproto.ID
	// read is closed (and set to nil) by the next read of a handler; mu
	// guards it.
	read chan struct{}
}

// waitBytes waits until n's handlers have read want bytes in all, at most
// 10 s; it wakes on each of their reads.
func (w *blobWatch) waitBytes(t testing.TB, want int64) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		if w.read == nil {
			w.read = make(chan struct{})
		}
		read := w.read
		w.mu.Unlock()
		if w.bytes.Load() >= want {
			return
		}
		select {
		case <-read:
		case <-deadline.C:
			t.Fatalf("the blob handlers read %d bytes, want %d", w.bytes.Load(), want)
		}
	}
}

// streams returns the protocol and the first bytes of each stream so far.
func (w *blobWatch) streams() (protos []libp2pproto.ID, heads []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, h := range w.heads {
		protos = append(protos, w.proto[i])
		heads = append(heads, string(*h))
	}
	return protos, heads
}

// watchBlob makes n's blob handlers, of the protocols given (default those
// n serves), record what they read.
func watchBlob(n *Node, ids ...libp2pproto.ID) *blobWatch {
	if len(ids) == 0 {
		for _, id := range n.Host().Mux().Protocols() {
			if blobVersionOf(id) != nil {
				ids = append(ids, id)
			}
		}
	}
	w := &blobWatch{}
	for _, id := range ids {
		n.Host().SetStreamHandler(id, func(s network.Stream) {
			head := new([]byte)
			w.mu.Lock()
			w.heads, w.proto = append(w.heads, head), append(w.proto, s.Protocol())
			w.mu.Unlock()
			n.handleBlob(countingStream{Stream: s, n: &w.bytes, head: head, mu: &w.mu, read: &w.read})
		})
	}
	return w
}

// countBlobBytes makes n's blob handlers count the bytes they read (header,
// data and all) into the returned counter.
func countBlobBytes(n *Node) *atomic.Int64 { return &watchBlob(n).bytes }

// waitBlobAudits waits for n's audit log to hold want blob lines (the
// handler writes its line after answering) and returns them.
func waitBlobAudits(t testing.TB, n *Node, want int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		au := blobAudits(t, n)
		if len(au) >= want || time.Now().After(deadline) {
			return au
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// storedSHA reads a stored file back and hashes it.
func storedSHA(t testing.TB, n *Node, name string) string {
	t.Helper()
	f, _, err := n.Store().Files().Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// hiddenEntries lists the files dir of n behind the store's back, and
// returns the names that List does not show.
func hiddenEntries(t testing.TB, n *Node) []string {
	t.Helper()
	ents, err := os.ReadDir(n.Store().Files().Dir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if store.ValidateName(e.Name()) != nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// blobAudits returns n's audit lines of blob transfers.
func blobAudits(t testing.TB, n *Node) []map[string]any {
	var out []map[string]any
	for _, l := range readAudit(t, n) {
		if l["method"] == "blob" {
			out = append(out, l)
		}
	}
	return out
}

func TestBlobRoundTrip64MiB(t *testing.T) {
	const size = 64 * mib
	path, sum := blobFile(t, size, 1)
	eachVersion(t, func(t *testing.T, v *blobVersion) {
		for _, kind := range []string{"/tcp/", "/quic-v1"} {
			t.Run(strings.Trim(kind, "/"), func(t *testing.T) {
				a, b := blobPair(t, v, nil)
				w := watchBlob(b)
				wire := &w.bytes
				start := time.Now()
				var calls atomic.Int64
				info, err := a.Client().SendFile(ctxT(t), addrOfKind(t, b, kind), path, SendOptions{Name: "big.bin",
					Progress: func(SendProgress) { calls.Add(1) }})
				if err != nil {
					t.Fatalf("SendFile: %v", err)
				}
				t.Logf("%s: 64 MiB in %v", kind, time.Since(start))
				checkSent(t, v, info, "big.bin", size, sum)
				if got := storedSHA(t, b, "big.bin"); got != sum.SHA256 {
					t.Fatalf("stored sha %s, want %s", got, sum.SHA256)
				}
				if calls.Load() < 2 {
					t.Fatalf("progress called %d times", calls.Load())
				}
				// Raw bytes on the wire: no base64, no JSON per chunk.
				in := wire.Load()
				if in < size || in > size+size/100 {
					t.Fatalf("receiver read %d bytes of blob stream for a %d-byte file", in, size)
				}
				if h := hiddenEntries(t, b); len(h) != 0 {
					t.Fatalf("left behind: %v", h)
				}
				au := waitBlobAudits(t, b, 1)
				if len(au) != 1 || au[0]["outcome"] != "ok" || au[0]["skill"] != "upload_file" || au[0]["caller"] != a.ID().String() {
					t.Fatalf("audit: %v", au)
				}
				// One stream of the version, whose header does not wait for
				// the hash.
				protos, heads := w.streams()
				if len(protos) != 1 || protos[0] != v.id {
					t.Fatalf("streams of %v, want one of %s", protos, v.id)
				}
				if header, _, _ := strings.Cut(heads[0], "}"); !strings.Contains(header, `"name":"big.bin","size":67108864`) || strings.Contains(header, "sha256") || strings.Contains(header, "blake3") {
					t.Fatalf("header %q: want name and size, no hash", header)
				}
			})
		}
	})
}

func TestBlobResumeAfterBrokenConnection(t *testing.T) {
	const size = 32 * mib
	path, sum := blobFile(t, size, 2)
	eachVersion(t, func(t *testing.T, v *blobVersion) {
		a, b := blobPair(t, v, nil)
		var (
			mu     sync.Mutex
			starts []SendProgress // the first report of each attempt
			broken atomic.Bool
		)
		info, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{Progress: func(p SendProgress) {
			mu.Lock()
			if p.Err == nil && (len(starts) == 0 || starts[len(starts)-1].Attempt != p.Attempt) {
				starts = append(starts, p)
			}
			mu.Unlock()
			if p.Sent >= 8*mib && broken.CompareAndSwap(false, true) {
				_ = a.Host().Network().ClosePeer(b.ID()) // the stream breaks mid-transfer
			}
		}})
		if err != nil {
			t.Fatalf("SendFile: %v", err)
		}
		checkSent(t, v, info, "blob.bin", size, sum)
		if storedSHA(t, b, "blob.bin") != sum.SHA256 {
			t.Fatalf("hash mismatch after resume: %+v", info)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(starts) < 2 || starts[0].Offset != 0 || starts[1].Attempt != 2 || starts[1].Offset <= 0 || starts[1].Offset > 8*mib+blobBuffer {
			t.Fatalf("attempts started at %+v; want a second attempt resuming at the receiver's offset", starts)
		}
		t.Logf("second attempt resumed at %d", starts[1].Offset)
		if h := hiddenEntries(t, b); len(h) != 0 {
			t.Fatalf("left behind: %v", h)
		}
		au := waitBlobAudits(t, b, 2)
		if len(au) != 2 || au[0]["outcome"] != "error" || au[1]["outcome"] != "ok" {
			t.Fatalf("audit: %v", au)
		}
	})
}

// A sender that gives up leaves a hidden partial upload; the receiver
// restarts; the next send resumes from the receiver's offset.
func TestBlobResumeAcrossReceiverRestart(t *testing.T) {
	const size = 16 * mib
	path, sum := blobFile(t, size, 3)
	eachVersion(t, func(t *testing.T, v *blobVersion) {
		a := newTestNode(t, nil)
		bDir := t.TempDir()
		policy := writePolicy(t, map[string][]string{a.ID().String(): {"upload_file"}})
		b := newTestNode(t, func(c *Config) { c.DataDir, c.PolicyFile = bDir, policy })
		serveUpTo(b, v)
		var once sync.Once
		_, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{MaxAttempts: 1, Progress: func(p SendProgress) {
			if p.Sent >= 4*mib {
				once.Do(func() { _ = a.Host().Network().ClosePeer(b.ID()) })
			}
		}})
		if err == nil || !strings.Contains(err.Error(), "send again to resume") {
			t.Fatalf("broken send with one attempt: %v", err)
		}
		if l, _ := b.Store().Files().List(); len(l) != 0 {
			t.Fatalf("a partial file is visible: %v", l)
		}
		if h := hiddenEntries(t, b); len(h) != 1 || !strings.HasPrefix(h[0], ".mcpv2-part-") {
			t.Fatalf("want one hidden partial upload, have %v", h)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		b = newTestNode(t, func(c *Config) { c.DataDir, c.PolicyFile = bDir, policy })
		serveUpTo(b, v)
		var first SendProgress
		var got atomic.Bool
		info, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{Progress: func(p SendProgress) {
			if got.CompareAndSwap(false, true) {
				first = p
			}
		}})
		if err != nil {
			t.Fatalf("resumed SendFile: %v", err)
		}
		if first.Offset <= 0 {
			t.Fatalf("the send after the restart started at %d, not at the kept offset", first.Offset)
		}
		checkSent(t, v, info, "blob.bin", size, sum)
		if storedSHA(t, b, "blob.bin") != sum.SHA256 {
			t.Fatalf("hash mismatch: %+v", info)
		}
		if h := hiddenEntries(t, b); len(h) != 0 {
			t.Fatalf("left behind: %v", h)
		}
	})
}

func TestBlobHashMismatch(t *testing.T) {
	path, _ := blobFile(t, 3*mib, 4)
	_, otherSum := blobFile(t, 3*mib, 5)
	a, b := pair(t, nil)
	_, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{SHA256: otherSum.SHA256}) // the sender lies
	if codeOf(err) != protocol.CodeInvalidParams || !strings.Contains(err.Error(), "content's sha256 is") || !strings.Contains(err.Error(), "hash mismatch") || !strings.Contains(err.Error(), "discarded") {
		t.Fatalf("lying sender: %v", err)
	}
	if l, _ := b.Store().Files().List(); len(l) != 0 {
		t.Fatalf("visible after a mismatch: %v", l)
	}
	if h := hiddenEntries(t, b); len(h) != 0 {
		t.Fatalf("partial left after a mismatch: %v", h)
	}
	if au := waitBlobAudits(t, b, 1); len(au) != 1 || au[0]["code"] != float64(protocol.CodeInvalidParams) {
		t.Fatalf("audit: %v", au)
	}
}

func TestBlobOverCapRefusedBeforeAnyByte(t *testing.T) {
	a, b := pair(t, func(c *Config) { c.MaxFile = mib })
	wire := countBlobBytes(b)
	path, _ := blobFile(t, 2*mib, 6)
	var sent atomic.Int64
	_, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{Progress: func(p SendProgress) { sent.Store(p.Sent) }})
	if codeOf(err) != protocol.CodeInvalidParams || !strings.Contains(err.Error(), "over this node's 1048576-byte file limit") {
		t.Fatalf("over cap: %v", err)
	}
	if in := wire.Load(); in > MaxBlobHeader {
		t.Fatalf("the receiver read %d bytes before refusing", in)
	}
	if sent.Load() != 0 {
		t.Fatalf("progress reported %d bytes sent", sent.Load())
	}
	if h := hiddenEntries(t, b); len(h) != 0 {
		t.Fatalf("left behind: %v", h)
	}
	// Exactly the cap is fine.
	path, sum := blobFile(t, mib, 7)
	if info, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{}); err != nil || info.BLAKE3 != sum.BLAKE3 {
		t.Fatalf("at the cap: %+v, %v", info, err)
	}
}

// rawBlob opens a blob 1.0.0 stream from a to b by hand.
func rawBlob(t *testing.T, a, b *Node) (network.Stream, *transport.FrameReader) {
	t.Helper()
	return rawBlobProto(t, a, b, libp2pproto.ID(protocol.BlobProtocolID))
}

// rawBlobProto opens a blob stream of protocol id from a to b by hand.
func rawBlobProto(t *testing.T, a, b *Node, id libp2pproto.ID) (network.Stream, *transport.FrameReader) {
	t.Helper()
	pid, err := a.Client().Connect(ctxT(t), addrOf(t, b))
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.Host().NewStream(ctxT(t), pid, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Reset() })
	_ = s.SetDeadline(time.Now().Add(20 * time.Second))
	return s, transport.NewFrameReader(s, maxBlobReply)
}

// rawHeader sends header bytes on a fresh 1.0.0 stream and returns the reply.
func rawHeader(t *testing.T, a, b *Node, header []byte) blobOffset {
	t.Helper()
	return rawHeaderProto(t, a, b, libp2pproto.ID(protocol.BlobProtocolID), header)
}

// rawHeaderProto sends header bytes on a fresh stream of protocol id and
// returns the reply.
func rawHeaderProto(t *testing.T, a, b *Node, id libp2pproto.ID, header []byte) blobOffset {
	t.Helper()
	s, fr := rawBlobProto(t, a, b, id)
	if err := transport.WriteFrame(s, header); err != nil {
		t.Fatal(err)
	}
	raw, err := fr.ReadFrame()
	if err != nil {
		t.Fatalf("reply to %.80q: %v", header, err)
	}
	var r blobOffset
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("reply %q: %v", raw, err)
	}
	_ = s.Close()
	return r
}

// headerJSON is a header of 1.0.0 or 1.1.0 (sum: the SHA-256).
func headerJSON(name string, size int64, sum string) []byte {
	return headerOf(blob11, name, size, sum)
}

// headerOf is a header of version v, declaring the digest sum of v's hash
// (none when empty).
func headerOf(v *blobVersion, name string, size int64, sum string) []byte {
	h := BlobHeader{Name: name, Size: size, SHA256: sum}
	if v.alg == store.HashBLAKE3 {
		h.SHA256, h.BLAKE3 = "", sum
	}
	b, _ := json.Marshal(h)
	return b
}

func TestBlobHeaderRefusals(t *testing.T) {
	a, b := pair(t, nil)
	sum := strings.Repeat("ab", 32)
	for _, c := range []struct {
		header []byte
		code   int
	}{
		{headerJSON("../escape", 1, sum), protocol.CodeInvalidParams},
		{headerJSON("a/b", 1, sum), protocol.CodeInvalidParams},
		{headerJSON(`..\x`, 1, sum), protocol.CodeInvalidParams},
		{headerJSON("/etc/passwd", 1, sum), protocol.CodeInvalidParams},
		{headerJSON("", 1, sum), protocol.CodeInvalidParams},
		{headerJSON(".mcpv2-part-00", 1, sum), protocol.CodeInvalidParams},
		{headerJSON(".mcpv2-tmp-00", 1, sum), protocol.CodeInvalidParams},
		{headerJSON("ok", -1, sum), protocol.CodeInvalidParams},
		{headerJSON("ok", 1, "abc"), protocol.CodeInvalidParams},
		{headerJSON("ok", 1, strings.ToUpper(sum)), protocol.CodeInvalidParams},
		{[]byte(`{"name":"ok","size":1,"sha256":"` + sum + `","NAME":"../x"}`), protocol.CodeInvalidRequest},
		{[]byte(`{"name":"ok","size":1.5,"sha256":"` + sum + `"}`), protocol.CodeInvalidRequest},
		{[]byte(`{"name":"ok","size":1}`), protocol.CodeInvalidRequest},
		{[]byte(`["ok",1]`), protocol.CodeInvalidRequest},
		{[]byte(`{"name":`), protocol.CodeParseError},
		{bytes.Repeat([]byte("x"), MaxBlobHeader+1), protocol.CodeInvalidRequest},
	} {
		r := rawHeader(t, a, b, c.header)
		if r.Error == nil || r.Error.Code != c.code {
			t.Errorf("header %.60q: reply %+v, want code %d", c.header, r, c.code)
		}
	}
	if h, _ := os.ReadDir(b.Store().Files().Dir()); len(h) != 0 {
		t.Fatalf("refused headers left %v", h)
	}
	if _, err := os.Stat(filepath.Join(b.Store().Files().Dir(), "..", "escape")); err == nil {
		t.Fatal("traversal wrote outside the files dir")
	}
	// The sender checks the name itself too.
	path, _ := blobFile(t, 10, 8)
	if _, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{Name: "../x"}); !errors.Is(err, store.ErrInvalidName) {
		t.Fatalf("sender with ../x: %v", err)
	}
}

func TestBlobNotPermitted(t *testing.T) {
	a := newTestNode(t, nil)
	b := newTestNode(t, nil) // no policy: upload_file is not granted
	path, sum := blobFile(t, mib, 9)
	_, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{})
	if codeOf(err) != protocol.CodeNotPermitted || !strings.Contains(err.Error(), "upload_file") {
		t.Fatalf("ungranted: %v", err)
	}
	au := waitBlobAudits(t, b, 1)
	if len(au) != 1 || au[0]["code"] != float64(protocol.CodeNotPermitted) || au[0]["skill"] != "upload_file" || au[0]["caller"] != a.ID().String() {
		t.Fatalf("audit: %v", au)
	}
	if h, _ := os.ReadDir(b.Store().Files().Dir()); len(h) != 0 {
		t.Fatalf("refused transfer left %v", h)
	}

	// A mesh session minted with the shared secret grants it (SPEC §6) ...
	s1 := newTestNode(t, func(c *Config) { c.Secret = []byte("s3cret") })
	c1 := newTestNode(t, func(c *Config) { c.Secret = []byte("s3cret") })
	if info, err := c1.Client().SendFile(ctxT(t), addrOf(t, s1), path, SendOptions{}); err != nil || info.BLAKE3 != sum.BLAKE3 {
		t.Fatalf("with a mesh session: %+v, %v", info, err)
	}
	// ... and a token minted with another secret is refused.
	c2 := newTestNode(t, func(c *Config) { c.Secret = []byte("wrong") })
	if _, err := c2.Client().SendFile(ctxT(t), addrOf(t, s1), path, SendOptions{Name: "other"}); codeOf(err) != protocol.CodeInvalidSession {
		t.Fatalf("bad session: %v", err)
	}
}

// A sender that stalls is dropped after the idle timeout; what it sent is
// kept, and a newer transfer of the same upload takes over from a stream
// that is still open.
func TestBlobStallAndTakeover(t *testing.T) {
	eachVersion(t, func(t *testing.T, v *blobVersion) {
		a, b := blobPair(t, v, nil)
		b.blobIdleTest.Store(int64(500 * time.Millisecond))
		watch := watchBlob(b)
		path, sum := blobFile(t, 2*mib, 10)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}

		// Stall: header, 1000 bytes, then nothing. The receiver resets.
		header := headerOf(v, "blob.bin", int64(len(data)), "") // no hash up front
		s, fr := rawBlobProto(t, a, b, v.id)
		if err := transport.WriteFrame(s, header); err != nil {
			t.Fatal(err)
		}
		if raw, err := fr.ReadFrame(); err != nil || string(raw) != `{"offset":0}` {
			t.Fatalf("offset: %q %v", raw, err)
		}
		if _, err := s.Write(data[:1000]); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := s.Read(make([]byte, 1)); err == nil {
			t.Fatal("read from a stalled transfer succeeded")
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("stalled sender dropped after %v", d)
		}

		// Takeover: a stream that is still open (say its connection died
		// unnoticed) is superseded by a newer transfer of the same upload.
		b.blobIdleTest.Store(0)
		read := watch.bytes.Load() // the stalled stream's: its handler has ended
		s, fr = rawBlobProto(t, a, b, v.id)
		if err := transport.WriteFrame(s, header); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`{"offset":1000,%q:%q}`, v.prefixMember(), digestsOf(data[:1000]).of(v.alg))
		if raw, err := fr.ReadFrame(); err != nil || string(raw) != want {
			t.Fatalf("resume offset after the stall: %q %v; want %s", raw, err, want)
		}
		if _, err := s.Write(data[1000:5000]); err != nil {
			t.Fatal(err)
		}
		var frame bytes.Buffer
		if err := transport.WriteFrame(&frame, header); err != nil {
			t.Fatal(err)
		}
		watch.waitBytes(t, read+int64(frame.Len())+4000) // the receiver took the bytes in
		var first atomic.Int64
		first.Store(-1)
		start = time.Now()
		info, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{Progress: func(p SendProgress) {
			first.CompareAndSwap(-1, p.Offset)
		}})
		if err != nil {
			t.Fatalf("takeover: %v", err)
		}
		checkSent(t, v, info, "blob.bin", 2*mib, sum)
		if first.Load() != 5000 {
			t.Fatalf("takeover resumed at %d, want 5000", first.Load())
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("takeover took %v", d)
		}
		if _, err := s.Read(make([]byte, 1)); err == nil {
			t.Fatal("the superseded stream is still open")
		}
	})
}

func TestBlobAlreadyStored(t *testing.T) {
	path, sum := blobFile(t, 4*mib, 11)
	eachVersion(t, func(t *testing.T, v *blobVersion) {
		a, b := blobPair(t, v, nil)
		if _, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{}); err != nil {
			t.Fatal(err)
		}
		var first atomic.Int64
		first.Store(-1)
		info, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{Progress: func(p SendProgress) { first.CompareAndSwap(-1, p.Offset) }})
		if err != nil {
			t.Fatalf("resend: %v", err)
		}
		checkSent(t, v, info, "blob.bin", 4*mib, sum)
		if first.Load() != 4*mib {
			t.Fatalf("a resend of a stored file started at %d, want the end", first.Load())
		}
		// An empty file goes through too.
		empty := filepath.Join(t.TempDir(), "empty")
		if err := os.WriteFile(empty, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		info, err = a.Client().SendFile(ctxT(t), addrOf(t, b), empty, SendOptions{})
		if err != nil {
			t.Fatalf("empty file: %v", err)
		}
		checkSent(t, v, info, "empty", 0, digestsOf(nil))
	})
}

func TestBlobSendErrors(t *testing.T) {
	a, b := pair(t, nil)
	// Not a mesh address.
	edge, err := protocol.ParseAddress("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	path, _ := blobFile(t, 10, 12)
	if _, err := a.Client().SendFile(ctxT(t), edge, path, SendOptions{}); err == nil || !strings.Contains(err.Error(), "not a mesh address") {
		t.Fatalf("edge address: %v", err)
	}
	if _, err := a.Client().SendFile(ctxT(t), addrOf(t, b), filepath.Join(t.TempDir(), "missing"), SendOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := a.Client().SendFile(ctxT(t), addrOf(t, b), t.TempDir(), SendOptions{}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("directory: %v", err)
	}
	// A peer without the blob protocols: a clear error, not retries.
	for _, v := range blobVersions {
		b.Host().RemoveStreamHandler(v.id)
	}
	start := time.Now()
	if _, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{}); err == nil || !strings.Contains(err.Error(), "serves none of [/mcpv2/blob/1.2.0 /mcpv2/blob/1.1.0 /mcpv2/blob/1.0.0]") {
		t.Fatalf("no blob protocol: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v: retried a permanent failure", d)
	}
}

func TestDecodeBlobHeader(t *testing.T) {
	sum := strings.Repeat("0f", 32)
	h, perr := DecodeBlobHeader([]byte(`{"name":"a.txt","size":12,"sha256":"` + sum + `","session":"tok"}`))
	if perr != nil || h != (BlobHeader{Name: "a.txt", Size: 12, SHA256: sum, Session: "tok"}) {
		t.Fatalf("valid header: %+v, %v", h, perr)
	}
	for _, c := range []struct {
		in   string
		code int
	}{
		{`{"name":"a","size":1,"sha256":"` + sum + `","name":"b"}`, protocol.CodeInvalidRequest},
		{`{"name":"a","size":1,"sha256":"` + sum + `","extra":1}`, protocol.CodeInvalidRequest},
		{`{"name":"a","Size":1,"sha256":"` + sum + `"}`, protocol.CodeInvalidRequest},
		{`{"name":"a","size":"1","sha256":"` + sum + `"}`, protocol.CodeInvalidRequest},
		{`{"name":"a","size":1e3,"sha256":"` + sum + `"}`, protocol.CodeInvalidRequest},
		{`{"name":"a","size":99999999999999999999,"sha256":"` + sum + `"}`, protocol.CodeInvalidRequest},
		{`{"name":1,"size":1,"sha256":"` + sum + `"}`, protocol.CodeInvalidRequest},
		{`{"name":"a","size":1,"sha256":"` + sum + `"} {}`, protocol.CodeParseError},
		{`{"name":"a","size":1,"sha256":"` + sum + `"}x`, protocol.CodeParseError},
		{`null`, protocol.CodeInvalidRequest},
		{``, protocol.CodeParseError},
		{`{"name":"a\u0000b","size":1,"sha256":"` + sum + `"}`, protocol.CodeInvalidParams},
		{"{\"name\":\"a\xff\",\"size\":1,\"sha256\":\"" + sum + "\"}", protocol.CodeParseError},
	} {
		if _, perr := DecodeBlobHeader([]byte(c.in)); perr == nil || perr.Code != c.code {
			t.Errorf("%.70s: %v, want code %d", c.in, perr, c.code)
		}
	}
}

func TestDecodeBlobHeader11(t *testing.T) {
	sum := strings.Repeat("0f", 32)
	for in, want := range map[string]BlobHeader{
		`{"name":"a.txt","size":12}`:                                   {Name: "a.txt", Size: 12},
		`{"size":0,"name":"a","session":"tok","restart":true}`:         {Name: "a", Session: "tok", Restart: true},
		`{"name":"a","size":1,"sha256":"` + sum + `","restart":false}`: {Name: "a", Size: 1, SHA256: sum},
	} {
		if h, perr := DecodeBlobHeader11([]byte(in)); perr != nil || h != want {
			t.Errorf("%s: %+v, %v; want %+v", in, h, perr, want)
		}
	}
	for _, c := range []struct {
		in   string
		code int
	}{
		{`{"name":"a","size":1,"restart":1}`, protocol.CodeInvalidRequest},
		{`{"name":"a","size":1,"restart":"true"}`, protocol.CodeInvalidRequest},
		{`{"name":"a","size":1,"restart":true,"restart":false}`, protocol.CodeInvalidRequest},
		{`{"name":"a","size":1,"Restart":true}`, protocol.CodeInvalidRequest},
		{`{"name":"a","size":1,"sha256":""}`, protocol.CodeInvalidParams},
		{`{"name":"a","size":1,"sha256":"` + strings.ToUpper(sum) + `"}`, protocol.CodeInvalidParams},
		{`{"name":"a"}`, protocol.CodeInvalidRequest},
		{`{"size":1}`, protocol.CodeInvalidRequest},
		{`{"name":"../a","size":1}`, protocol.CodeInvalidParams},
		{`{"name":"a","size":-1}`, protocol.CodeInvalidParams},
		{`{"name":"a","size":1,"prefix_sha256":"` + sum + `"}`, protocol.CodeInvalidRequest},
	} {
		if _, perr := DecodeBlobHeader11([]byte(c.in)); perr == nil || perr.Code != c.code {
			t.Errorf("%.70s: %v, want code %d", c.in, perr, c.code)
		}
	}
	// 1.0.0 knows no restart.
	if _, perr := DecodeBlobHeader([]byte(`{"name":"a","size":1,"sha256":"` + sum + `","restart":true}`)); perr == nil || perr.Code != protocol.CodeInvalidRequest {
		t.Errorf("1.0.0 header with restart: %v", perr)
	}
}

func TestDecodeBlobHeader12(t *testing.T) {
	sum := strings.Repeat("0f", 32)
	for in, want := range map[string]BlobHeader{
		`{"name":"a.txt","size":12}`:                                   {Name: "a.txt", Size: 12},
		`{"size":0,"name":"a","session":"tok","restart":true}`:         {Name: "a", Session: "tok", Restart: true},
		`{"name":"a","size":1,"blake3":"` + sum + `","restart":false}`: {Name: "a", Size: 1, BLAKE3: sum},
	} {
		if h, perr := decodeBlobHeader([]byte(in), blob12); perr != nil || h != want {
			t.Errorf("%s: %+v, %v; want %+v", in, h, perr, want)
		}
	}
	for _, c := range []struct {
		in   string
		code int
	}{
		// One hash a version: 1.2.0's is blake3.
		{`{"name":"a","size":1,"sha256":"` + sum + `"}`, protocol.CodeInvalidRequest},
		{`{"name":"a","size":1,"blake3":"` + sum + `","sha256":"` + sum + `"}`, protocol.CodeInvalidRequest},
		{`{"name":"a","size":1,"BLAKE3":"` + sum + `"}`, protocol.CodeInvalidRequest},
		{`{"name":"a","size":1,"blake3":"` + sum + `","blake3":"` + sum + `"}`, protocol.CodeInvalidRequest},
		{`{"name":"a","size":1,"blake3":""}`, protocol.CodeInvalidParams},
		{`{"name":"a","size":1,"blake3":"` + strings.ToUpper(sum) + `"}`, protocol.CodeInvalidParams},
		{`{"name":"a","size":1,"blake3":"` + sum + `00"}`, protocol.CodeInvalidParams},
		{`{"name":"a","size":1,"blake3":1}`, protocol.CodeInvalidRequest},
		{`{"name":"a","size":1,"restart":1}`, protocol.CodeInvalidRequest},
		{`{"name":"a"}`, protocol.CodeInvalidRequest},
		{`{"name":"../a","size":1}`, protocol.CodeInvalidParams},
		{`{"name":"a","size":-1}`, protocol.CodeInvalidParams},
		{`{"name":"a","size":1,"prefix_blake3":"` + sum + `"}`, protocol.CodeInvalidRequest},
		{`{"name":"a","size":1}x`, protocol.CodeParseError},
		{`{"name":"a","size":1,"session":"` + strings.Repeat("x", MaxBlobHeader) + `"}`, protocol.CodeInvalidRequest},
	} {
		if _, perr := decodeBlobHeader([]byte(c.in), blob12); perr == nil || perr.Code != c.code {
			t.Errorf("%.70s: %v, want code %d", c.in, perr, c.code)
		}
	}
	// And 1.1.0's is sha256.
	if _, perr := DecodeBlobHeader11([]byte(`{"name":"a","size":1,"blake3":"` + sum + `"}`)); perr == nil || perr.Code != protocol.CodeInvalidRequest {
		t.Errorf("1.1.0 header with blake3: %v", perr)
	}
}

func TestDecodeBlobTrailer(t *testing.T) {
	sum := strings.Repeat("a1", 32)
	for _, c := range []struct {
		alg, other store.Hash
		decode     func([]byte) (string, *protocol.Error)
	}{{store.HashSHA256, store.HashBLAKE3, DecodeBlobTrailer}, {store.HashBLAKE3, store.HashSHA256, func(b []byte) (string, *protocol.Error) { return decodeBlobTrailer(b, store.HashBLAKE3) }}} {
		t.Run(string(c.alg), func(t *testing.T) {
			m := `"` + string(c.alg) + `"`
			if got, perr := c.decode([]byte(`{` + m + `:"` + sum + `"}`)); perr != nil || got != sum {
				t.Fatalf("valid trailer: %q, %v", got, perr)
			}
			if got, perr := c.decode(trailerFrame(c.alg, sum)); perr != nil || got != sum {
				t.Fatalf("trailerFrame: %q, %v", got, perr)
			}
			for _, tc := range []struct {
				in   string
				code int
			}{
				{`{}`, protocol.CodeInvalidRequest},
				{`{` + m + `:"` + sum + `",` + m + `:"` + sum + `"}`, protocol.CodeInvalidRequest},
				{`{` + m + `:"` + sum + `","size":1}`, protocol.CodeInvalidRequest},
				{`{"` + string(c.other) + `":"` + sum + `"}`, protocol.CodeInvalidRequest},
				{`{` + m + `:"` + sum + `","` + string(c.other) + `":"` + sum + `"}`, protocol.CodeInvalidRequest},
				{`{` + strings.ToUpper(m) + `:"` + sum + `"}`, protocol.CodeInvalidRequest},
				{`{` + m + `:1}`, protocol.CodeInvalidRequest},
				{`{` + m + `:"` + strings.ToUpper(sum) + `"}`, protocol.CodeInvalidParams},
				{`{` + m + `:"` + sum[:62] + `"}`, protocol.CodeInvalidParams},
				{`["` + sum + `"]`, protocol.CodeInvalidRequest},
				{`{` + m + `:"` + sum + `"}{}`, protocol.CodeParseError},
				{"{" + m + ":\"\xff\"}", protocol.CodeParseError},
				{`{` + m + `:"` + sum + `","pad":"` + strings.Repeat("x", maxBlobTrailer) + `"}`, protocol.CodeInvalidRequest},
			} {
				if _, perr := c.decode([]byte(tc.in)); perr == nil || perr.Code != tc.code {
					t.Errorf("%.70s: %v, want code %d", tc.in, perr, tc.code)
				}
			}
		})
	}
}

// The sender's decoders of the receiver's frames: what they accept, and
// that each refusal names what was wrong.
func TestDecodeBlobReplies(t *testing.T) {
	sum := strings.Repeat("b2", 32)
	for _, c := range []struct {
		v    *blobVersion
		in   string
		want blobOffset
	}{
		{blob10, `{"offset":0}`, blobOffset{Offset: new(int64(0))}},
		{blob10, `{"offset":5,"prefix_sha256":"x"}`, blobOffset{Offset: new(int64(5))}}, // not a 1.0.0 member: ignored
		{blob11, `{"offset":5,"prefix_sha256":"` + sum + `"}`, blobOffset{Offset: new(int64(5)), PrefixSHA256: sum}},
		{blob12, `{"offset":5,"prefix_blake3":"` + sum + `"}`, blobOffset{Offset: new(int64(5)), PrefixBLAKE3: sum}},
		{blob12, `{"offset":5,"prefix_sha256":"` + sum + `","future":[1]}`, blobOffset{Offset: new(int64(5))}},
		{blob12, `{"offset":9,"dropped":[{"name":"u1","size":4,"have":3}]}`, blobOffset{Offset: new(int64(9)), Dropped: []store.DroppedUpload{{Name: "u1", Size: 4, Have: 3}}}},
		{blob12, `{"error":{"code":-32004,"message":"full","data":{"quota":"max-store"}}}`, blobOffset{Error: &protocol.Error{Code: -32004, Message: "full", Data: map[string]any{"quota": "max-store"}}}},
	} {
		got, err := decodeBlobOffset([]byte(c.in), c.v, 10)
		if err != nil || fmt.Sprint(got.Offset != nil && c.want.Offset != nil && *got.Offset == *c.want.Offset, got.PrefixSHA256, got.PrefixBLAKE3, got.Error, got.Dropped) !=
			fmt.Sprint(c.want.Offset != nil, c.want.PrefixSHA256, c.want.PrefixBLAKE3, c.want.Error, c.want.Dropped) || (got.Offset == nil) != (c.want.Offset == nil) {
			t.Errorf("%s %s: %+v, %v; want %+v", c.v.id, c.in, got, err, c.want)
		}
	}
	for _, c := range []struct {
		v        *blobVersion
		in, want string
	}{
		{blob12, `{}`, `neither "offset" nor "error"`},
		{blob12, `{"offset":1,"error":{"code":1,"message":"m"}}`, `both "offset" and "error"`},
		{blob12, `{"offset":11}`, `11 is outside 0..10`},
		{blob12, `{"offset":-1}`, `-1 is outside 0..10`},
		{blob12, `{"offset":1.5}`, `member "offset": must be an integer`},
		{blob12, `{"offset":1,"offset":2}`, `member "offset" appears twice`},
		{blob12, `{"offset":1,"prefix_blake3":"` + strings.ToUpper(sum) + `"}`, `member "prefix_blake3": must be 64 lowercase hex digits`},
		{blob11, `{"offset":1,"prefix_sha256":7}`, `member "prefix_sha256": must be a string`},
		{blob12, `{"offset":1,"dropped":{}}`, `member "dropped": must be an array`},
		{blob12, `{"error":{"message":"m"}}`, `member "error": must be an object with an integer "code"`},
		{blob12, `{"error":{"code":0,"message":"m"}}`, `member "error": must be an object`},
		{blob12, `{"error":"no"}`, `member "error": must be an object`},
		{blob12, `[1]`, `not a JSON object`},
		{blob12, "{\"offset\":1,\"x\":\"\xff\"}", `not UTF-8 JSON`},
		{blob12, `{"offset":1,"pad":"` + strings.Repeat("x", maxBlobReply) + `"}`, `exceed the 65536-byte cap`},
	} {
		if _, err := decodeBlobOffset([]byte(c.in), c.v, 10); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "offset frame") {
			t.Errorf("%s %.60s: %v, want %q", c.v.id, c.in, err, c.want)
		}
	}

	if r, err := decodeBlobResult([]byte(`{"filename":"a","size":3,"blake3":"`+sum+`","sha256":"x"}`), blob12); err != nil || r != (blobResult{Filename: "a", Size: 3, BLAKE3: sum}) {
		t.Errorf("1.2.0 result: %+v, %v", r, err)
	}
	if r, err := decodeBlobResult([]byte(`{"filename":"a","size":3,"sha256":"`+sum+`"}`), blob11); err != nil || r != (blobResult{Filename: "a", Size: 3, SHA256: sum}) {
		t.Errorf("1.1.0 result: %+v, %v", r, err)
	}
	if r, err := decodeBlobResult([]byte(`{"error":{"code":-32602,"message":"m"}}`), blob10); err != nil || r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("error result: %+v, %v", r, err)
	}
	for _, c := range []struct {
		v        *blobVersion
		in, want string
	}{
		{blob12, `{"filename":"a","size":3,"sha256":"` + sum + `"}`, `member "blake3" is missing`},
		{blob11, `{"filename":"a","size":3,"blake3":"` + sum + `"}`, `member "sha256" is missing`},
		{blob12, `{"size":3,"blake3":"` + sum + `"}`, `member "filename" is missing`},
		{blob12, `{"filename":"../a","size":3,"blake3":"` + sum + `"}`, `member "filename"`},
		{blob12, `{"filename":"a","size":-3,"blake3":"` + sum + `"}`, `member "size": must be a non-negative integer`},
		{blob12, `{"filename":"a","size":3,"blake3":"` + sum[2:] + `"}`, `member "blake3": must be 64 lowercase hex digits`},
		{blob12, `{"filename":"a","size":3,"blake3":"` + sum + `","error":{"code":1,"message":"m"}}`, `both a stored file and "error"`},
		{blob12, `null`, `not a JSON object`},
	} {
		if _, err := decodeBlobResult([]byte(c.in), c.v); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "the receiver's answer") {
			t.Errorf("%s %.60s: %v, want %q", c.v.id, c.in, err, c.want)
		}
	}
}

// FuzzBlobHeader: the header decoders (every version) never panic; what
// they accept is a valid name, a non-negative size and a 64-digit lowercase
// hex digest of the version's hash, and no other (optional from 1.1.0 on),
// and re-encodes to a header that decodes the same. What 1.0.0 accepts,
// 1.1.0 accepts the same; 1.1.0 and 1.2.0 accept the same headers without
// a hash.
func FuzzBlobHeader(f *testing.F) {
	sum := strings.Repeat("0f", 32)
	f.Add([]byte(`{"name":"a.txt","size":12,"sha256":"` + sum + `","session":"tok"}`))
	f.Add([]byte(`{"name":"a.txt","size":12,"restart":true}`))
	f.Add([]byte(`{"name":"a.txt","size":12,"blake3":"` + sum + `","restart":false}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := map[*blobVersion]BlobHeader{}
		for _, v := range blobVersions {
			h, perr := decodeBlobHeader(b, v)
			if perr != nil {
				switch perr.Code {
				case protocol.CodeParseError, protocol.CodeInvalidRequest, protocol.CodeInvalidParams:
				default:
					t.Fatalf("code %d for %q", perr.Code, b)
				}
				continue
			}
			got[v] = h
			if len(b) > MaxBlobHeader || !utf8.Valid(b) {
				t.Fatalf("accepted a %d-byte header, or one that is not UTF-8: %q", len(b), b)
			}
			if err := store.ValidateName(h.Name); err != nil {
				t.Fatalf("accepted name %q: %v", h.Name, err)
			}
			other := h.SHA256
			if v.alg == store.HashSHA256 {
				other = h.BLAKE3
			}
			if h.Size < 0 || (h.sum(v.alg) != "" || !v.trailer) && !v.alg.Valid(h.sum(v.alg)) || other != "" || h.Restart && !v.trailer {
				t.Fatalf("%s: accepted %+v", v.id, h)
			}
			again, err := json.Marshal(h)
			if err != nil {
				t.Fatal(err)
			}
			if h2, perr := decodeBlobHeader(again, v); perr != nil || h2 != h {
				t.Fatalf("%s: re-encoded %s decodes to %+v, %v", v.id, again, h2, perr)
			}
		}
		if h, ok := got[blob10]; ok && got[blob11] != h {
			t.Fatalf("1.0.0 accepts %q, 1.1.0 gives %+v", b, got[blob11])
		}
		h11, ok11 := got[blob11]
		h12, ok12 := got[blob12]
		if ok11 && h11.SHA256 == "" && (!ok12 || h12 != h11) || ok12 && h12.BLAKE3 == "" && (!ok11 || h11 != h12) {
			t.Fatalf("without a hash, 1.1.0 gives %+v (%v), 1.2.0 %+v (%v) for %q", h11, ok11, h12, ok12, b)
		}
	})
}

// FuzzBlobTrailer: the trailer decoders (SHA-256 of 1.1.0, BLAKE3 of
// 1.2.0) never panic, and what they accept is a 64-digit lowercase hex
// digest that re-encodes to a trailer that decodes the same; no frame
// passes for both.
func FuzzBlobTrailer(f *testing.F) {
	f.Add([]byte(`{"sha256":"` + strings.Repeat("0f", 32) + `"}`))
	f.Add([]byte(`{"blake3":"` + strings.Repeat("0f", 32) + `"}`))
	f.Add([]byte(`{"sha256":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		accepted := 0
		for _, alg := range []store.Hash{store.HashSHA256, store.HashBLAKE3} {
			sum, perr := decodeBlobTrailer(b, alg)
			if perr != nil {
				switch perr.Code {
				case protocol.CodeParseError, protocol.CodeInvalidRequest, protocol.CodeInvalidParams:
				default:
					t.Fatalf("code %d for %q", perr.Code, b)
				}
				continue
			}
			accepted++
			if len(b) > maxBlobTrailer || !alg.Valid(sum) {
				t.Fatalf("%s: accepted %q as %q", alg, b, sum)
			}
			if again, perr := decodeBlobTrailer(trailerFrame(alg, sum), alg); perr != nil || again != sum {
				t.Fatalf("%s: re-encoded %q decodes to %q, %v", alg, sum, again, perr)
			}
		}
		if accepted > 1 {
			t.Fatalf("%q is a trailer of both hashes", b)
		}
	})
}

// FuzzBlobOffset: the sender's decoders of the receiver's frames (the
// offset frame and the final answer, every version) never panic; an
// accepted offset frame has either an error with a code or an offset
// within the file, and a prefix digest only of the version's hash, valid;
// an accepted answer has either an error or a valid name, a size and a
// valid digest of the version's hash alone.
func FuzzBlobOffset(f *testing.F) {
	sum := strings.Repeat("0f", 32)
	f.Add([]byte(`{"offset":3,"prefix_blake3":"`+sum+`","dropped":[{"name":"a","size":9,"have":1}]}`), int64(10))
	f.Add([]byte(`{"offset":3,"prefix_sha256":"`+sum+`"}`), int64(3))
	f.Add([]byte(`{"error":{"code":-32004,"message":"quota","data":{"quota":"max-store"}}}`), int64(0))
	f.Add([]byte(`{"filename":"a","size":3,"blake3":"`+sum+`"}`), int64(3))
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		if size < 0 {
			size = -(size + 1)
		}
		for _, v := range blobVersions {
			if o, err := decodeBlobOffset(b, v, size); err == nil {
				if len(b) > maxBlobReply || (o.Error == nil) == (o.Offset == nil) || o.Error != nil && o.Error.Code == 0 ||
					o.Offset != nil && (*o.Offset < 0 || *o.Offset > size) {
					t.Fatalf("%s: accepted %q as %+v", v.id, b, o)
				}
				for _, alg := range []store.Hash{store.HashSHA256, store.HashBLAKE3} {
					if p := *o.prefix(alg); p != "" && (!v.trailer || alg != v.alg || !alg.Valid(p)) {
						t.Fatalf("%s: accepted %q with prefix %s %q", v.id, b, alg, p)
					}
				}
			} else if !strings.Contains(err.Error(), "the receiver's offset frame") {
				t.Fatalf("error %q", err)
			}
			if r, err := decodeBlobResult(b, v); err == nil {
				ok := r.Error != nil && r.Error.Code != 0 && r.Filename == "" && r.SHA256 == "" && r.BLAKE3 == "" ||
					r.Error == nil && store.ValidateName(r.Filename) == nil && r.Size >= 0 && v.alg.Valid(r.sum(v.alg)) && r.SHA256+r.BLAKE3 == r.sum(v.alg)
				if !ok || len(b) > maxBlobReply {
					t.Fatalf("%s: accepted the answer %q as %+v", v.id, b, r)
				}
			} else if !strings.Contains(err.Error(), "the receiver's answer") {
				t.Fatalf("error %q", err)
			}
		}
	})
}

// Over a relayed (limited) connection whose relay cuts every circuit after
// 256 KiB, the transfer proceeds within the limit and resumes across as many
// circuits as it needs.
func TestBlobOverLimitedRelay(t *testing.T) {
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	rh, err := transport.NewHost(transport.WithIdentity(key), transport.WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rh.Close() })
	const circuitData = 256 << 10
	rl, err := relayv2.New(rh, relayv2.WithLimit(&relayv2.RelayLimit{Duration: time.Minute, Data: circuitData}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Close() })

	a := newTestNode(t, nil)
	// B listens nowhere: it is reachable only through the relay (libp2p
	// turns the relay transport off with the listen addresses: back on).
	b := newTestNode(t, func(c *Config) {
		c.PolicyFile = writePolicy(t, map[string][]string{a.ID().String(): {"upload_file"}})
		c.HostOptions = append(c.HostOptions, transport.WithListenAddrs(), transport.WithLibp2pOptions(libp2p.EnableRelay()))
	})
	rinfo := peer.AddrInfo{ID: rh.ID(), Addrs: rh.Addrs()}
	if err := b.Host().Connect(ctxT(t), rinfo); err != nil {
		t.Fatal(err)
	}
	if _, err := relayclient.Reserve(ctxT(t), b.Host(), rinfo); err != nil {
		t.Fatalf("reserve: %v", err)
	}
	circuit, err := protocol.ParseAddress(rh.Addrs()[0].String() + "/p2p/" + rh.ID().String() + "/p2p-circuit/p2p/" + b.ID().String())
	if err != nil {
		t.Fatal(err)
	}

	const size = 2 * mib
	path, sum := blobFile(t, size, 13)
	var attempts atomic.Int64
	var limited atomic.Bool
	start := time.Now()
	info, err := a.Client().SendFile(ctxT(t), circuit, path, SendOptions{DirectWait: 300 * time.Millisecond, MaxAttempts: 3,
		Progress: func(p SendProgress) {
			if p.Err == nil && p.Sent == p.Offset {
				attempts.Add(1)
				for _, c := range a.Host().Network().ConnsToPeer(b.ID()) {
					if c.Stat().Limited {
						limited.Store(true)
					}
				}
			}
		}})
	if err != nil {
		t.Fatalf("SendFile over the relay: %v", err)
	}
	if info.BLAKE3 != sum.BLAKE3 || storedSHA(t, b, "blob.bin") != sum.SHA256 {
		t.Fatalf("hash mismatch: %+v", info)
	}
	if !limited.Load() {
		t.Fatal("the transfer did not use a limited connection")
	}
	if n := attempts.Load(); n < size/circuitData {
		t.Fatalf("%d attempts for %d bytes over %d-byte circuits", n, size, circuitData)
	}
	t.Logf("%d circuits, %v", attempts.Load(), time.Since(start))
}

// benchSize is the file size of the transfer benchmarks.
const benchSize = 64 * mib

// rawCopyProto is the benchmark's bare libp2p stream protocol.
const rawCopyProto = libp2pproto.ID("/mcpv2-bench/raw-copy/1.0.0")

// onlyReader hides a reader's WriteTo, so that io.CopyBuffer uses the given
// buffer as the blob sender does.
type onlyReader struct{ io.Reader }

// BenchmarkRawStreamCopy is the baseline of BenchmarkBlobTransfer: the same
// file copied over a bare libp2p stream between the same two loopback nodes
// (io.Copy with a 256 KiB buffer; the receiver acknowledges at the end), with
// no framing or hashing. The receiver discards the bytes, or, in the
// -to-file variants, writes them to a file and fsyncs it as the blob
// receiver does, so that the ratio to those isolates the protocol's cost
// from the disk's.
func BenchmarkRawStreamCopy(b *testing.B) {
	path, _ := blobFile(b, benchSize, 42)
	for _, c := range []struct {
		name, kind string
		toFile     bool
	}{{"tcp", "/tcp/", false}, {"quic-v1", "/quic-v1", false}, {"tcp-to-file", "/tcp/", true}, {"quic-v1-to-file", "/quic-v1", true}} {
		b.Run(c.name, func(b *testing.B) {
			a, r := pair(b, nil)
			dir := b.TempDir()
			r.Host().SetStreamHandler(rawCopyProto, func(s network.Stream) {
				buf := pool.Get(blobBuffer)
				defer pool.Put(buf)
				var w io.Writer = io.Discard
				if c.toFile {
					f, err := os.CreateTemp(dir, "raw-")
					if err != nil {
						_ = s.Reset()
						return
					}
					defer os.Remove(f.Name())
					defer f.Close()
					w = f
				}
				if _, err := io.CopyBuffer(w, onlyReader{s}, buf); err != nil {
					_ = s.Reset()
					return
				}
				if f, ok := w.(*os.File); ok {
					_ = f.Sync()
				}
				_, _ = s.Write([]byte{1})
				_ = s.Close()
			})
			pid, err := a.Client().Connect(ctxT(b), addrOfKind(b, r, c.kind))
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, blobBuffer)
			b.SetBytes(benchSize)
			b.ResetTimer()
			for range b.N {
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				s, err := a.Host().NewStream(ctxT(b), pid, rawCopyProto)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(s, onlyReader{f}, buf); err != nil {
					b.Fatal(err)
				}
				_ = s.CloseWrite()
				if _, err := io.ReadFull(s, buf[:1]); err != nil {
					b.Fatal(err)
				}
				_ = s.Close()
				f.Close()
			}
		})
	}
}

// BenchmarkBlobTransfer sends a file with SendFile between two loopback
// nodes over each version that hashes while it sends, side by side: the
// sender streams the file raw, hashing it as it goes (BLAKE3 over 1.2.0,
// SHA-256 over 1.1.0), and sends the hash last; the receiver hashes,
// writes, fsyncs and renames it. Compare with BenchmarkRawStreamCopy and
// BenchmarkBlobHash.
//
// The prehashed variants pass the SHA-256 in SendOptions.SHA256 (so 1.1.0),
// and the sender does not hash at all: the difference is the sender's
// hashing.
func BenchmarkBlobTransfer(b *testing.B) {
	path, sum := blobFile(b, benchSize, 42)
	for _, c := range []struct {
		name, kind string
		v          *blobVersion
		sum        string
	}{
		{"v1.2.0/tcp", "/tcp/", blob12, ""}, {"v1.1.0/tcp", "/tcp/", blob11, ""},
		{"v1.2.0/quic-v1", "/quic-v1", blob12, ""}, {"v1.1.0/quic-v1", "/quic-v1", blob11, ""},
		{"v1.1.0/tcp-prehashed", "/tcp/", blob11, sum.SHA256}, {"v1.1.0/quic-v1-prehashed", "/quic-v1", blob11, sum.SHA256},
	} {
		b.Run(c.name, func(b *testing.B) {
			a, r := blobPair(b, c.v, nil)
			addr := addrOfKind(b, r, c.kind)
			b.SetBytes(benchSize)
			b.ResetTimer()
			for i := range b.N {
				name := "bench-" + strconv.Itoa(i)
				info, err := a.Client().SendFile(ctxT(b), addr, path, SendOptions{Name: name, SHA256: c.sum})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if info.Sum(c.v.alg) != sum.of(c.v.alg) {
					b.Fatalf("sent over %s? %+v", c.v.id, info)
				}
				if err := r.Store().Files().Delete(name); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkBlobHash is the hashing alone, per byte, of each version's hash
// on this CPU: what each end of a transfer spends on it (256 KiB writes,
// as the blob sender and receiver make).
func BenchmarkBlobHash(b *testing.B) {
	buf := make([]byte, blobBuffer)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(buf)
	for _, alg := range []store.Hash{store.HashBLAKE3, store.HashSHA256} {
		b.Run(string(alg), func(b *testing.B) {
			h := alg.New()
			b.SetBytes(int64(len(buf)))
			for range b.N {
				h.Write(buf)
			}
		})
	}
}

// A receiver that fails mid-transfer (say, its disk is full) answers early;
// the sender stops writing at once and returns that answer, not a stream
// error, and does not retry.
func TestBlobReceiverErrorMidTransfer(t *testing.T) {
	a, b := pair(t, nil)
	var streams atomic.Int64
	release := make(chan struct{})
	handler := func(s network.Stream) {
		streams.Add(1)
		defer s.Reset()
		if _, err := transport.NewFrameReader(s, MaxBlobHeader).ReadFrame(); err != nil {
			return
		}
		_ = transport.WriteFrame(s, []byte(`{"offset":0}`))
		if _, err := io.CopyN(io.Discard, s, mib); err != nil {
			return
		}
		_ = transport.WriteFrame(s, blobErrorFrame(protocol.Errorf(protocol.CodeInternal, "blob: could not store %q", "blob.bin")))
		_ = s.CloseWrite()
		select { // stop reading: the sender must not wait for its writes
		case <-release:
		case <-time.After(20 * time.Second):
		}
	}
	for _, id := range blobProtocols {
		b.Host().SetStreamHandler(id, handler)
	}
	defer close(release)
	path, _ := blobFile(t, 64*mib, 14)
	start := time.Now()
	_, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{})
	if codeOf(err) != protocol.CodeInternal || !strings.Contains(err.Error(), "could not store") {
		t.Fatalf("SendFile = %v, want the receiver's error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the sender took %v to notice", d)
	}
	if n := streams.Load(); n != 1 {
		t.Fatalf("%d attempts: a refusal was retried", n)
	}
}

// interruptUpload starts an upload of a size-byte file (seeded) from a to b
// by hand, sends have bytes, half-closes, and waits for b's answer: b has
// then let go of the partial upload. It returns b's offset frame.
func interruptUpload(t *testing.T, a, b *Node, name string, size, have int64, seed uint64) blobOffset {
	t.Helper()
	data := make([]byte, size)
	r := rand.NewChaCha8([32]byte{byte(seed)})
	_, _ = r.Read(data)
	sum := sha256.Sum256(data)
	s, fr := rawBlob(t, a, b)
	if err := transport.WriteFrame(s, headerJSON(name, size, hex.EncodeToString(sum[:]))); err != nil {
		t.Fatal(err)
	}
	raw, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	var off blobOffset
	if err := json.Unmarshal(raw, &off); err != nil {
		t.Fatal(err)
	}
	if off.Error != nil {
		return off
	}
	if _, err := s.Write(data[*off.Offset:have]); err != nil {
		t.Fatal(err)
	}
	_ = s.CloseWrite()
	if raw, err := fr.ReadFrame(); err != nil || !strings.Contains(string(raw), "the partial upload is kept") {
		t.Fatalf("answer to an interrupted upload: %q, %v", raw, err)
	}
	return off
}

// partBytes sums the sizes of n's partial upload files.
func partBytes(t *testing.T, n *Node) int64 {
	t.Helper()
	var sum int64
	for _, name := range hiddenEntries(t, n) {
		if st, err := os.Lstat(filepath.Join(n.Store().Files().Dir(), name)); err == nil {
			sum += st.Size()
		}
	}
	return sum
}

// One sender's unfinished uploads stay within MaxPartial: the oldest are
// dropped and the sender is told which; one over the cap alone is refused
// with -32004 naming it.
func TestBlobMaxPartial(t *testing.T) {
	eachVersion(t, func(t *testing.T, v *blobVersion) {
		a, b := blobPair(t, v, func(c *Config) { c.MaxPartial = 8 * mib })
		for i, name := range []string{"u1", "u2", "u3"} {
			off := interruptUpload(t, a, b, name, 4*mib, 3*mib, uint64(i))
			if off.Error != nil {
				t.Fatalf("%s: %v", name, off.Error)
			}
			if got := partBytes(t, b); got > 8*mib {
				t.Fatalf("after %s: %d bytes of partial uploads, over the 8 MiB cap", name, got)
			}
			var dropped []string
			for _, d := range off.Dropped {
				dropped = append(dropped, fmt.Sprintf("%s:%d/%d", d.Name, d.Have, d.Size))
			}
			// u3 (4 MiB) beside u1 and u2 (3 MiB each) does not fit: u1 goes.
			want := map[string]string{"u1": "[]", "u2": "[]", "u3": fmt.Sprintf("[u1:%d/%d]", 3*mib, 4*mib)}[name]
			if fmt.Sprint(dropped) != want {
				t.Fatalf("%s's offset frame dropped %v, want %s", name, dropped, want)
			}
		}
		// SendFile reports what was dropped, and completes.
		path, sum := blobFile(t, 4*mib, 9)
		var dropped []store.DroppedUpload
		var mu sync.Mutex
		info, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{Progress: func(p SendProgress) {
			mu.Lock()
			dropped = append(dropped, p.Dropped...)
			mu.Unlock()
		}})
		if err != nil {
			t.Fatalf("SendFile: %v", err)
		}
		checkSent(t, v, info, "blob.bin", 4*mib, sum)
		if len(dropped) != 1 || dropped[0].Name != "u2" {
			t.Fatalf("SendFile reported dropped %+v, want u2", dropped)
		}
		// Over the cap alone: refused before any byte, naming the cap.
		path, _ = blobFile(t, 8*mib+1, 10)
		_, err = a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{})
		if codeOf(err) != protocol.CodeToolExecution || !strings.Contains(err.Error(), "8388608-byte cap on one sender's unfinished uploads (max-partial)") {
			t.Fatalf("over the cap alone: %v", err)
		}
		if pe, _ := err.(*protocol.Error); pe == nil || fmt.Sprint(pe.Data) != fmt.Sprint(map[string]any{"quota": "max-partial", "limit_bytes": float64(8 * mib), "used_bytes": 0.0, "need_bytes": float64(8*mib + 1)}) {
			t.Fatalf("error data: %#v", err)
		}
		if au := waitBlobAudits(t, b, 5); au[len(au)-1]["code"] != float64(protocol.CodeToolExecution) {
			t.Fatalf("audit: %v", au[len(au)-1])
		}
	})
}

// The store quota refuses a blob upload up front with -32004 and the use.
func TestBlobMaxStore(t *testing.T) {
	eachVersion(t, func(t *testing.T, v *blobVersion) {
		a, b := blobPair(t, v, func(c *Config) { c.MaxStore = 3 * mib })
		path, sum := blobFile(t, 2*mib, 11)
		info, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkSent(t, v, info, "blob.bin", 2*mib, sum)
		path, _ = blobFile(t, 2*mib, 12)
		_, err = a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{Name: "second.bin"})
		if codeOf(err) != protocol.CodeToolExecution || !strings.Contains(err.Error(), "store quota (max-store) is 3145728 bytes and 2097152 are in use") {
			t.Fatalf("over the store quota: %v", err)
		}
		if h := hiddenEntries(t, b); len(h) != 0 {
			t.Fatalf("a refused upload left %v", h)
		}
	})
}

// The node sweeps partial uploads untouched for PartialTTL while it runs,
// with its own goroutine (goleak checks Close stops it).
func TestSweeperRemovesStalePartials(t *testing.T) {
	const ttl = 600 * time.Millisecond
	a, b := pair(t, func(c *Config) { c.PartialTTL = ttl })
	interruptUpload(t, a, b, "stale.bin", 2*mib, mib, 1)
	if h := hiddenEntries(t, b); len(h) != 1 {
		t.Fatalf("want one partial upload, have %v", h)
	}
	start := time.Now()
	for len(hiddenEntries(t, b)) > 0 {
		if time.Since(start) > ttl+sweepEvery(ttl, 0)+5*time.Second {
			t.Fatalf("the partial upload is still there after %v", time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d := time.Since(start); d < ttl/2 {
		t.Fatalf("swept after %v, before the %v TTL", d, ttl)
	}
	if used, _ := b.Store().Files().Usage(); used != 0 {
		t.Fatalf("usage after the sweep: %d", used)
	}
	if _, err := a.Client().CallSkill(ctxT(t), addrOf(t, b), "ping", nil, protocol.CallOptions{}); err != nil {
		t.Fatalf("the node stopped serving: %v", err)
	}
}

func TestSweepEvery(t *testing.T) {
	for _, c := range []struct{ partial, conv, want time.Duration }{
		{24 * time.Hour, 30 * 24 * time.Hour, time.Hour},
		{2 * time.Hour, 0, 30 * time.Minute},
		{24 * time.Hour, 40 * time.Minute, 10 * time.Minute},
		{3 * time.Second, 0, 750 * time.Millisecond},
		{time.Millisecond, 0, minSweepEvery},
	} {
		if got := sweepEvery(c.partial, c.conv); got != c.want {
			t.Errorf("sweepEvery(%v, %v) = %v, want %v", c.partial, c.conv, got, c.want)
		}
	}
}

// upload_file over the store quota: -32004 naming the quota and the use,
// whatever face the call came by (the store's error says it).
func TestUploadFileMaxStore(t *testing.T) {
	a, b := pair(t, func(c *Config) { c.MaxStore = 1000 })
	call := func(name string, n int) error {
		args, _ := json.Marshal(map[string]string{"filename": name, "content": strings.Repeat("x", n)})
		_, err := a.Client().CallSkill(ctxT(t), addrOf(t, b), "upload_file", args, protocol.CallOptions{})
		return err
	}
	if err := call("a.txt", 700); err != nil {
		t.Fatal(err)
	}
	err := call("b.txt", 400)
	if codeOf(err) != protocol.CodeToolExecution || !strings.Contains(err.Error(), "store quota (max-store) is 1000 bytes and 700 are in use") {
		t.Fatalf("upload over the quota: %v", err)
	}
	if l, _ := b.Store().Files().List(); len(l) != 1 {
		t.Fatalf("files after the refusal: %v", l)
	}
}

// rawSend runs an exchange of v (1.1.0 or 1.2.0) from a to b by hand:
// header, b's offset frame, then data[off:] and the trailer frame (none
// when nil), then a half-close. It returns the offset frame and b's answer.
func rawSend(t *testing.T, v *blobVersion, a, b *Node, header, data, trailer []byte) (blobOffset, string) {
	t.Helper()
	s, fr := rawBlobProto(t, a, b, v.id)
	if err := transport.WriteFrame(s, header); err != nil {
		t.Fatal(err)
	}
	raw, err := fr.ReadFrame()
	if err != nil {
		t.Fatalf("offset frame: %v", err)
	}
	var off blobOffset
	if err := json.Unmarshal(raw, &off); err != nil {
		t.Fatalf("offset frame %q: %v", raw, err)
	}
	if off.Error != nil {
		return off, ""
	}
	if *off.Offset > int64(len(data)) {
		t.Fatalf("offset %d beyond the %d bytes to send", *off.Offset, len(data))
	}
	if _, err := s.Write(data[*off.Offset:]); err != nil {
		t.Fatal(err)
	}
	if trailer != nil {
		if err := transport.WriteFrame(s, trailer); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.CloseWrite()
	raw, err = fr.ReadFrame()
	if err != nil {
		t.Fatalf("answer: %v", err)
	}
	_ = s.Close()
	return off, string(raw)
}

// seeded returns size pseudo-random bytes and their digests.
func seeded(size int, seed uint64) ([]byte, digests) {
	data := make([]byte, size)
	_, _ = rand.NewChaCha8([32]byte{byte(seed), 0xb1}).Read(data)
	return data, digestsOf(data)
}

// A resume where the receiver's bytes are not the start of the sender's
// file (same name and size, other content: an interrupted upload of another
// version, or a stored file) ends with the sender's file, never a mix: the
// sender checks the prefix digest, reports what was discarded and restarts.
func TestBlobResumeOtherContent(t *testing.T) {
	const size, have = 4 * mib, mib
	old, oldSum := seeded(size, 20)
	pathNew, sumNew := blobFile(t, size, 21)
	eachVersion(t, func(t *testing.T, v *blobVersion) {
		a, b := blobPair(t, v, nil)
		w := watchBlob(b)

		// An interrupted upload of the old content under the same name and size.
		off, answer := rawSend(t, v, a, b, headerOf(v, "same.bin", size, ""), old[:have], nil)
		if off.Error != nil || *off.Offset != 0 || !strings.Contains(answer, "the partial upload is kept") {
			t.Fatalf("interrupted upload: %+v %q", off, answer)
		}
		var mu sync.Mutex
		var reports []SendProgress
		record := func(p SendProgress) {
			mu.Lock()
			reports = append(reports, p)
			mu.Unlock()
		}
		info, err := a.Client().SendFile(ctxT(t), addrOf(t, b), pathNew, SendOptions{Name: "same.bin", Progress: record})
		if err != nil {
			t.Fatalf("SendFile over another upload's bytes: %v", err)
		}
		checkSent(t, v, info, "same.bin", size, sumNew)
		if got := storedSHA(t, b, "same.bin"); got != sumNew.SHA256 {
			t.Fatalf("stored %s, want the new file's %s (old %s)", got, sumNew.SHA256, oldSum.SHA256)
		}
		mu.Lock()
		if len(reports) < 2 || reports[0].Discarded != have || reports[0].Attempt != 1 || reports[1].Offset != 0 || reports[1].Attempt != 1 || reports[1].Discarded != 0 {
			t.Fatalf("reports %+v: want the %d discarded bytes, then attempt 1 from zero", reports[:min(len(reports), 3)], have)
		}
		reports = nil
		mu.Unlock()
		protos, heads := w.streams()
		if len(heads) != 3 || !strings.Contains(heads[2], `"restart":true`) || strings.Contains(heads[1], "restart") || protos[1] != v.id || protos[2] != v.id {
			t.Fatalf("streams %v %q: want the interrupted one, one reset after the offset, one with restart", protos, heads)
		}
		if h := hiddenEntries(t, b); len(h) != 0 {
			t.Fatalf("left behind: %v", h)
		}

		// A stored file of the same name and size is offered by its hash; the
		// old content's sender finds it differs and replaces it.
		pathOld := filepath.Join(t.TempDir(), "same.bin")
		if err := os.WriteFile(pathOld, old, 0o600); err != nil {
			t.Fatal(err)
		}
		info, err = a.Client().SendFile(ctxT(t), addrOf(t, b), pathOld, SendOptions{Progress: record})
		if err != nil || storedSHA(t, b, "same.bin") != oldSum.SHA256 {
			t.Fatalf("SendFile over a stored file of the same size: %+v, %v", info, err)
		}
		checkSent(t, v, info, "same.bin", size, oldSum)
		mu.Lock()
		if len(reports) < 2 || reports[0].Discarded != size || reports[1].Offset != 0 {
			t.Fatalf("reports %+v: want the stored file's %d bytes discarded, then from zero", reports[:min(len(reports), 3)], size)
		}
		mu.Unlock()
		// One audit line per stream: the interrupted one, the two dropped after
		// the offset frame, and the two that stored a file.
		au := waitBlobAudits(t, b, 5)
		outcomes := map[any]int{}
		for _, l := range au {
			outcomes[l["outcome"]]++
		}
		if len(au) != 5 || outcomes["ok"] != 2 || outcomes["error"] != 3 {
			t.Fatalf("audit: %v", au)
		}
	})
}

// The trailer is the attacker's last chance: a sender whose trailer does
// not hash what it sent is refused with -32602 and nothing is committed,
// whether the upload was fresh, resumed, declared a hash in its header, or
// was offered a stored file. A malformed or missing trailer after every
// byte keeps the bytes, and a resume sends just the trailer. A trailer of
// the other version's hash is malformed.
func TestBlobTrailerLies(t *testing.T) {
	const size = mib
	data, sums := seeded(size, 30)
	_, others := seeded(size, 31)
	eachVersion(t, func(t *testing.T, v *blobVersion) {
		a, b := pair(t, nil) // raw streams of v: b serves every version
		sum, other := sums.of(v.alg), others.of(v.alg)
		trailer := func(sum string) []byte { return trailerFrame(v.alg, sum) }
		header := func(sum string) []byte { return headerOf(v, "lie.bin", size, sum) }
		mismatch := func(what, answer string) {
			t.Helper()
			var r blobResult
			if err := json.Unmarshal([]byte(answer), &r); err != nil || r.Error == nil || r.Error.Code != protocol.CodeInvalidParams ||
				!strings.Contains(r.Error.Message, "hash mismatch") || !strings.Contains(r.Error.Message, string(v.alg)) {
				t.Fatalf("%s: answer %q, want -32602 %s hash mismatch", what, answer, v.alg)
			}
			if l, _ := b.Store().Files().List(); len(l) != 0 && l[0].SHA256 != sums.SHA256 {
				t.Fatalf("%s: committed %v", what, l)
			}
		}

		// Fresh: the bytes, then another file's hash.
		_, answer := rawSend(t, v, a, b, header(""), data, trailer(other))
		mismatch("fresh upload", answer)
		if l, _ := b.Store().Files().List(); len(l) != 0 {
			t.Fatalf("visible after a lying trailer: %v", l)
		}
		if h := hiddenEntries(t, b); len(h) != 0 {
			t.Fatalf("the partial upload was not discarded: %v", h)
		}
		// The header's hash is right, the trailer's is not.
		_, answer = rawSend(t, v, a, b, header(sum), data, trailer(other))
		mismatch("declared header, lying trailer", answer)
		// Resumed: half of it kept, then the rest and a lying trailer.
		if _, answer := rawSend(t, v, a, b, header(""), data[:size/2], nil); !strings.Contains(answer, "kept") {
			t.Fatalf("interrupted: %q", answer)
		}
		off, answer := rawSend(t, v, a, b, header(""), data, trailer(other))
		if *off.Offset != size/2 || *off.prefix(v.alg) != digestsOf(data[:size/2]).of(v.alg) {
			t.Fatalf("resume offset %+v", off)
		}
		mismatch("resumed upload", answer)
		if h := hiddenEntries(t, b); len(h) != 0 {
			t.Fatalf("the partial upload was not discarded: %v", h)
		}

		// Malformed or missing trailers after all the bytes: refused, kept.
		m := string(v.alg)
		otherAlg := store.HashSHA256
		if v.alg == otherAlg {
			otherAlg = store.HashBLAKE3
		}
		for _, c := range []struct {
			trailer []byte
			code    int
		}{
			{nil, protocol.CodeInvalidRequest},
			{[]byte(`{"` + m + `":"` + strings.ToUpper(sum) + `"}`), protocol.CodeInvalidParams},
			{[]byte(`{"` + m + `":"` + sum + `","size":1}`), protocol.CodeInvalidRequest},
			{trailerFrame(otherAlg, sums.of(otherAlg)), protocol.CodeInvalidRequest},
			{bytes.Repeat([]byte("x"), maxBlobTrailer+1), protocol.CodeInvalidRequest},
		} {
			_, answer := rawSend(t, v, a, b, header(""), data, c.trailer)
			var r blobResult
			if err := json.Unmarshal([]byte(answer), &r); err != nil || r.Error == nil || r.Error.Code != c.code {
				t.Fatalf("trailer %.40q: answer %q, want code %d", c.trailer, answer, c.code)
			}
			if l, _ := b.Store().Files().List(); len(l) != 0 {
				t.Fatalf("visible after trailer %.40q: %v", c.trailer, l)
			}
			if h := hiddenEntries(t, b); len(h) != 1 {
				t.Fatalf("after trailer %.40q the partial upload is not kept: %v", c.trailer, h)
			}
		}
		// All the bytes are there: the receiver offers the end with the whole
		// hash, and the trailer alone commits.
		off, answer = rawSend(t, v, a, b, header(""), data, trailer(sum))
		if *off.Offset != size || *off.prefix(v.alg) != sum || answer != string(resultFrame(v, store.FileInfo{Filename: "lie.bin", Size: size, SHA256: sums.SHA256, BLAKE3: sums.BLAKE3})) {
			t.Fatalf("trailer-only resume: %+v, %q", off, answer)
		}
		if storedSHA(t, b, "lie.bin") != sums.SHA256 || len(hiddenEntries(t, b)) != 0 {
			t.Fatalf("after the trailer-only resume: %v", hiddenEntries(t, b))
		}

		// Offered the stored file, a lying trailer does not pass for it.
		off, answer = rawSend(t, v, a, b, header(""), data, trailer(other))
		if *off.Offset != size || *off.prefix(v.alg) != sum {
			t.Fatalf("stored file offer: %+v", off)
		}
		mismatch("stored file", answer)
		if storedSHA(t, b, "lie.bin") != sums.SHA256 {
			t.Fatal("the stored file changed")
		}
		// One audit line per stream (written after the answer, so in any order):
		// five mismatches, five refusals that keep the bytes, one commit.
		au := waitBlobAudits(t, b, 11)
		count := map[any]int{}
		for _, l := range au {
			count[l["code"]]++
		}
		if len(au) != 11 || count[float64(protocol.CodeInvalidParams)] != 5 || count[float64(protocol.CodeInvalidRequest)] != 5 || count[nil] != 1 {
			t.Fatalf("audit: %v", au)
		}
	})
}

// A 1.0.0 sender (hash up front, no trailer) still works against this
// receiver, resumes included, and gets 1.0.0's offset frame; a 1.1.0 sender
// that declares the same hash resumes the upload a 1.0.0 sender left.
func TestBlob10SenderAgainstNewReceiver(t *testing.T) {
	const size = 2 * mib
	a, b := pair(t, nil)
	data, sums := seeded(size, 40)
	sum := sums.SHA256
	send10 := func(name string, have int) (string, string) {
		t.Helper()
		s, fr := rawBlob(t, a, b)
		if err := transport.WriteFrame(s, headerJSON(name, size, sum)); err != nil {
			t.Fatal(err)
		}
		raw, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		var off blobOffset
		if err := json.Unmarshal(raw, &off); err != nil || off.Offset == nil {
			t.Fatalf("offset frame %q", raw)
		}
		if _, err := s.Write(data[*off.Offset:have]); err != nil {
			t.Fatal(err)
		}
		_ = s.CloseWrite()
		answer, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
		return string(raw), string(answer)
	}
	if off, answer := send10("old.bin", size/4); off != `{"offset":0}` || !strings.Contains(answer, "kept") {
		t.Fatalf("interrupted 1.0.0 upload: %s %s", off, answer)
	}
	off, answer := send10("old.bin", size)
	var r blobResult
	if off != fmt.Sprintf(`{"offset":%d}`, size/4) || json.Unmarshal([]byte(answer), &r) != nil || r != (blobResult{Filename: "old.bin", Size: size, SHA256: sum}) {
		t.Fatalf("resumed 1.0.0 upload: %s %s", off, answer)
	}
	if storedSHA(t, b, "old.bin") != sum {
		t.Fatal("stored content differs")
	}

	// A 1.0.0 sender's partial upload, resumed by SendFile with the hash.
	if off, answer := send10("mixed.bin", size/2); off != `{"offset":0}` || !strings.Contains(answer, "kept") {
		t.Fatalf("interrupted 1.0.0 upload: %s %s", off, answer)
	}
	path := filepath.Join(t.TempDir(), "mixed.bin")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	var first atomic.Int64
	first.Store(-1)
	info, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{SHA256: sum, Progress: func(p SendProgress) { first.CompareAndSwap(-1, p.Offset) }})
	if err != nil || info.SHA256 != sum || first.Load() != size/2 {
		t.Fatalf("SendFile with the hash after a 1.0.0 sender: %+v, %v, started at %d", info, err, first.Load())
	}
	if h := hiddenEntries(t, b); len(h) != 0 {
		t.Fatalf("left behind: %v", h)
	}
}

// Against a receiver that serves only 1.0.0, SendFile falls back to it and
// hashes the file first: at once when identify said so, or after a first
// stream negotiated 1.0.0 when the peerstore did not know.
func TestBlobFallbackTo10(t *testing.T) {
	a, b := blobPair(t, blob10, nil) // before a connects: identify tells a
	w := watchBlob(b)
	path, sums := blobFile(t, 3*mib, 50)
	sum := sums.SHA256
	info, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{})
	if err != nil || storedSHA(t, b, "blob.bin") != sum {
		t.Fatalf("SendFile to a 1.0.0 receiver: %+v, %v", info, err)
	}
	checkSent(t, blob10, info, "blob.bin", 3*mib, sums)
	protos, heads := w.streams()
	if len(protos) != 1 || protos[0] != blob10.id || !strings.Contains(heads[0], `"sha256":"`+sum+`"`) {
		t.Fatalf("streams %v %q: want one 1.0.0 stream declaring the hash", protos, heads)
	}

	// The peerstore does not know: the first stream negotiates 1.0.0 and is
	// dropped before its header, the next declares the hash.
	if err := a.Host().Peerstore().RemoveProtocols(b.ID(), blobProtocols...); err != nil {
		t.Fatal(err)
	}
	path, sums = blobFile(t, 3*mib, 51)
	sum = sums.SHA256
	info, err = a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{Name: "second.bin"})
	if err != nil || info.SHA256 != sum || storedSHA(t, b, "second.bin") != sum {
		t.Fatalf("SendFile, protocols unknown: %+v, %v", info, err)
	}
	// The handlers may start in either order: the first stream's can be
	// scheduled after the second has begun.
	protos, heads = w.streams()
	if len(protos) != 3 || protos[1] != blob10.id || protos[2] != blob10.id || (heads[1] == "") == (heads[2] == "") ||
		!strings.Contains(heads[1]+heads[2], `"sha256":"`+sum+`"`) {
		t.Fatalf("streams %v %q: want a 1.0.0 stream without a header, and one declaring the hash", protos, heads)
	}
}

// Against a receiver of the release before 1.2.0 (1.1.0 and 1.0.0),
// SendFile negotiates 1.1.0 in one stream, whether identify told it what the
// peer serves or not, and hashes by SHA-256 as it sends. A caller that
// declares the SHA-256 gets 1.1.0 from any node.
func TestBlobFallbackTo11(t *testing.T) {
	a, b := blobPair(t, blob11, nil)
	w := watchBlob(b)
	path, sums := blobFile(t, 3*mib, 52)
	info, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{})
	if err != nil {
		t.Fatalf("SendFile to a 1.1.0 receiver: %v", err)
	}
	checkSent(t, blob11, info, "blob.bin", 3*mib, sums)
	if err := a.Host().Peerstore().RemoveProtocols(b.ID(), blobProtocols...); err != nil {
		t.Fatal(err)
	}
	info, err = a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{Name: "second.bin"})
	if err != nil {
		t.Fatalf("SendFile, protocols unknown: %v", err)
	}
	checkSent(t, blob11, info, "second.bin", 3*mib, sums)
	if protos, heads := w.streams(); len(protos) != 2 || protos[0] != blob11.id || protos[1] != blob11.id || strings.Contains(heads[0]+heads[1], "sha256") {
		t.Fatalf("streams %v %q: want two 1.1.0 streams without a hash in the header", protos, heads)
	}

	c, d := pair(t, nil) // d serves every version
	wd := watchBlob(d)
	info, err = c.Client().SendFile(ctxT(t), addrOf(t, d), path, SendOptions{SHA256: sums.SHA256})
	if err != nil {
		t.Fatalf("SendFile declaring the SHA-256: %v", err)
	}
	checkSent(t, blob11, info, "blob.bin", 3*mib, sums)
	if protos, _ := wd.streams(); len(protos) != 1 || protos[0] != blob11.id {
		t.Fatalf("streams %v: want one of 1.1.0", protos)
	}
}

// A file received over 1.2.0, which the store knows by its BLAKE3 alone, is
// usable everywhere a SHA-256 one is: list_files and read_file answer with
// its sha256 (computed once, then remembered) and its blake3; a 1.1.0
// sender of the same content is offered it by its SHA-256 and sends only
// the trailer; delete_file removes it. The other way round, a file received
// over 1.1.0 is offered to a 1.2.0 sender by its BLAKE3. And an upload
// begun over one version resumes over the other.
func TestBlobAcrossVersions(t *testing.T) {
	const size = 2 * mib
	a, b := pair(t, nil)
	path, sums := blobFile(t, size, 60)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{Name: "b3.bin"})
	if err != nil {
		t.Fatal(err)
	}
	checkSent(t, blob12, info, "b3.bin", size, sums)
	files := b.Store().Files()
	if st, err := files.Stat("b3.bin"); err != nil || st.BLAKE3 != sums.BLAKE3 || st.SHA256 != "" {
		t.Fatalf("the store's record of a 1.2.0 upload: %+v, %v; want its blake3 alone", st, err)
	}
	type listed struct {
		Files []map[string]any `json:"files"`
	}
	var l listed
	res, err := a.Client().CallSkill(ctxT(t), addrOf(t, b), "list_files", nil, protocol.CallOptions{})
	if err != nil || json.Unmarshal(res, &l) != nil || len(l.Files) != 1 || l.Files[0]["sha256"] != sums.SHA256 || l.Files[0]["blake3"] != sums.BLAKE3 {
		t.Fatalf("list_files: %s, %v; want sha256 %s and blake3 %s", res, err, sums.SHA256, sums.BLAKE3)
	}
	if st, _ := files.Stat("b3.bin"); st.SHA256 != sums.SHA256 || st.BLAKE3 != sums.BLAKE3 {
		t.Fatalf("after list_files the store knows %+v", st)
	}
	var rd struct {
		SHA256 string `json:"sha256"`
	}
	res, err = a.Client().CallSkill(ctxT(t), addrOf(t, b), "read_file", json.RawMessage(`{"filename":"b3.bin","length":16}`), protocol.CallOptions{})
	if err != nil || json.Unmarshal(res, &rd) != nil || rd.SHA256 != sums.SHA256 {
		t.Fatalf("read_file: %.200s, %v", res, err)
	}

	// A 1.1.0 sender of the same content: offered the stored file by its
	// SHA-256, it sends the trailer alone. The same for one that knows the
	// hash (SendOptions.SHA256, so 1.1.0), and for a 1.2.0 one by BLAKE3.
	if err := b.Store().Files().Delete("b3.bin"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{Name: "b3.bin"}); err != nil {
		t.Fatal(err)
	}
	off, answer := rawSend(t, blob11, a, b, headerOf(blob11, "b3.bin", size, ""), data, trailerFrame(store.HashSHA256, sums.SHA256))
	if *off.Offset != size || off.PrefixSHA256 != sums.SHA256 || off.PrefixBLAKE3 != "" || answer != string(resultFrame(blob11, store.FileInfo{Filename: "b3.bin", Size: size, SHA256: sums.SHA256})) {
		t.Fatalf("a 1.1.0 sender of a file received over 1.2.0: %+v, %q", off, answer)
	}
	var first atomic.Int64
	first.Store(-1)
	info, err = a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{Name: "b3.bin", SHA256: sums.SHA256, Progress: func(p SendProgress) { first.CompareAndSwap(-1, p.Offset) }})
	if err != nil || first.Load() != size {
		t.Fatalf("SendFile declaring the SHA-256 of a stored file: %+v, %v, started at %d", info, err, first.Load())
	}
	checkSent(t, blob11, info, "b3.bin", size, sums)

	// Received over 1.1.0, offered to a 1.2.0 sender by its BLAKE3.
	off, answer = rawSend(t, blob11, a, b, headerOf(blob11, "sha.bin", size, ""), data, trailerFrame(store.HashSHA256, sums.SHA256))
	if off.Error != nil || !strings.Contains(answer, sums.SHA256) {
		t.Fatalf("1.1.0 upload: %+v, %q", off, answer)
	}
	if st, _ := files.Stat("sha.bin"); st.SHA256 != sums.SHA256 || st.BLAKE3 != "" {
		t.Fatalf("the store's record of a 1.1.0 upload: %+v", st)
	}
	first.Store(-1)
	info, err = a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{Name: "sha.bin", Progress: func(p SendProgress) { first.CompareAndSwap(-1, p.Offset) }})
	if err != nil || first.Load() != size {
		t.Fatalf("SendFile (1.2.0) of a file received over 1.1.0: %+v, %v, started at %d", info, err, first.Load())
	}
	checkSent(t, blob12, info, "sha.bin", size, sums)

	// Begun over 1.1.0 (no hash declared), resumed over 1.2.0: the kept
	// bytes are rehashed by BLAKE3 for the prefix check.
	if _, answer := rawSend(t, blob11, a, b, headerOf(blob11, "mixed.bin", size, ""), data[:size/3], nil); !strings.Contains(answer, "kept") {
		t.Fatalf("interrupted 1.1.0 upload: %q", answer)
	}
	first.Store(-1)
	info, err = a.Client().SendFile(ctxT(t), addrOf(t, b), path, SendOptions{Name: "mixed.bin", Progress: func(p SendProgress) { first.CompareAndSwap(-1, p.Offset) }})
	if err != nil || first.Load() != size/3 {
		t.Fatalf("SendFile resuming a 1.1.0 upload: %+v, %v, started at %d", info, err, first.Load())
	}
	checkSent(t, blob12, info, "mixed.bin", size, sums)
	// And the other way round: begun over 1.2.0, resumed over 1.1.0.
	if _, answer := rawSend(t, blob12, a, b, headerOf(blob12, "back.bin", size, ""), data[:size/4], nil); !strings.Contains(answer, "kept") {
		t.Fatalf("interrupted 1.2.0 upload: %q", answer)
	}
	off, answer = rawSend(t, blob11, a, b, headerOf(blob11, "back.bin", size, ""), data, trailerFrame(store.HashSHA256, sums.SHA256))
	if *off.Offset != size/4 || off.PrefixSHA256 != digestsOf(data[:size/4]).SHA256 || !strings.Contains(answer, sums.SHA256) {
		t.Fatalf("a 1.1.0 resume of a 1.2.0 upload: %+v, %q", off, answer)
	}
	for _, name := range []string{"b3.bin", "sha.bin", "mixed.bin", "back.bin"} {
		if storedSHA(t, b, name) != sums.SHA256 {
			t.Fatalf("%s: stored content differs", name)
		}
		if _, err := a.Client().CallSkill(ctxT(t), addrOf(t, b), "delete_file", json.RawMessage(`{"filename":"`+name+`"}`), protocol.CallOptions{}); err != nil {
			t.Fatalf("delete_file %s: %v", name, err)
		}
	}
	if l, err := files.List(); err != nil || len(l) != 0 || len(hiddenEntries(t, b)) != 0 {
		t.Fatalf("after the deletes: %v, %v, hidden %v", l, err, hiddenEntries(t, b))
	}
}

// Every blob version a node serves has the blob stream caps in the
// resource manager, not the library's default protocol limits: they are
// set from blobVersions, as the handlers are.
func TestBlobLimitsEveryVersion(t *testing.T) {
	n := newTestNode(t, nil)
	rm := n.host.Network().ResourceManager()
	for _, v := range blobVersions {
		err := rm.ViewProtocol(v.id, func(s network.ProtocolScope) error {
			l, ok := s.(rcmgr.ResourceScopeLimiter)
			if !ok {
				return fmt.Errorf("scope %T has no limits to read", s)
			}
			lim := l.Limit()
			if in, mem := lim.GetStreamLimit(network.DirInbound), lim.GetMemoryLimit(); in != 64 || mem != 64*blobReserve {
				return fmt.Errorf("inbound streams %d, memory %d; want 64, %d", in, mem, 64*blobReserve)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", v.id, err)
		}
	}
}
