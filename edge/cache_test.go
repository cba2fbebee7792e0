package edge

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcpv2/mcpv2/protocol"
)

// testFace is a value of a Cache: it records its Close, and says it is
// busy while busy is set.
type testFace struct {
	key    string
	log    *faceLog
	mu     sync.Mutex
	busy   bool
	closed bool
}

// faceLog records what a Cache made and closed, in order.
type faceLog struct {
	mu           sync.Mutex
	made, closed []string
}

func (l *faceLog) lists() (made, closed []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.made), slices.Clone(l.closed)
}

func (f *testFace) Close() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.log.mu.Lock()
	f.log.closed = append(f.log.closed, f.key)
	f.log.mu.Unlock()
	return nil
}

func (f *testFace) Busy() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.busy
}

func (f *testFace) setBusy(b bool) {
	f.mu.Lock()
	f.busy = b
	f.mu.Unlock()
}

func newTestCache(max, perIP, reserved int) (*Cache[*testFace], *faceLog) {
	l := &faceLog{}
	return &Cache[*testFace]{Max: max, MaxPerIP: perIP, Reserved: reserved, New: func(k string) *testFace {
		l.mu.Lock()
		l.made = append(l.made, k)
		l.mu.Unlock()
		return &testFace{key: k, log: l}
	}}, l
}

// get acquires key for owner and releases it at once (a request that
// ended), returning the value.
func get(t *testing.T, c *Cache[*testFace], key, owner string) (*testFace, error) {
	t.Helper()
	v, release, err := c.Acquire(context.Background(), key, owner, nil)
	if err != nil {
		return nil, err
	}
	release()
	release() // a second release is a no-op
	return v, nil
}

// TestCacheLRU: values are made once, the least recently used idle one is
// closed past Max, and Close closes the rest; Acquire after Close fails.
func TestCacheLRU(t *testing.T) {
	c, l := newTestCache(2, 0, 0)
	for _, k := range []string{"a", "b", "a", "c"} { // a is the most recent; b goes for c
		if _, err := get(t, c, k, ""); err != nil {
			t.Fatal(err)
		}
	}
	if made, closed := l.lists(); strings.Join(made, ",") != "a,b,c" || strings.Join(closed, ",") != "b" {
		t.Fatalf("made %v, closed %v", made, closed)
	}
	if _, err := get(t, c, "b", ""); err != nil { // made again; a goes
		t.Fatal(err)
	}
	c.Close()
	if made, closed := l.lists(); strings.Join(made, ",") != "a,b,c,b" || !strings.HasPrefix(strings.Join(closed, ","), "b,a,") || len(closed) != 4 {
		t.Fatalf("made %v, closed %v", made, closed)
	}
	if _, _, err := c.Acquire(context.Background(), "d", "", nil); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Acquire after Close: %v, want net.ErrClosed", err)
	}
}

// TestCacheBusyNeverEvicted: a value that is busy, or held by a request in
// flight, is never closed to make room; when nothing can go, the new one is
// refused (ErrFacesBusy) and nothing is made.
func TestCacheBusyNeverEvicted(t *testing.T) {
	c, l := newTestCache(2, 0, 0)
	a, err := get(t, c, "a", "")
	if err != nil {
		t.Fatal(err)
	}
	a.setBusy(true) // an MCP session, a running task
	_, releaseB, err := c.Acquire(context.Background(), "b", "", nil)
	if err != nil { // a standing stream holds b
		t.Fatal(err)
	}
	for _, k := range []string{"x", "y", "z"} {
		if _, err := get(t, c, k, ""); !errors.Is(err, ErrFacesBusy) {
			t.Fatalf("%s with every face busy: %v, want ErrFacesBusy", k, err)
		}
	}
	if made, closed := l.lists(); len(closed) != 0 || len(made) != 2 {
		t.Fatalf("made %v, closed %v: a busy face was closed, or a refused one made", made, closed)
	}
	releaseB() // b is idle now: it goes, a stays
	if _, err := get(t, c, "x", ""); err != nil {
		t.Fatal(err)
	}
	if _, closed := l.lists(); strings.Join(closed, ",") != "b" {
		t.Fatalf("closed %v, want b", closed)
	}
	a.setBusy(false) // a is idle and the oldest: it goes for y
	if _, err := get(t, c, "y", ""); err != nil {
		t.Fatal(err)
	}
	if _, closed := l.lists(); strings.Join(closed, ",") != "b,a" {
		t.Fatalf("closed %v, want b,a", closed)
	}
	c.Close()
}

