package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

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
// connections. A Node has one (Node.Client); a Dialer builds one for the
// CLI's client commands. It is safe for concurrent use; mu guards router and
// noDirect.
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
	// waitDirect is WithWaitDirect's wait (0: never).
	waitDirect time.Duration
	// sessions are the mesh session tokens calls carry while fresh
	// (meshSession), one per receiver and purpose; sessMu guards it. No
	// other lock is taken while sessMu is held.
	sessMu   sync.Mutex
	sessions map[sessionKey]mintedSession
	// lastPeer is the PeerID decodePeer decoded last.
	lastPeer atomic.Pointer[decodedPeer]
	// closed is set by the first Close.
	closed atomic.Bool

	mu     sync.Mutex
	router PeerRouter
	// noDirect holds when a wait for a direct connection to a peer last
	// came to nothing (symmetric NAT, a firewall): calls to it do not wait
	// again for punchRetry, so a relayed peer costs the wait once, not on
	// every call or every relay circuit of a long transfer.
	noDirect map[peer.ID]time.Time
	// onDirectWait, when set (by the node, before its first call), is
	// told the result of each wait for a peer's hole punch (upgrade).
	onDirectWait func(direct bool)
	// transfers are SendFile's transfers in progress (Transfers).
	transfers *transfers
}

// clientConfig is what ClientOptions set; NewClient fills in the defaults
// first.
type clientConfig struct {
	secret     []byte
	maxMsg     int
	now        func() time.Time
	waitDirect time.Duration
	router     PeerRouter
}

// ClientOption configures a Client (NewClient, and a Dialer's client
// through WithClientOptions).
type ClientOption func(*clientConfig) error

// WithSecret makes the client a secret holder: it mints a mesh session for
// every call (SPEC §6). Empty: no secret, calls carry no session (the
// default). The slice is copied.
func WithSecret(secret []byte) ClientOption {
	return func(c *clientConfig) error {
		c.secret = nil
		if len(secret) > 0 {
			c.secret = append([]byte(nil), secret...)
		}
		return nil
	}
}

// WithMaxMessage caps a response frame, in bytes; zero or negative: the
// default, protocol.DefaultMaxMessage (8 MiB).
func WithMaxMessage(n int) ClientOption {
	return func(c *clientConfig) error {
		if n <= 0 {
			n = protocol.DefaultMaxMessage
		}
		c.maxMsg = n
		return nil
	}
}

// WithClock sets the clock that mints sessions, ages idle streams and
// dates the fruitless waits for a direct connection (default time.Now).
// nil is an error.
func WithClock(now func() time.Time) ClientOption {
	return func(c *clientConfig) error {
		if now == nil {
			return errors.New("WithClock: nil clock")
		}
		c.now = now
		return nil
	}
}

// WithWaitDirect sets how long Connect waits for a direct connection to a
// peer that it reached only through a relay, before the call's first byte:
// the peer starts hole punching (DCUtR) when the relayed connection
// arrives, and an upgrade takes well under a second where it works. It
// waits once per relayed connection, and not at all when the peer is
// already reached directly. Zero or negative: never (the default).
func WithWaitDirect(d time.Duration) ClientOption {
	return func(c *clientConfig) error {
		c.waitDirect = max(d, 0)
		return nil
	}
}

// WithRouter sets the router used to reach peers named by PeerID alone
// (the DHT satisfies it); SetRouter changes it later. nil: none (the
// default), such a peer needs a known address.
func WithRouter(r PeerRouter) ClientOption {
	return func(c *clientConfig) error {
		c.router = r
		return nil
	}
}

// NewClient returns a client that calls peers from h, which must not be
// nil: defaults, then opts in order, then validation; the first option
// error fails it. It starts nothing: closing the client closes its idle
// streams, not h.
func NewClient(h host.Host, opts ...ClientOption) (*Client, error) {
	cfg := clientConfig{maxMsg: protocol.DefaultMaxMessage, now: time.Now}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("node: new client: %w", err)
		}
	}
	if h == nil {
		return nil, errors.New("node: new client: nil host")
	}
	return &Client{host: h, pool: newStreamPool(h, cfg.now), secret: cfg.secret, now: cfg.now, maxMsg: cfg.maxMsg,
		waitDirect: cfg.waitDirect, router: cfg.router, transfers: newTransfers("out", cfg.now)}, nil
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

