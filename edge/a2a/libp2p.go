package a2a

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/gostream"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/protocol"
)

// LibP2PProtocol is the libp2p stream protocol of A2A over libp2p: one
// HTTP/1.1 connection per stream, as libp2p's HTTP spec and go-libp2p's
// p2p/http name it. On it the face serves its JSON-RPC URL (Path) and its
// card (CardPath), the caller the stream's remote PeerID.
const LibP2PProtocol = "/http/1.1"

// Limits of A2A over libp2p. A PeerID costs nothing to make, so the caps
// per PeerID alone would let a few fresh ones take every slot: each request
// also counts against its connection's remote IP (an IPv6 /64; a relayed
// connection counts against its relay's), and a PeerID's requests against
// a token bucket. Every request — JSON-RPC and card GETs alike — holds a
// slot from the moment its headers are read; its body must arrive within
// the read timeout, so a slow body holds one only that long.
const (
	// maxLibP2PPerPeer caps the requests of one PeerID in flight at once
	// (an event stream is one until it ends); past it a request is 503.
	maxLibP2PPerPeer = 8
	// maxLibP2PPerIP caps the requests in flight of all PeerIDs whose
	// connections come from one remote IP (IPv6: one /64).
	maxLibP2PPerIP = 16
	// maxLibP2P caps the requests of all PeerIDs in flight at once.
	maxLibP2P = 64
	// maxLibP2PBody caps a request body, as the edge's (8 MiB).
	maxLibP2PBody = protocol.DefaultMaxMessage
	// DefaultLibP2PReadTimeout is how long a request's headers and body
	// may take to arrive (the headers alone: 10 s); the body's slot is
	// held that long at most.
	DefaultLibP2PReadTimeout = 20 * time.Second
	// DefaultLibP2PRate is the requests per second (and burst) one PeerID
	// may send, as the edge allows one session (edge.DefaultRateLimit).
	DefaultLibP2PRate float64 = edge.DefaultRateLimit
	// libp2pCloseWait bounds how long Close waits for the handlers whose
	// streams it closed to return.
	libp2pCloseWait = 10 * time.Second
)

// LibP2P serves the face's A2A over libp2p streams of LibP2PProtocol on a
// libp2p host (Face.ServeLibP2P): A2A JSON-RPC (v1.0 and v0.3, by
// A2A-Version) at POST Path and the signed card at GET CardPath, for the
// caller that opened the stream, a mesh peer known by its PeerID (the
// node's policy grants it what it grants that PeerID or "*"). Close stops
// it.
type LibP2P struct {
	f     *Face
	h     host.Host
	l     net.Listener
	srv   *http.Server
	rate  *edge.KeyedLimiter
	rps   float64       // rate's requests per second of a PeerID
	done  chan struct{} // closed when Serve has returned
	calls sync.WaitGroup

	mu      sync.Mutex
	perPeer map[peer.ID]int
	perIP   map[string]int
	total   int
	closed  bool
}

// LibP2POption configures ServeLibP2P.
type LibP2POption func(*libp2pConfig) error

type libp2pConfig struct {
	readTimeout time.Duration
	rate        float64
}

// WithLibP2PReadTimeout sets how long a request's headers and body may
// take to arrive (DefaultLibP2PReadTimeout); a body still arriving then is
// answered 408 and its slot given back.
func WithLibP2PReadTimeout(d time.Duration) LibP2POption {
	return func(c *libp2pConfig) error {
		if d <= 0 {
			return fmt.Errorf("a2a: WithLibP2PReadTimeout: %s is not positive", d)
		}
		c.readTimeout = d
		return nil
	}
}

// WithLibP2PRate sets the requests per second (and burst) of one PeerID
// (DefaultLibP2PRate); a negative rate turns the limit off.
func WithLibP2PRate(perSecond float64) LibP2POption {
	return func(c *libp2pConfig) error {
		if perSecond == 0 {
			return errors.New("a2a: WithLibP2PRate: 0 requests per second would refuse every one; a negative rate turns the limit off")
		}
		c.rate = perSecond
		return nil
	}
}

// stream is what the server knows of a request's libp2p stream: the
// PeerID that opened it, the remote multiaddr of its connection, and the
// key of that address's IP share.
type stream struct {
	id     peer.ID
	remote string
	ip     string
}