// TestCachePerIP: one owner's faces are capped (its own oldest idle one
// goes first; when all are busy a new one is refused ErrFacesPerIP) without
// touching another owner's; owners together leave the reserved share to
// callers without one.
func TestCachePerIP(t *testing.T) {
	c, l := newTestCache(6, 2, 2)
	a1, _ := get(t, c, "a1", "10.0.0.1")
	if _, err := get(t, c, "a2", "10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if _, err := get(t, c, "a3", "10.0.0.1"); err != nil { // a1 goes: it is the owner's oldest idle one
		t.Fatal(err)
	}
	if _, closed := l.lists(); strings.Join(closed, ",") != "a1" || !a1.closed {
		t.Fatalf("closed %v, want a1", closed)
	}
	for _, k := range []string{"a2", "a3"} {
		v, _ := get(t, c, k, "10.0.0.1")
		v.setBusy(true)
	}
	if _, err := get(t, c, "a4", "10.0.0.1"); !errors.Is(err, ErrFacesPerIP) {
		t.Fatalf("a 3rd busy face of one IP: %v, want ErrFacesPerIP", err)
	}
	// Another IP is not held back by the first one's cap.
	b1, _ := get(t, c, "b1", "10.0.0.2")
	b2, _ := get(t, c, "b2", "10.0.0.2")
	b1.setBusy(true)
	b2.setBusy(true)
	// Owners fill 4 of 6 places, all busy: a third owner is refused, a
	// secret holder (no owner) is not.
	if _, err := get(t, c, "c1", "10.0.0.3"); !errors.Is(err, ErrFacesBusy) {
		t.Fatalf("past the owners' share: %v, want ErrFacesBusy", err)
	}
	for _, k := range []string{"s1", "s2"} {
		if _, err := get(t, c, k, ""); err != nil {
			t.Fatalf("%s in the reserved share: %v", k, err)
		}
	}
	if made, closed := l.lists(); len(closed) != 1 || len(made) != 7 || c.Len() != 6 {
		t.Fatalf("made %v, closed %v, len %d", made, closed, c.Len())
	}
	c.Close()
}