// Close closes the client's idle streams; a stream in use is closed when
// its call ends, and a call, Connect or file transfer begun after Close
// fails with net.ErrClosed. The client of a Node (Node.Client) is the
// node's to close.
// It does not close the host. It is idempotent: a second call returns
// net.ErrClosed.
func (n *Client) Close() error {
	if n.closed.Swap(true) {
		return net.ErrClosed
	}
	n.pool.closeAll()
	return nil
}

// SetRouter installs the router used to reach peers named by PeerID alone.
func (n *Client) SetRouter(r PeerRouter) {
	n.mu.Lock()
	n.router = r
	n.mu.Unlock()
}

// Connect makes sure the node is connected to the mesh peer at addr and
// returns its PeerID. Reached through a relay only, it first waits up to
// WithWaitDirect's wait for a direct connection.
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

// ErrSelfAddress is returned for a mesh address whose PeerID is the
// client's own: the client runs with the same identity (data dir) as the
// node it means to call.
var ErrSelfAddress = errors.New("that address is this node itself")

// connect is Connect with wait in place of WithWaitDirect's wait.
func (n *Client) connect(ctx context.Context, addr protocol.Address, wait time.Duration) (peer.ID, error) {
	if n.closed.Load() { // every call and transfer connects first
		return "", fmt.Errorf("node: connect: %w", net.ErrClosed)
	}
	if addr.Kind != protocol.AddrMesh {
		return "", fmt.Errorf("node: %s is not a mesh address", addr)
	}
	pid, err := n.decodePeer(addr.PeerID)
	if err != nil {
		return "", fmt.Errorf("node: %w %q: %v", protocol.ErrBadAddress, addr.PeerID, err)
	}
	if pid == n.host.ID() {
		return "", fmt.Errorf("node: %w", ErrSelfAddress)
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
			return "", fmt.Errorf("%w %s: %w", ErrNoRoute, pid, err)
		}
		n.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.TempAddrTTL)
	}
	ready := transport.HolePunchReady(n.host)
	err = n.host.Connect(ctx, peer.AddrInfo{ID: pid})
	if errors.Is(err, swarm.ErrDialBackoff) {
		// A dial that failed moments ago (a find's reachability probe
		// that timed out under load) left the peer's addresses in the
		// swarm's backoff; a call the user asks for dials them again,
		// once, rather than fail on what a probe saw.
		if b, ok := n.host.Network().(interface{ Backoff() *swarm.DialBackoff }); ok {
			b.Backoff().Clear(pid)
			err = n.host.Connect(ctx, peer.AddrInfo{ID: pid})
		}
	}
	if err != nil {
		return "", fmt.Errorf("node: connect to %s: %w", pid, err)
	}
	if !ready && wait > 0 && n.host.Network().Connectedness(pid) == network.Limited {
		n.redialReady(ctx, pid, wait)
	}
	n.upgrade(ctx, pid, wait)
	return pid, nil
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
	return n.sendTo(ctx, pid, msg, want, nil)
}