type streamKey struct{}

// ServeLibP2P starts serving the face's A2A over libp2p on h (the node's
// host): streams of LibP2PProtocol. A face serves it whether or not it is
// mounted on an edge; the cards it signs name the edge's URL when it is.
func (f *Face) ServeLibP2P(h host.Host, opts ...LibP2POption) (*LibP2P, error) {
	if h == nil {
		return nil, errors.New("a2a: ServeLibP2P: nil host")
	}
	cfg := libp2pConfig{readTimeout: DefaultLibP2PReadTimeout, rate: DefaultLibP2PRate}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	gl, err := gostream.Listen(h, LibP2PProtocol)
	if err != nil {
		return nil, fmt.Errorf("a2a: ServeLibP2P: listen on %s: %w", LibP2PProtocol, err)
	}
	l := halfCloseListener{gl}
	s := &LibP2P{f: f, h: h, l: l, done: make(chan struct{}), rate: edge.NewKeyedLimiter(cfg.rate), rps: cfg.rate,
		perPeer: map[peer.ID]int{}, perIP: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc(Path, s.serveRPC)
	mux.HandleFunc(CardPath, s.serveCard)
	mux.HandleFunc(CardAlias, s.serveCard)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": rpcError{Code: protocol.CodeMethodNotFound,
			Message: fmt.Sprintf("not found: %q; A2A over libp2p serves POST %s (JSON-RPC) and GET %s", protocol.Clip(r.URL.Path, 80), Path, CardPath)}})
	})
	s.srv = &http.Server{
		// One request per stream, as libp2p's HTTP has it: the stream ends
		// with its answer.
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !s.enter() {
				writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": rpcError{Code: codeEdgeRefusal, Message: "unavailable: A2A over libp2p is closing"}})
				return
			}
			defer s.calls.Done()
			w.Header().Set("Connection", "close")
			mux.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: min(10*time.Second, cfg.readTimeout),
		// The headers and the body; Go clears it once the body is read,
		// so an event stream's answer has no timeout.
		ReadTimeout:    cfg.readTimeout,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 16 << 10,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			hc, ok := c.(*halfClose)
			if !ok {
				return ctx
			}
			if id, err := peer.Decode(hc.RemoteAddr().String()); err == nil {
				st := stream{id: id, ip: "non-ip"}
				if hc.remote != nil {
					st.remote, st.ip = hc.remote.String(), ipShare(hc.remote)
				}
				return context.WithValue(ctx, streamKey{}, st)
			}
			return ctx
		},
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			f.log.Error("a2a over libp2p stopped", "err", err)
		}
	}()
	return s, nil
}

// halfCloseListener accepts the streams of A2A over libp2p as halfClose
// connections.
type halfCloseListener struct{ net.Listener }

func (l halfCloseListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	hc := &halfClose{Conn: c, closed: make(chan struct{})}
	if sc, ok := c.(interface{ Conn() network.Conn }); ok {
		hc.remote = sc.Conn().RemoteMultiaddr()
	}
	return hc, nil
}

// halfClose is a stream as the HTTP server's connection. A client may
// close its side of the stream once its request is sent (libp2p's HTTP
// does), and Go's server would take that EOF, seen by its read in the
// background while the answer is written, for a client gone and end an
// event stream. So an EOF while no read deadline is set (the background
// read: the request has been read) waits for Close instead; an EOF while
// one is set (a request's headers or body being read) is the EOF it is,
// so a body cut short is answered at once, never read again and again.
type halfClose struct {
	net.Conn
	remote ma.Multiaddr // the remote multiaddr of the stream's connection

	mu       sync.Mutex
	deadline bool // a read deadline is set

	once   sync.Once
	closed chan struct{}
}

func (c *halfClose) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if !errors.Is(err, io.EOF) {
		return n, err
	}
	c.mu.Lock()
	reading := c.deadline
	c.mu.Unlock()
	if reading {
		return n, err
	}
	if n > 0 {
		return n, nil
	}
	<-c.closed
	return 0, net.ErrClosed
}