// TestCacheReach: a face is made only when reach says the peer answers;
// reach is not asked again for a face in the Cache.
func TestCacheReach(t *testing.T) {
	c, l := newTestCache(4, 0, 0)
	down := errors.New("did not answer")
	asked := 0
	reach := func(err error) func(context.Context) error {
		return func(context.Context) error { asked++; return err }
	}
	if _, _, err := c.Acquire(context.Background(), "p", "10.0.0.1", reach(down)); !errors.Is(err, down) {
		t.Fatalf("unreachable: %v", err)
	}
	if made, _ := l.lists(); len(made) != 0 || c.Len() != 0 {
		t.Fatalf("made %v for a peer that did not answer", made)
	}
	for range 2 {
		_, release, err := c.Acquire(context.Background(), "p", "10.0.0.1", reach(nil))
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	if made, _ := l.lists(); len(made) != 1 || asked != 2 {
		t.Fatalf("made %v, reach asked %d times (want 1 face, 2 asks)", made, asked)
	}
	c.Close()
}

// TestPeerFaceRoute: over the edge, a peer path that does not decode as a
// PeerID is 400, a peer that does not answer is 502 with no face made (the
// dial error stays out of the answer), one that answers gets a face, and a
// busy cache answers 503 with Retry-After.
func TestPeerFaceRoute(t *testing.T) {
	b := &fakeBackend{}
	e := startEdgeWith(t, b, Config{})
	c, l := newTestCache(1, 0, 0)
	defer c.Close()
	served := 0
	e.s.Mux().Handle("/peers/{peer}/x", e.s.AuthenticatedFace([]string{http.MethodPost}, nil, e.s.PeerFace(
		func(w http.ResponseWriter, _ *http.Request, _ protocol.Caller) { w.WriteHeader(http.StatusNoContent) },
		func(peer string) func(http.ResponseWriter, *http.Request, protocol.Caller) {
			return c.Serve(e.s, peer, func(v *testFace, w http.ResponseWriter, _ *http.Request, _ protocol.Caller) {
				served++
				w.WriteHeader(http.StatusNoContent)
			})
		})))
	hdr := map[string]string{SessionHeader: e.token}
	const other = "12D3KooWRm93TBci34EWQgZJ3EmaQSAKgg7VD5vq2emZQpLSUW6W"
	// Shaped like a PeerID, but not a multihash.
	st, _, body := e.do(t, http.MethodPost, "/peers/"+testPeerID[:len(testPeerID)-1]+"/x", []byte("{}"), hdr)
	if st != http.StatusBadRequest || !strings.Contains(string(body), "not a PeerID") {
		t.Fatalf("undecodable PeerID: %d %s", st, body)
	}
	b.set(func(f *fakeBackend) { f.forwardErr = errors.New("dial tcp 127.0.0.1:4242: connection refused") })
	st, _, body = e.do(t, http.MethodPost, "/peers/"+other+"/x", []byte("{}"), hdr)
	var resp protocol.Response
	_ = json.Unmarshal(body, &resp)
	if st != http.StatusBadGateway || resp.Error == nil || resp.Error.Code != protocol.CodeToolExecution ||
		!strings.Contains(resp.Error.Message, "could not reach peer") || strings.Contains(string(body), "4242") {
		t.Fatalf("unreachable peer: %d %s", st, body)
	}
	if made, _ := l.lists(); len(made) != 0 || served != 0 {
		t.Fatalf("a face was made (%v) or served (%d) for a peer that did not answer", made, served)
	}
	b.set(func(f *fakeBackend) { f.forwardErr = nil })
	if st, _, body = e.do(t, http.MethodPost, "/peers/"+other+"/x", []byte("{}"), hdr); st != http.StatusNoContent || served != 1 {
		t.Fatalf("reachable peer: %d %s (served %d)", st, body, served)
	}
	fl := b.forwardList()
	if len(fl) != 2 || fl[1].peer != other || !strings.Contains(fl[1].msg, protocol.MethodAgentCard) {
		t.Fatalf("forwarded %+v, want two agent/card checks of %s", fl, other)
	}
	v, _ := get(t, c, other, "")
	v.setBusy(true)
	st, h, body := e.do(t, http.MethodPost, "/peers/"+testOtherPeer(t)+"/x", []byte("{}"), hdr)
	if st != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || !strings.Contains(string(body), "1 peer faces") {
		t.Fatalf("full of busy faces: %d %v %s", st, h, body)
	}
	if made, closed := l.lists(); len(made) != 1 || len(closed) != 0 {
		t.Fatalf("made %v, closed %v", made, closed)
	}
}

// testOtherPeer is a third PeerID that decodes.
func testOtherPeer(t *testing.T) string {
	t.Helper()
	const p = "12D3KooWSTi7KqgKCXCjD7bXgCwaHryeHuPRA9JsXMnrNY5exY8w"
	if !decodes(p) {
		t.Fatalf("%s does not decode", p)
	}
	return p
}
