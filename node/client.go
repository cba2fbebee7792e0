package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// Client-side streams.
const (
	// maxStreamsPerPeer bounds the RPC streams open to one peer, in use and
	// idle together; more calls at once wait for one of them. It stays
	// below the 64 a node accepts from one peer (node.go), so that streams
	// this client has closed but the peer has not yet reaped never take it
	// over its cap, which it would answer with resets.
	maxStreamsPerPeer = 48
	// idleKeep is how long an idle stream is reused; below the server's 60 s
	// idle timeout so that a reused stream is never one the server closed.
	idleKeep = 45 * time.Second
)

// pooledStream is a client RPC stream with its frame reader.
type pooledStream struct {
	s    network.Stream
	fr   *transport.FrameReader
	last time.Time
	// deadline is set while the stream carries a call's deadline, which
	// put clears.
	deadline bool
}

// peerStreams are the client's streams to one peer.
type peerStreams struct {
	idle []*pooledStream
	// open counts the streams to the peer, idle and in use.
	open int
	// wake is closed (and replaced) when a stream goes back to idle or is
	// gone, to wake the calls waiting for one; waiting counts them.
	wake    chan struct{}
	waiting int
}

// streamPool keeps the client's streams per peer: consecutive calls reuse
// an idle stream (and its connection), at most maxStreamsPerPeer are open
// to a peer, and a call beyond that waits for one. mu guards peers and
// closed.
type streamPool struct {
	h      host.Host
	mu     sync.Mutex
	peers  map[peer.ID]*peerStreams
	closed bool
}

func newStreamPool(h host.Host) *streamPool {
	return &streamPool{h: h, peers: map[peer.ID]*peerStreams{}}
}

// get returns an idle stream to pid (reused true) or opens a new one,
// waiting while maxStreamsPerPeer are in use. The stream goes back with put
// or away with discard.
func (p *streamPool) get(ctx context.Context, pid peer.ID, maxMsg int) (*pooledStream, bool, error) {
	for {
		p.mu.Lock()
		ps := p.peers[pid]
		if ps == nil {
			ps = &peerStreams{wake: make(chan struct{})}
			p.peers[pid] = ps
		}
		now := time.Now()
		for len(ps.idle) > 0 {
			s := ps.idle[len(ps.idle)-1]
			ps.idle = ps.idle[:len(ps.idle)-1]
			if now.Sub(s.last) < idleKeep {
				p.mu.Unlock()
				return s, true, nil
			}
			_ = s.s.Close()
			ps.open--
		}
		if ps.open < maxStreamsPerPeer {
			ps.open++
			p.mu.Unlock()
			s, err := p.h.NewStream(network.WithAllowLimitedConn(ctx, "mcpv2 rpc"), pid, libp2pproto.ID(protocol.RPCProtocolID))
			if err != nil {
				p.gone(pid)
				return nil, false, err
			}
			return &pooledStream{s: s, fr: transport.NewFrameReader(s, maxMsg)}, false, nil
		}
		wake := ps.wake
		ps.waiting++
		p.mu.Unlock()
		var err error
		select {
		case <-wake:
		case <-ctx.Done():
			err = fmt.Errorf("waiting for one of the %d streams in use: %w", maxStreamsPerPeer, ctx.Err())
		}
		p.mu.Lock()
		ps.waiting--
		p.mu.Unlock()
		if err != nil {
			return nil, false, err
		}
	}
}