func (c *halfClose) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = !t.IsZero()
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *halfClose) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = !t.IsZero()
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *halfClose) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// ipShare is the key of the IP share of a connection from m: its IP (for a
// relayed connection, the relay's: the first component), an IPv6 address's
// /64, or "non-ip" for every transport without one.
func ipShare(m ma.Multiaddr) string {
	ip, err := manet.ToIP(m)
	if err != nil {
		return "non-ip"
	}
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return "non-ip"
	}
	if a = a.Unmap(); a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// enter counts a request's handler, unless Close has begun.
func (s *LibP2P) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.calls.Add(1)
	return true
}

// Close stops serving: the stream handler is removed, open connections
// closed (their requests' contexts end), and it waits (up to 10 s) for
// the handlers to return, so that the face they call may be closed after
// it. A second Close returns net.ErrClosed.
func (s *LibP2P) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return net.ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	err := s.srv.Close()
	<-s.done
	returned := make(chan struct{})
	go func() {
		s.calls.Wait()
		close(returned)
	}()
	t := time.NewTimer(libp2pCloseWait)
	defer t.Stop()
	select {
	case <-returned:
	case <-t.C:
		s.f.log.Warn("a2a over libp2p: handlers still running after Close", "waited", libp2pCloseWait)
		err = errors.Join(err, fmt.Errorf("a2a over libp2p: Close: handlers still running after %s", libp2pCloseWait))
	}
	return err
}

// caller is the mesh peer that opened r's stream and the stream; ok is
// false when the connection is not a libp2p stream (never, on this
// server).
func (s *LibP2P) caller(r *http.Request) (protocol.Caller, stream, bool) {
	st, ok := r.Context().Value(streamKey{}).(stream)
	if !ok || st.id == "" {
		return protocol.Caller{}, stream{}, false
	}
	c := protocol.Caller{ID: st.id.String(), Via: "a2a", Kind: protocol.CallerPeer, Owner: "peer:" + st.id.String(), Remote: st.remote}
	return c, st, true
}

// take holds one request slot of st's PeerID and IP; release gives it
// back. Past a cap it holds nothing and returns the refusal's reason.
func (s *LibP2P) take(st stream) (release func(), refusal string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.perPeer[st.id] >= maxLibP2PPerPeer:
		return nil, fmt.Sprintf("busy: at most %d requests of one peer in flight over libp2p; retry", maxLibP2PPerPeer)
	case s.perIP[st.ip] >= maxLibP2PPerIP:
		return nil, fmt.Sprintf("busy: at most %d requests of the peers at one IP address (%s) in flight over libp2p; retry", maxLibP2PPerIP, st.ip)
	case s.total >= maxLibP2P:
		return nil, fmt.Sprintf("busy: at most %d requests of all peers in flight over libp2p; retry", maxLibP2P)
	}
	s.perPeer[st.id]++
	s.perIP[st.ip]++
	s.total++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.total--
		if s.perPeer[st.id]--; s.perPeer[st.id] <= 0 {
			delete(s.perPeer, st.id)
		}
		if s.perIP[st.ip]--; s.perIP[st.ip] <= 0 {
			delete(s.perIP, st.ip)
		}
	}, ""
}

// admit lets r in for its PeerID, within the PeerID's rate and the slots
// (take), and returns the caller and the slot's release. When it does not,
// it has answered (403, 429 or 503, -32000, in the form of card: an
// {"error"} object, else a JSON-RPC response) and written the audit line
// of method.
func (s *LibP2P) admit(w http.ResponseWriter, r *http.Request, method string, card bool) (protocol.Caller, func(), bool) {
	start := time.Now()
	answer := func(status int, e rpcError) {
		if card {
			writeJSON(w, status, map[string]any{"error": e})
			return
		}
		writeJSON(w, status, map[string]any{"jsonrpc": "2.0", "id": nil, "error": e})
	}
	c, st, ok := s.caller(r)
	if !ok {
		answer(http.StatusForbidden, rpcError{Code: codeEdgeRefusal, Message: "forbidden: not a libp2p stream"})
		return c, nil, false
	}
	if ok, after := s.rate.Allow(c.ID, start); !ok {
		perr := protocol.Errorf(codeEdgeRefusal, "rate limited: this peer sends more than %g requests per second over libp2p; retry in %d s", s.rps, after)
		s.f.b.Audit(r.Context(), c, method, perr, start)
		w.Header().Set("Retry-After", strconv.Itoa(after))
		answer(http.StatusTooManyRequests, rpcError{Code: perr.Code, Message: perr.Message})
		return c, nil, false
	}
	release, refusal := s.take(st)
	if release == nil {
		perr := protocol.Errorf(codeEdgeRefusal, "%s", refusal)
		s.f.b.Audit(r.Context(), c, method, perr, start)
		w.Header().Set("Retry-After", "1")
		answer(http.StatusServiceUnavailable, rpcError{Code: perr.Code, Message: perr.Message})
		return c, nil, false
	}
	return c, release, true
}