// sendTo is send appending the decoded answer to dst, so that a caller
// with room for it (callOne: one response, on its stack) allocates no
// slice for it.
func (n *Client) sendTo(ctx context.Context, pid peer.ID, msg []byte, want []json.RawMessage, dst []protocol.Response) ([]byte, []protocol.Response, error) {
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
			if resps, err = protocol.ParseResponsesTo(dst, out); err == nil {
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
		if reused && attempt == 0 && (!sent || errors.Is(err, io.EOF)) && ctx.Err() == nil {
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
// exchange: its hook then set a past deadline on the stream, which must
// not reach the next call through the pool.
//
// The stream keeps the deadline of the call that used it last, and the
// hook of its context (pooledStream.watch): a call under the same context
// as the one before (the calls of one caller, one after the other) sets
// neither again; each yamux deadline set is two timers.
func exchange(ctx context.Context, ps *pooledStream, msg []byte, wantReply bool) (out []byte, sent, reusable bool, err error) {
	if dl, _ := ctx.Deadline(); !dl.Equal(ps.deadline) {
		_ = ps.s.SetDeadline(dl)
		ps.deadline = dl
	}
	if !ps.watch(ctx) {
		return nil, false, ps.done(), ctx.Err()
	}
	if err := transport.WriteFrame(ps.s, msg); err != nil {
		ps.done()
		return nil, false, false, ctxErr(ctx, err)
	}
	if wantReply {
		out, err = ps.fr.ReadFrame()
	}
	reusable = ps.done()
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

// Call sends slots to the peer at addr as one request (a batch when batch is
// true) and returns the responses in order, with the ids the slots had.
// Slots without a JSON-RPC version get "2.0"; when the node has a secret
// each slot carries a mesh session; when ctx carries a span (the span of
// the call that makes this one) each slot carries its traceparent, in
// place of any the slot had (as Forward does: the sending node's span is
// the parent of what it sends). On the wire each slot with an id gets one unique to this
// call. Call does not keep slots.
func (n *Client) Call(ctx context.Context, addr protocol.Address, slots []protocol.Slot, batch bool, o protocol.CallOptions) ([]protocol.Response, error) {
	for i := range slots {
		if err := slots[i].Check(); err != nil {
			return nil, fmt.Errorf("node: call: %w", err)
		}
	}
	return n.call(ctx, addr, slots, batch, o)
}

// call is Call for slots whose ids and params are known to be valid JSON.
func (n *Client) call(ctx context.Context, addr protocol.Address, slots []protocol.Slot, batch bool, o protocol.CallOptions) ([]protocol.Response, error) {
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
	traceparent := Traceparent(ctx)  // the caller's span is the parent of the peer's
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
		if o.Provider != "" || o.Session != "" || traceparent != "" {
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
			if traceparent != "" { // ctx's span replaces the slot's own: it is the parent
				slots[i].Context.Traceparent = traceparent
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
func (n *Client) CallSkill(ctx context.Context, addr protocol.Address, skill string, args json.RawMessage, o protocol.CallOptions) (json.RawMessage, error) {
	if len(args) > 0 && !protocol.ValidJSON(args) {
		return nil, fmt.Errorf("node: call %s: the arguments are not valid JSON", skill)
	}
	return n.callSlot(ctx, addr, protocol.MethodToolsCall, skill, args, o)
}

// CallMethod runs one slot of method (tools/list, agent/card) on addr.
func (n *Client) CallMethod(ctx context.Context, addr protocol.Address, method string, o protocol.CallOptions) (json.RawMessage, error) {
	return n.callOne(ctx, addr, method, json.RawMessage("{}"), o)
}

// callOne runs one slot of method with params (valid JSON) on addr and
// returns its result, or the peer's refusal as its *protocol.Error.
func (n *Client) callOne(ctx context.Context, addr protocol.Address, method string, params json.RawMessage, o protocol.CallOptions) (json.RawMessage, error) {
	return n.callSlot(ctx, addr, method, "", params, o)
}

// callSlot is call for one slot of method, built on the stack: the slot,
// its wire id and the answer's place are not allocated, and the message is
// written straight into a pooled buffer. With skill (tools/call), the
// params are {"name":skill,"arguments":params}, written in place; else
// params are the slot's. params are valid JSON.
func (n *Client) callSlot(ctx context.Context, addr protocol.Address, method, skill string, params json.RawMessage, o protocol.CallOptions) (json.RawMessage, error) {
	pid, err := n.Connect(ctx, addr)
	if err != nil {
		return nil, err
	}
	if o.Session == "" {
		o.Session = n.meshSession(pid, protocol.PurposeRPC)
	}
	var idBuf [20]byte
	s := protocol.Slot{JSONRPC: "2.0", ID: strconv.AppendUint(idBuf[:0], n.ids.Add(1), 10), Method: method}
	var sc protocol.SlotContext
	if tp := Traceparent(ctx); o.Provider != "" || o.Session != "" || tp != "" {
		sc = protocol.SlotContext{Provider: o.Provider, Session: o.Session, Traceparent: tp}
		s.Context = &sc
	}
	msg := transport.GetBuffer(len(params) + len(method) + len(skill) + len(sc.Session) + len(sc.Traceparent) + len(sc.Provider) + 192)
	if skill != "" {
		msg = protocol.AppendCallSlot(msg, &s, skill, params)
	} else {
		s.Params = params
		msg = protocol.AppendSlot(msg, &s)
	}
	want := [1]json.RawMessage{s.ID}
	var answer [1]protocol.Response
	out, resps, err := n.sendTo(ctx, pid, msg, want[:], answer[:0])
	transport.ReleaseFrame(msg)
	transport.ReleaseFrame(out) // resps hold copies
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