// put returns a healthy stream to the pool (closes it once the pool is
// closed).
func (p *streamPool) put(pid peer.ID, s *pooledStream) {
	s.last = time.Now()
	if s.deadline {
		_ = s.s.SetDeadline(time.Time{})
		s.deadline = false
	}
	p.mu.Lock()
	if ps := p.peers[pid]; !p.closed && ps != nil {
		ps.idle = append(ps.idle, s)
		ps.signal()
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.discard(pid, s, false)
}

// discard ends a stream from get that does not go back: reset after a
// failure, else closed.
func (p *streamPool) discard(pid peer.ID, s *pooledStream, reset bool) {
	if reset {
		_ = s.s.Reset()
	} else {
		_ = s.s.Close()
	}
	p.gone(pid)
}

// gone uncounts a stream to pid that is no more.
func (p *streamPool) gone(pid peer.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.peers[pid]
	if ps == nil {
		return
	}
	ps.open--
	ps.signal()
	if ps.open <= 0 && len(ps.idle) == 0 {
		delete(p.peers, pid) // the map holds only peers with streams
	}
}

// signal wakes the calls waiting for a stream, if any; under
// streamPool.mu.
func (ps *peerStreams) signal() {
	if ps.waiting > 0 {
		close(ps.wake)
		ps.wake = make(chan struct{})
	}
}

func (p *streamPool) closeAll() {
	p.mu.Lock()
	p.closed = true
	var idle []*pooledStream
	for pid, ps := range p.peers {
		idle = append(idle, ps.idle...)
		ps.open -= len(ps.idle)
		ps.idle = nil
		if ps.open <= 0 {
			delete(p.peers, pid)
		}
	}
	p.mu.Unlock()
	for _, s := range idle {
		_ = s.s.Close()
	}
}

// ErrNoRoute is returned when a peer named by PeerID alone has no known
// addresses and no peer routing can find it.
var ErrNoRoute = errors.New("node: no route to peer")

// Reasons of a [PeerError].
const (
	// ReasonUnreachable: no connection to the peer could be made, or no
	// stream opened on it (no known address, every dial failed or was
	// refused by the dialling rule, the peer is gone).
	ReasonUnreachable = "unreachable"
	// ReasonNoAnswer: the peer was reached, and its answer never came
	// whole (the stream was reset or ended, or the answer did not match).
	ReasonNoAnswer = "no_answer"
)

// PeerError is Node.Forward's error when the peer could not be reached or
// did not answer. Its text names the peer and the reason only: what the
// dial found (a closed port, an open one that speaks no libp2p, a
// handshake with someone else) would let a remote caller probe the
// addresses the node dials, so it goes to the node's log, not to the
// caller. Err is the cause, for errors.Is and the log.
type PeerError struct {
	// Peer is the peer called.
	Peer peer.ID
	// Reason is ReasonUnreachable or ReasonNoAnswer.
	Reason string
	// Err is what the dial or the stream found; never nil.
	Err error
}

// Error returns "node: could not reach peer <PeerID> (<reason>)".
func (e *PeerError) Error() string {
	return "node: could not reach peer " + e.Peer.String() + " (" + e.Reason + ")"
}

// Unwrap returns the cause.
func (e *PeerError) Unwrap() error { return e.Err }

// PeerReason returns the reason, for a face that reports it (the edge
// reads it through an interface of its own).
func (e *PeerError) PeerReason() string { return e.Reason }

// openStreamError is send's error when no stream to the peer could be
// opened (which dials the peer when the connection is gone).
type openStreamError struct {
	pid peer.ID
	err error
}

func (e *openStreamError) Error() string {
	return fmt.Sprintf("node: open stream to %s: %v", e.pid, e.err)
}

func (e *openStreamError) Unwrap() error { return e.err }

// sendReason is the PeerError reason of an error of send: unreachable when
// no stream could be opened, else no answer.
func sendReason(err error) string {
	var oe *openStreamError
	if errors.As(err, &oe) {
		return ReasonUnreachable
	}
	return ReasonNoAnswer
}

// peerFailed logs why a forward to pid failed, at Debug (a caller chose
// the peer), and returns the PeerError the caller sees.
func (n *Node) peerFailed(pid peer.ID, reason string, err error) error {
	n.log.Debug("gateway: could not reach peer", "peer", pid, "reason", reason, "err", err)
	return &PeerError{Peer: pid, Reason: reason, Err: err}
}

// PeerRouter finds a peer's addresses (the DHT satisfies it).
type PeerRouter interface {
	FindPeer(ctx context.Context, id peer.ID) (peer.AddrInfo, error)
}

// Client calls mesh peers over /mcpv2/rpc/1.0.0, reusing streams and
// connections. A Node embeds one; the CLI's client commands use one alone.
// It is safe for concurrent use; mu guards router and noDirect.
//
// A pooled stream never carries two calls' answers: a stream goes back to
// the pool only after a request whose answer was read in full and matched
// to the request's ids, and every call puts ids on the wire that no other
// call of this Client uses, so a stale answer cannot pass for a new one.
type Client struct {
	host   host.Host
	pool   *streamPool
	secret []byte
	now    func() time.Time
	maxMsg int
	ids    atomic.Uint64 // the last wire id handed out
	// waitDirect is ClientConfig.WaitDirect.
	waitDirect time.Duration
	// sessions are the mesh session tokens calls carry while fresh
	// (meshSession), one per receiver and purpose; sessMu guards it. No
	// other lock is taken while sessMu is held.
	sessMu   sync.Mutex
	sessions map[sessionKey]mintedSession
	// lastPeer is the PeerID decodePeer decoded last.
	lastPeer atomic.Pointer[decodedPeer]

	mu     sync.Mutex
	router PeerRouter
	// noDirect holds when a wait for a direct connection to a peer last
	// came to nothing (symmetric NAT, a firewall): calls to it do not wait
	// again for punchRetry, so a relayed peer costs the wait once, not on
	// every call or every relay circuit of a long transfer.
	noDirect map[peer.ID]time.Time
}

const (
	// punchRetry is how long after a fruitless wait calls to that peer go
	// through the relay without waiting for a direct connection again.
	punchRetry = 5 * time.Minute
	// maxNoDirect bounds Client.noDirect; past it the map starts over.
	maxNoDirect = 1024
)

// ClientConfig configures a Client; zero fields take the stated defaults.
type ClientConfig struct {
	// Secret, when set, mints a mesh session for every call (SPEC §6).
	Secret []byte
	// MaxMessage caps a response frame (default 8 MiB).
	MaxMessage int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// WaitDirect, when positive, is how long Connect waits for a direct
	// connection to a peer that it reached only through a relay, before the
	// call's first byte: the peer starts hole punching (DCUtR) when the
	// relayed connection arrives, and an upgrade takes well under a second
	// where it works. It waits once per relayed connection, and not at all
	// when the peer is already reached directly. Zero or negative: never.
	WaitDirect time.Duration
}

// NewClient returns a client that calls peers from h. Closing the client
// closes its idle streams, not h.
func NewClient(h host.Host, cfg ClientConfig) *Client {
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = protocol.DefaultMaxMessage
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{host: h, pool: newStreamPool(h), secret: cfg.Secret, now: cfg.Now, maxMsg: cfg.MaxMessage, waitDirect: cfg.WaitDirect}
}

// Mesh sessions a Client mints for its calls (SPEC §6).
const (
	// sessionTTL is the lifetime of a minted session.
	sessionTTL = 5 * time.Minute
	// sessionReuse is how long one minted session serves new calls; the
	// rest of its lifetime covers a call that runs long.
	sessionReuse = time.Minute
)

// mintedSession is a session token and the time it was minted at.
type mintedSession struct {
	token  string
	issued time.Time
}

// sessionKey names what a mesh session is for: its receiver and purpose.
type sessionKey struct {
	to      peer.ID
	purpose string
}

// maxSessions bounds Client.sessions; past it the map starts over.
const maxSessions = 1024

// meshSession returns the mesh session token a call to the peer to for
// purpose carries ("" without a secret): a version 2 token naming this
// node, to and purpose (so that to cannot replay it elsewhere), minted for
// sessionTTL and reused by the calls of its first sessionReuse, so a burst
// of calls mints (and the peer verifies the freshness of) one token rather
// than one each.
func (n *Client) meshSession(to peer.ID, purpose string) string {
	if len(n.secret) == 0 {
		return ""
	}
	now := n.now()
	k := sessionKey{to, purpose}
	n.sessMu.Lock()
	defer n.sessMu.Unlock()
	if m, ok := n.sessions[k]; ok && !now.Before(m.issued) && now.Sub(m.issued) < sessionReuse {
		return m.token
	}
	tok := protocol.MintMeshToken(n.secret, n.host.ID().String(), to.String(), purpose, now, sessionTTL)
	if n.sessions == nil || len(n.sessions) >= maxSessions {
		n.sessions = make(map[sessionKey]mintedSession)
	}
	n.sessions[k] = mintedSession{token: tok, issued: now}
	return tok
}

// Close closes the client's idle streams.
func (n *Client) Close() { n.pool.closeAll() }

// SetRouter installs the router used to reach peers named by PeerID alone.
func (n *Client) SetRouter(r PeerRouter) {
	n.mu.Lock()
	n.router = r
	n.mu.Unlock()
}

// Connect makes sure the node is connected to the mesh peer at addr and
// returns its PeerID. Reached through a relay only, it first waits up to
// ClientConfig.WaitDirect for a direct connection.
func (n *Client) Connect(ctx context.Context, addr protocol.Address) (peer.ID, error) {
	return n.connect(ctx, addr, n.waitDirect)
}

// decodePeer is peer.Decode with the last answer kept: calls in a row to
// one peer parse its PeerID (base58, multihash) once.
func (n *Client) decodePeer(s string) (peer.ID, error) {
	if last := n.lastPeer.Load(); last != nil && last.text == s {
		return last.id, nil
	}
	pid, err := peer.Decode(s)
	if err != nil {
		return "", err
	}
	n.lastPeer.Store(&decodedPeer{text: s, id: pid})
	return pid, nil
}

// decodedPeer is a PeerID in text and decoded.
type decodedPeer struct {
	text string
	id   peer.ID
}

// connect is Connect with wait in place of ClientConfig.WaitDirect.
func (n *Client) connect(ctx context.Context, addr protocol.Address, wait time.Duration) (peer.ID, error) {
	if addr.Kind != protocol.AddrMesh {
		return "", fmt.Errorf("node: %s is not a mesh address", addr)
	}
	pid, err := n.decodePeer(addr.PeerID)
	if err != nil {
		return "", fmt.Errorf("node: %w %q: %v", protocol.ErrBadAddress, addr.PeerID, err)
	}
	if pid == n.host.ID() {
		return "", errors.New("node: that address is this node itself")
	}
	switch n.host.Network().Connectedness(pid) {
	case network.Connected:
		return pid, nil // the hot path of repeated calls: nothing to learn
	case network.Limited:
		n.upgrade(ctx, pid, wait)
		return pid, nil
	}
	if addr.Multiaddr != "" {
		m, err := ma.NewMultiaddr(addr.Multiaddr)
		if err != nil {
			return "", fmt.Errorf("node: %w %q: %v", protocol.ErrBadAddress, addr.Multiaddr, err)
		}
		ai, err := peer.AddrInfoFromP2pAddr(m)
		if err != nil {
			return "", fmt.Errorf("node: %w %q: %v", protocol.ErrBadAddress, addr.Multiaddr, err)
		}
		n.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.TempAddrTTL)
	}
	if len(n.host.Peerstore().Addrs(pid)) == 0 {
		n.mu.Lock()
		r := n.router
		n.mu.Unlock()
		if r == nil {
			return "", fmt.Errorf("%w %s: no known addresses (give a multiaddr, or --bootstrap peers)", ErrNoRoute, pid)
		}
		ai, err := r.FindPeer(network.WithAllowLimitedConn(ctx, "mcpv2 peer routing"), pid)
		if err != nil {
			return "", fmt.Errorf("%w %s: %v", ErrNoRoute, pid, err)
		}
		n.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.TempAddrTTL)
	}
	ready := transport.HolePunchReady(n.host)
	if err := n.host.Connect(ctx, peer.AddrInfo{ID: pid}); err != nil {
		return "", fmt.Errorf("node: connect to %s: %w", pid, err)
	}
	if !ready && wait > 0 && n.host.Network().Connectedness(pid) == network.Limited {
		n.redialReady(ctx, pid, wait)
	}
	n.upgrade(ctx, pid, wait)
	return pid, nil
}