func (s *LibP2P) serveRPC(w http.ResponseWriter, r *http.Request) {
	c, release, ok := s.admit(w, r, "a2a", false)
	if !ok {
		return
	}
	defer release()
	s.f.ServeAuthenticated(w, r, c)
}

// serveCard answers GET of the card over libp2p, as the edge does
// (serveCard): v1.0 form for A2A-Version 1.0, else v0.3, signed, naming
// the edge's advertised URL when the face has an edge. It holds a slot as
// a JSON-RPC request does: each card is signed.
func (s *LibP2P) serveCard(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	c, release, ok := s.admit(w, r, "a2a card", true)
	if !ok {
		return
	}
	defer release()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": rpcError{Code: protocol.CodeInvalidRequest, Message: "invalid request: use GET"}})
		return
	}
	v, verr := version(r)
	if verr != nil {
		s.f.b.Audit(r.Context(), c, "a2a card", &protocol.Error{Code: verr.Code, Message: verr.Message}, start)
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": verr})
		return
	}
	card, err := s.f.cardJSON(s.f.advertisedBase(), v, "", s.f.accepts())
	if err != nil {
		s.f.log.Error("a2a card", "err", err)
		s.f.b.Audit(r.Context(), c, "a2a card", protocol.Errorf(protocol.CodeInternal, "internal error"), start)
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": rpcError{Code: protocol.CodeInternal, Message: "internal error: the card could not be signed"}})
		return
	}
	s.f.b.Audit(r.Context(), c, "a2a card", nil, start)
	writeRaw(w, card)
}

// ServeAuthenticated serves one A2A JSON-RPC request r (POST, A2A-Version
// choosing the version, its body not read yet) for c, a caller that the
// transport authenticated itself (A2A over libp2p: the stream's PeerID),
// with the face's own checks, limits and audit line as on the edge; the
// body is capped at 8 MiB and read as the edge reads one (edge.ReadLimited:
// a known length is one allocation), and a read that times out (the
// server's ReadTimeout) is 408. A card it answers with (the extended card)
// names the edge's advertised URL, or none without an edge.
func (f *Face) ServeAuthenticated(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	started := time.Now()
	c.Via = "a2a"
	refuse := func(status int, perr *protocol.Error) {
		f.b.Audit(r.Context(), c, "a2a", perr, started)
		writeJSON(w, status, map[string]any{"jsonrpc": "2.0", "id": nil, "error": rpcError{Code: perr.Code, Message: perr.Message}})
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		refuse(http.StatusMethodNotAllowed, protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: method %s is not allowed on %s; use POST", protocol.Clip(r.Method, 20), Path))
		return
	}
	body, err := edge.ReadLimited(w, r, maxLibP2PBody)
	if err != nil {
		var tooBig *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &tooBig):
			refuse(http.StatusRequestEntityTooLarge, protocol.Errorf(codeEdgeRefusal, "invalid request: the body is larger than the cap of %d bytes", maxLibP2PBody))
		case errors.As(err, &ne) && ne.Timeout():
			refuse(http.StatusRequestTimeout, protocol.Errorf(codeEdgeRefusal, "invalid request: the body did not arrive within the read timeout; send it whole at once"))
		default:
			refuse(http.StatusBadRequest, protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: the body could not be read: %s", protocol.Clip(err.Error(), 120)))
		}
		return
	}
	f.serveRPCBody(w, r, c, body, f.advertisedBase(), started)
}

// accepts is what the face's edge accepts, nil without an edge.
func (f *Face) accepts() *edge.Accepts {
	if f.e == nil {
		return nil
	}
	a := f.e.Accepts()
	return &a
}
