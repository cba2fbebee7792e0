package a2a

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/gostream"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/protocol"
)

// LibP2PProtocol is the libp2p stream protocol of A2A over libp2p: one
// HTTP/1.1 connection per stream, as libp2p's HTTP spec and go-libp2p's
// p2p/http name it. On it the face serves its JSON-RPC URL (Path) and its
// card (CardPath), the caller the stream's remote PeerID.
const LibP2PProtocol = "/http/1.1"

// Limits of A2A over libp2p.
const (
	// maxLibP2PPerPeer caps the requests of one PeerID in flight at once
	// (an event stream is one until it ends); past it a request is 503.
	maxLibP2PPerPeer = 8
	// maxLibP2P caps the requests of all PeerIDs in flight at once.
	maxLibP2P = 64
	// maxLibP2PBody caps a request body, as the edge's (8 MiB).
	maxLibP2PBody = protocol.DefaultMaxMessage
)

// LibP2P serves the face's A2A over libp2p streams of LibP2PProtocol on a
// libp2p host (Face.ServeLibP2P): A2A JSON-RPC (v1.0 and v0.3, by
// A2A-Version) at POST Path and the signed card at GET CardPath, for the
// caller that opened the stream, a mesh peer known by its PeerID (the
// node's policy grants it what it grants that PeerID or "*"). Close stops
// it.
type LibP2P struct {
	f    *Face
	h    host.Host
	l    net.Listener
	srv  *http.Server
	done chan struct{} // closed when Serve has returned

	mu       sync.Mutex
	inflight map[peer.ID]int
	total    int
	closed   bool
}

type peerKey struct{}

// ServeLibP2P starts serving the face's A2A over libp2p on h (the node's
// host): streams of LibP2PProtocol. A face serves it whether or not it is
// mounted on an edge; the cards it signs name the edge's URL when it is.
func (f *Face) ServeLibP2P(h host.Host) (*LibP2P, error) {
	if h == nil {
		return nil, errors.New("a2a: ServeLibP2P: nil host")
	}
	l, err := gostream.Listen(h, LibP2PProtocol, gostream.IgnoreEOF())
	if err != nil {
		return nil, fmt.Errorf("a2a: ServeLibP2P: listen on %s: %w", LibP2PProtocol, err)
	}
	s := &LibP2P{f: f, h: h, l: l, done: make(chan struct{}), inflight: map[peer.ID]int{}}
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
			w.Header().Set("Connection", "close")
			mux.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute, // the body; an event stream's answer has no write timeout
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if a := c.RemoteAddr(); a != nil && a.Network() == gostream.Network {
				if id, err := peer.Decode(a.String()); err == nil {
					return context.WithValue(ctx, peerKey{}, id)
				}
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

// Close stops serving: the stream handler is removed, open connections
// closed (their requests' contexts end). A second Close returns
// net.ErrClosed.
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
	return err
}

// caller is the mesh peer that opened r's stream; ok is false when the
// connection is not a libp2p stream (never, on this server).
func (s *LibP2P) caller(r *http.Request) (protocol.Caller, bool) {
	id, ok := r.Context().Value(peerKey{}).(peer.ID)
	if !ok || id == "" {
		return protocol.Caller{}, false
	}
	c := protocol.Caller{ID: id.String(), Via: "a2a", Kind: protocol.CallerPeer, Owner: "peer:" + id.String()}
	if conns := s.h.Network().ConnsToPeer(id); len(conns) > 0 {
		c.Remote = conns[0].RemoteMultiaddr().String()
	}
	return c, true
}

// take holds one of id's request slots; release gives it back. ok is
// false when id, or all peers together, are at their cap.
func (s *LibP2P) take(id string) (release func(), ok bool) {
	pid := peer.ID(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight[pid] >= maxLibP2PPerPeer || s.total >= maxLibP2P {
		return nil, false
	}
	s.inflight[pid]++
	s.total++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.total--
		if s.inflight[pid]--; s.inflight[pid] <= 0 {
			delete(s.inflight, pid)
		}
	}, true
}

func (s *LibP2P) serveRPC(w http.ResponseWriter, r *http.Request) {
	c, ok := s.caller(r)
	if !ok {
		writeJSON(w, http.StatusForbidden, map[string]any{"jsonrpc": "2.0", "id": nil,
			"error": rpcError{Code: codeEdgeRefusal, Message: "forbidden: not a libp2p stream"}})
		return
	}
	release, ok := s.take(c.ID)
	if !ok {
		c.Via = "a2a"
		perr := protocol.Errorf(codeEdgeRefusal, "busy: at most %d requests of one peer (%d of all) in flight over libp2p; retry", maxLibP2PPerPeer, maxLibP2P)
		s.f.b.Audit(r.Context(), c, "a2a", perr, time.Now())
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"jsonrpc": "2.0", "id": nil, "error": rpcError{Code: perr.Code, Message: perr.Message}})
		return
	}
	defer release()
	s.f.ServeAuthenticated(w, r, c)
}

// serveCard answers GET of the card over libp2p, as the edge does
// (serveCard): v1.0 form for A2A-Version 1.0, else v0.3, signed, naming
// the edge's advertised URL when the face has an edge.
func (s *LibP2P) serveCard(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	c, ok := s.caller(r)
	if !ok {
		writeJSON(w, http.StatusForbidden, map[string]any{"error": rpcError{Code: codeEdgeRefusal, Message: "forbidden: not a libp2p stream"}})
		return
	}
	c.Via = "a2a"
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
// body is capped at 8 MiB. A card it answers with (the extended card)
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
	if r.ContentLength > maxLibP2PBody {
		refuse(http.StatusRequestEntityTooLarge, protocol.Errorf(codeEdgeRefusal, "invalid request: the body is larger than the cap of %d bytes", maxLibP2PBody))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLibP2PBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			refuse(http.StatusRequestEntityTooLarge, protocol.Errorf(codeEdgeRefusal, "invalid request: the body is larger than the cap of %d bytes", maxLibP2PBody))
			return
		}
		refuse(http.StatusBadRequest, protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: the body could not be read: %s", protocol.Clip(err.Error(), 120)))
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