// punchAgain is how long upgrade waits for the peer's hole punch before it
// gives the peer a second chance. A punch that works takes well under a
// second; one that fails (its simultaneous dials mistimed on a busy
// machine) is not tried again by libp2p on that connection, but the peer
// punches again on a new relayed one (replaceRelayed).
const punchAgain = time.Second

// replaceRelayed closes this client's relayed connections to pid and dials
// pid again through the relay, so that the peer, seeing a new relayed
// connection, punches again. Unless force is set it does nothing while a
// connection to pid is direct or carries a stream (a punch of the peer's,
// or a call, under way). It reports whether it redialled.
func (n *Client) replaceRelayed(ctx context.Context, pid peer.ID, force bool) bool {
	conns := n.host.Network().ConnsToPeer(pid)
	if !force {
		for _, c := range conns {
			if !c.Stat().Limited || len(c.GetStreams()) > 0 {
				return false
			}
		}
	}
	for _, c := range conns {
		if c.Stat().Limited {
			_ = c.Close()
		}
	}
	// A failed redial is the call's to report: its stream dials again.
	_ = n.host.Connect(ctx, peer.AddrInfo{ID: pid})
	return true
}

// redialReady handles a relayed connection that this client opened before
// it served DCUtR (a node that just started, before identify told it its
// public address): the peer tried to punch a hole once, when the
// connection arrived, and failed. It waits up to wait for hole punching to
// be ready, then replaces that connection, which carries no call yet, with
// a new one, on whose arrival the peer punches again.
func (n *Client) redialReady(ctx context.Context, pid peer.ID, wait time.Duration) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if !transport.WaitHolePunchReady(wctx, n.host) {
		return
	}
	n.replaceRelayed(ctx, pid, true)
}

// WaitedInVain reports whether a wait for a direct connection to pid came
// to nothing within the last punchRetry: hole punching does not work
// towards that peer from here (symmetric NAT, a firewall).
func (n *Client) WaitedInVain(pid peer.ID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	last, ok := n.noDirect[pid]
	return ok && n.now().Sub(last) < punchRetry
}

// upgrade waits up to wait for a direct connection to pid when the host
// reaches it only through a relay: the peer starts hole punching when a
// relayed connection arrives. The call goes on either way, over the direct
// connection when one came, else through the relay; after a wait that came
// to nothing, calls to pid do not wait again for punchRetry.
func (n *Client) upgrade(ctx context.Context, pid peer.ID, wait time.Duration) {
	if wait <= 0 || n.host.Network().Connectedness(pid) != network.Limited {
		return
	}
	if n.WaitedInVain(pid) {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	first, cancelFirst := context.WithTimeout(wctx, min(punchAgain, wait))
	direct := transport.WaitDirect(first, n.host, pid) != nil
	cancelFirst()
	if !direct && wctx.Err() == nil && n.replaceRelayed(ctx, pid, false) {
		direct = transport.WaitDirect(wctx, n.host, pid) != nil
	}
	if !direct && ctx.Err() != nil {
		return // the call ended, not the wait: nothing learnt
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case direct:
		delete(n.noDirect, pid)
	case n.noDirect == nil || len(n.noDirect) >= maxNoDirect:
		n.noDirect = map[peer.ID]time.Time{pid: n.now()}
	default:
		n.noDirect[pid] = n.now()
	}
}

// ErrOutOfStep is wrapped when a peer's answer does not carry the ids of
// the request it answers. The stream is reset and only that call fails.
var ErrOutOfStep = errors.New("answer does not match the request's ids")

// Send sends one raw request message to the mesh peer pid and returns its
// raw response; wantReply false (a notification-only request) returns nil
// without waiting. The response must carry the ids of msg's slots that
// expect one, in order (ErrOutOfStep otherwise). A stream reused from the
// pool that turns out to be dead before anything was read is replaced once.
func (n *Client) Send(ctx context.Context, pid peer.ID, msg []byte, wantReply bool) ([]byte, error) {
	var want []json.RawMessage
	if wantReply {
		want = []json.RawMessage{nullID} // a message the peer cannot parse is refused whole
		if req, perr := protocol.ParseRequest(msg); perr == nil {
			want = expectedIDs(req.Slots)
		}
	}
	out, _, err := n.send(ctx, pid, msg, want)
	return out, err
}

// send writes msg on a pooled stream to pid and, when want is not empty,
// reads one answer and checks that it carries exactly the ids in want (a
// null id stands for a slot the peer could not read), or is one error
// refusing the whole message. It returns the answer raw and decoded. A
// stream goes back to the pool only after a matched answer; after a
// notification-only message it is closed, since a peer that refuses such a
// message as a whole still answers it.
func (n *Client) send(ctx context.Context, pid peer.ID, msg []byte, want []json.RawMessage) ([]byte, []protocol.Response, error) {
	for attempt := 0; ; attempt++ {
		ps, reused, err := n.pool.get(ctx, pid, n.maxMsg)
		if err != nil {
			return nil, nil, &openStreamError{pid: pid, err: err}
		}
		out, sent, reusable, err := exchange(ctx, ps, msg, len(want) > 0)
		if err == nil && len(want) == 0 {
			n.pool.discard(pid, ps, false)
			return nil, nil, nil
		}
		if err == nil {
			var resps []protocol.Response
			if resps, err = protocol.ParseResponses(out); err == nil {
				err = matchIDs(resps, want)
			}
			if err == nil {
				if reusable {
					n.pool.put(pid, ps)
				} else {
					n.pool.discard(pid, ps, true)
				}
				return out, resps, nil
			}
			n.pool.discard(pid, ps, true)
			return nil, nil, fmt.Errorf("node: call %s: %w", pid, err)
		}
		n.pool.discard(pid, ps, true)
		if reused && attempt == 0 && (!sent || errors.Is(err, io.EOF)) {
			continue
		}
		return nil, nil, fmt.Errorf("node: call %s: %w", pid, err)
	}
}

var nullID = json.RawMessage("null")

// expectedIDs returns the ids the answer to slots must carry, in order: one
// per slot that is not a notification (ParseRequest gives a slot it could
// not read a null id).
func expectedIDs(slots []protocol.Slot) []json.RawMessage {
	var ids []json.RawMessage
	for i := range slots {
		if !slots[i].IsNotification() {
			ids = append(ids, slots[i].ID)
		}
	}
	return ids
}

// matchIDs checks an answer against the ids of its request. One error
// response with a null id refuses the whole request and matches anything.
func matchIDs(resps []protocol.Response, want []json.RawMessage) error {
	if len(resps) == 1 && resps[0].Error != nil && isNull(resps[0].ID) {
		return nil
	}
	if len(resps) != len(want) {
		return fmt.Errorf("%w: %d answers to %d requests", ErrOutOfStep, len(resps), len(want))
	}
	for i := range resps {
		if !isNull(resps[i].ID) && !sameJSON(resps[i].ID, want[i]) {
			return fmt.Errorf("%w: answer %d has id %s, the request's is %s", ErrOutOfStep, i, clipID(resps[i].ID), clipID(want[i]))
		}
	}
	return nil
}

func isNull(id json.RawMessage) bool { return len(id) == 0 || string(id) == "null" }

// sameJSON compares two JSON values (ids) byte for byte after compacting.
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

func clipID(id json.RawMessage) string {
	if len(id) > 40 {
		return string(id[:40]) + "…"
	}
	return string(id)
}

// wireID returns an id no other call of this Client has put on the wire.
func (n *Client) wireID() json.RawMessage {
	return strconv.AppendUint(nil, n.ids.Add(1), 10)
}

// exchange writes msg and reads one reply frame on ps. sent reports whether
// msg was written fully. reusable is false when ctx ended during the
// exchange: its hook then sets (or is about to set) a past deadline on the
// stream, which must not reach the next call through the pool.
func exchange(ctx context.Context, ps *pooledStream, msg []byte, wantReply bool) (out []byte, sent, reusable bool, err error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = ps.s.SetDeadline(dl)
		ps.deadline = true
	}
	stop := context.AfterFunc(ctx, func() { _ = ps.s.SetDeadline(time.Unix(1, 0)) })
	if err := transport.WriteFrame(ps.s, msg); err != nil {
		stop()
		return nil, false, false, ctxErr(ctx, err)
	}
	if wantReply {
		out, err = ps.fr.ReadFrame()
	}
	reusable = stop() // false: the hook ran, or is running
	if err != nil {
		return nil, true, false, ctxErr(ctx, err)
	}
	return out, true, reusable, nil
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// CallOptions adjust one call.
type CallOptions struct {
	// Provider is the slot's context.provider.
	Provider string
	// Session is a mesh session token; empty means the node mints one when
	// it has a secret.
	Session string
}

// Call sends slots to the peer at addr as one request (a batch when batch is
// true) and returns the responses in order, with the ids the slots had.
// Slots without a JSON-RPC version get "2.0"; when the node has a secret
// each slot carries a mesh session. On the wire each slot with an id gets
// one unique to this call. Call does not keep slots.
func (n *Client) Call(ctx context.Context, addr protocol.Address, slots []protocol.Slot, batch bool, o CallOptions) ([]protocol.Response, error) {
	for i := range slots {
		if err := slots[i].Check(); err != nil {
			return nil, fmt.Errorf("node: call: %w", err)
		}
	}
	return n.call(ctx, addr, slots, batch, o)
}

// call is Call for slots whose ids and params are known to be valid JSON.
func (n *Client) call(ctx context.Context, addr protocol.Address, slots []protocol.Slot, batch bool, o CallOptions) ([]protocol.Response, error) {
	if len(slots) == 0 {
		return nil, errors.New("node: call: no slots")
	}
	if !batch && len(slots) != 1 {
		return nil, errors.New("node: call: a non-batch request has exactly one slot")
	}
	pid, err := n.Connect(ctx, addr)
	if err != nil {
		return nil, err
	}
	if o.Session == "" {
		o.Session = n.meshSession(pid, protocol.PurposeRPC)
	}
	slots = slices.Clone(slots)
	var orig, want []json.RawMessage // callers' ids, wire ids
	for i := range slots {
		if !slots[i].IsNotification() {
			orig = append(orig, slots[i].ID)
			slots[i].ID = n.wireID()
			want = append(want, slots[i].ID)
		}
		if slots[i].JSONRPC == "" {
			slots[i].JSONRPC = "2.0"
		}
		if o.Provider != "" || o.Session != "" {
			if slots[i].Context == nil {
				slots[i].Context = &protocol.SlotContext{}
			} else {
				c := *slots[i].Context
				slots[i].Context = &c
			}
			if slots[i].Context.Provider == "" {
				slots[i].Context.Provider = o.Provider
			}
			if slots[i].Context.Session == "" {
				slots[i].Context.Session = o.Session
			}
		}
	}
	size := 0
	for i := range slots {
		size += len(slots[i].Params) + len(slots[i].Method) + 128
	}
	msg := transport.GetBuffer(size)
	defer func() { transport.ReleaseFrame(msg) }()
	if batch {
		msg = append(msg, '[')
	}
	for i := range slots {
		if i > 0 {
			msg = append(msg, ',')
		}
		msg = protocol.AppendSlot(msg, &slots[i])
	}
	if batch {
		msg = append(msg, ']')
	}
	out, resps, err := n.send(ctx, pid, msg, want)
	transport.ReleaseFrame(out) // resps hold copies
	if err != nil || len(want) == 0 {
		return nil, err
	}
	for i := range resps {
		if !isNull(resps[i].ID) && i < len(orig) {
			resps[i].ID = orig[i]
		}
	}
	return resps, nil
}

// CallSkill runs one tools/call of skill with args on the peer at addr and
// returns the result; a refusal by the peer is returned as its *protocol.Error.
func (n *Client) CallSkill(ctx context.Context, addr protocol.Address, skill string, args json.RawMessage, o CallOptions) (json.RawMessage, error) {
	if len(args) > 0 && !protocol.ValidJSON(args) {
		return nil, fmt.Errorf("node: call %s: the arguments are not valid JSON", skill)
	}
	params := protocol.AppendCallParams(make([]byte, 0, len(args)+len(skill)+32), skill, args)
	return n.callOne(ctx, addr, protocol.MethodToolsCall, params, o)
}

// CallMethod runs one slot of method (tools/list, agent/card) on addr.
func (n *Client) CallMethod(ctx context.Context, addr protocol.Address, method string, o CallOptions) (json.RawMessage, error) {
	return n.callOne(ctx, addr, method, json.RawMessage("{}"), o)
}

func (n *Client) callOne(ctx context.Context, addr protocol.Address, method string, params json.RawMessage, o CallOptions) (json.RawMessage, error) {
	resps, err := n.call(ctx, addr, []protocol.Slot{{ID: json.RawMessage("1"), Method: method, Params: params}}, false, o)
	if err != nil {
		return nil, err
	}
	if len(resps) != 1 {
		return nil, fmt.Errorf("node: call: want 1 response, got %d", len(resps))
	}
	if resps[0].Error != nil {
		return nil, resps[0].Error
	}
	return resps[0].Result, nil
}
