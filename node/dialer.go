package node

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/mcpv2/mcpv2/discovery"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// Dialer errors; test for them with errors.Is.
var (
	// ErrNoEdge is wrapped when a Dialer built without WithEdge is asked to
	// call an HTTP edge address.
	ErrNoEdge = errors.New("node: no HTTP edge client: this dialer calls mesh addresses only")
	// ErrNoMesh is wrapped when a Dialer built WithoutMesh is asked to call
	// a mesh address.
	ErrNoMesh = errors.New("node: no libp2p host: this dialer calls HTTP edge addresses only")
)

// EdgeCaller is what a Dialer needs of an HTTP edge client to call an
// http(s):// or mcpv2://host:port address; *edge.Client satisfies it (node
// does not import edge: cmd passes one in with WithEdge). Its methods are
// called concurrently.
type EdgeCaller interface {
	// Call sends a raw request message to the edge at addr and returns the
	// raw answer (nil for notifications only).
	Call(ctx context.Context, addr protocol.Address, msg []byte) ([]byte, error)
	// CallSkill runs one tools/call of skill with args on the edge at addr.
	CallSkill(ctx context.Context, addr protocol.Address, skill string, args json.RawMessage, o protocol.CallOptions) (json.RawMessage, error)
	// CallMethod runs one slot of method with empty params on the edge.
	CallMethod(ctx context.Context, addr protocol.Address, method string, o protocol.CallOptions) (json.RawMessage, error)
}

// dialerConfig is what DialerOptions set; NewDialer fills in the defaults
// first.
type dialerConfig struct {
	identity    crypto.PrivKey
	listen      []ma.Multiaddr
	listenSet   bool
	boot        []peer.AddrInfo
	noNAT       bool
	noMesh      bool
	log         *slog.Logger
	edge        EdgeCaller
	clientOpts  []ClientOption
	joinTimeout time.Duration
}

// DialerOption configures a Dialer.
type DialerOption func(*dialerConfig) error

// WithIdentity sets the key of the dialer's libp2p host, which fixes its
// PeerID (transport.LoadOrCreateIdentity reads a data dir's). Default: a
// new key for this dialer alone. nil is an error.
func WithIdentity(key crypto.PrivKey) DialerOption {
	return func(c *dialerConfig) error {
		if key == nil {
			return errors.New("WithIdentity: nil key")
		}
		c.identity = key
		return nil
	}
}

// WithListenAddrs sets the addresses the dialer's host listens on while it
// runs. Default (or called with none): nowhere, or, with bootstrap peers,
// any port of every IPv4 interface over TCP and QUIC, so that hole
// punching can reach it.
func WithListenAddrs(addrs ...ma.Multiaddr) DialerOption {
	return func(c *dialerConfig) error {
		for i, a := range addrs {
			if len(a) == 0 {
				return fmt.Errorf("WithListenAddrs: address %d is empty", i)
			}
		}
		c.listen, c.listenSet = slices.Clone(addrs), len(addrs) > 0
		return nil
	}
}

// WithBootstrap makes the dialer join the mesh's DHT through peers (as a
// DHT client, without mDNS) before NewDialer returns: peers named by
// PeerID alone are then found through it, Discovery returns it, and hole
// punching is on (unless WithoutNAT). Default: none.
func WithBootstrap(peers ...peer.AddrInfo) DialerOption {
	return func(c *dialerConfig) error {
		c.boot = slices.Clone(peers)
		return nil
	}
}

// WithoutNAT turns hole punching off (the CLI's --no-nat). The wait for a
// direct connection is the client's (WithWaitDirect), set apart.
func WithoutNAT() DialerOption {
	return func(c *dialerConfig) error {
		c.noNAT = true
		return nil
	}
}

// WithoutMesh makes a dialer that builds no libp2p host: it calls HTTP
// edges only, and refuses a mesh address with ErrNoMesh. It excludes
// WithBootstrap.
func WithoutMesh() DialerOption {
	return func(c *dialerConfig) error {
		c.noMesh = true
		return nil
	}
}

// WithLogger sets the logger of the host, the DHT and the dialer (default:
// discard). nil is an error.
func WithLogger(l *slog.Logger) DialerOption {
	return func(c *dialerConfig) error {
		if l == nil {
			return errors.New("WithLogger: nil logger")
		}
		c.log = l
		return nil
	}
}

// WithEdge gives the dialer the client it calls HTTP edge addresses with
// (cmd passes an *edge.Client). The dialer does not own it: its owner
// closes it, after the dialer. Without one, an HTTP address is refused with
// ErrNoEdge. nil is an error.
func WithEdge(e EdgeCaller) DialerOption {
	return func(c *dialerConfig) error {
		if e == nil {
			return errors.New("WithEdge: nil edge client")
		}
		c.edge = e
		return nil
	}
}

// WithClientOptions adds options of the dialer's mesh client (WithSecret,
// WithMaxMessage, WithWaitDirect, WithClock). The dialer sets the client's
// router to its DHT itself.
func WithClientOptions(opts ...ClientOption) DialerOption {
	return func(c *dialerConfig) error {
		c.clientOpts = append(c.clientOpts, opts...)
		return nil
	}
}

// WithJoinTimeout bounds the join of the DHT through the bootstrap peers
// (default 30 s). Zero or negative is an error.
func WithJoinTimeout(d time.Duration) DialerOption {
	return func(c *dialerConfig) error {
		if d <= 0 {
			return fmt.Errorf("WithJoinTimeout: %v is not positive", d)
		}
		c.joinTimeout = d
		return nil
	}
}

// Dialer is "call this address" for a process that is not a node (the
// CLI's client commands and shell): it builds the libp2p host, the mesh
// Client and, with bootstrap peers, the DHT once, and routes each call by
// its address, a mesh address (multiaddr, PeerID, mcpv2://<PeerID>) to the
// Client and an HTTP edge address (http(s)://, mcpv2://host:port) to the
// EdgeCaller given with WithEdge. It is safe for concurrent use.
type Dialer struct {
	host   host.Host            // nil WithoutMesh
	client *Client              // nil WithoutMesh
	disc   *discovery.Discovery // nil without bootstrap peers
	edge   EdgeCaller           // nil without WithEdge
	log    *slog.Logger
	// clientOpts are WithClientOptions', which NewClient's clients start
	// from too.
	clientOpts []ClientOption
	// joined is when the dialer joined the mesh (zero without bootstrap
	// peers), before waiting for hole punching to be ready.
	joined time.Time

	mu     sync.Mutex // guards closed and extra
	closed bool
	extra  []*Client // made by NewClient, closed by Close
}

// NewDialer builds a dialer: defaults, then opts, then validation; then
// the host, its client and, with bootstrap peers, the DHT, which it joins
// under ctx (and WithJoinTimeout). With bootstrap peers reached across a
// NAT and a positive WithWaitDirect, it then waits as long for hole
// punching to be ready (this host's public address observed). A failed
// NewDialer leaves nothing running.
func NewDialer(ctx context.Context, opts ...DialerOption) (_ *Dialer, err error) {
	cfg := dialerConfig{log: slog.New(slog.DiscardHandler), joinTimeout: 30 * time.Second}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("node: new dialer: %w", err)
		}
	}
	if cfg.noMesh && len(cfg.boot) > 0 {
		return nil, errors.New("node: new dialer: WithoutMesh and WithBootstrap exclude each other")
	}
	// The client's options are checked before anything starts.
	ccfg := clientConfig{}
	for _, o := range cfg.clientOpts {
		if o == nil {
			continue
		}
		if err := o(&ccfg); err != nil {
			return nil, fmt.Errorf("node: new dialer: %w", err)
		}
	}
	d := &Dialer{edge: cfg.edge, log: cfg.log, clientOpts: cfg.clientOpts}
	if cfg.noMesh {
		return d, nil
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, d.close(false))
		}
	}()
	if cfg.identity == nil {
		if cfg.identity, _, err = crypto.GenerateEd25519Key(rand.Reader); err != nil {
			return nil, fmt.Errorf("node: new dialer: identity: %w", err)
		}
	}
	listen := cfg.listen
	if !cfg.listenSet && len(cfg.boot) > 0 {
		listen = []ma.Multiaddr{ma.StringCast("/ip4/0.0.0.0/tcp/0"), ma.StringCast("/ip4/0.0.0.0/udp/0/quic-v1")}
	}
	hopts := []transport.Option{transport.WithIdentity(cfg.identity), transport.WithListenAddrs(listen...), transport.WithLogger(cfg.log)}
	if len(cfg.boot) > 0 && !cfg.noNAT {
		hopts = append(hopts, transport.WithHolePunching(cfg.boot))
	}
	if d.host, err = transport.NewHost(hopts...); err != nil {
		return nil, err
	}
	if d.client, err = NewClient(d.host, cfg.clientOpts...); err != nil {
		return nil, err
	}
	if len(cfg.boot) == 0 {
		return d, nil
	}
	if d.disc, err = discovery.New(d.host, discovery.WithBootstrap(cfg.boot...), discovery.WithMode(discovery.ModeClient),
		discovery.WithMDNS(false), discovery.WithLogger(cfg.log)); err != nil {
		return nil, err
	}
	d.client.SetRouter(d.disc)
	// A peer behind NAT is often connected through a relay only, and
	// kad-dht opens its request streams with the caller's context: without
	// this, a request to such a peer waits for a direct connection until
	// the context ends.
	ctx = network.WithAllowLimitedConn(ctx, "mcpv2 client: DHT")
	jctx, cancel := context.WithTimeout(ctx, cfg.joinTimeout)
	err = d.disc.Bootstrap(jctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("join the mesh: %w", err)
	}
	d.joined = d.client.now()
	if wait := d.client.waitDirect; wait > 0 && acrossNAT(d.host, cfg.boot) {
		wctx, cancel := context.WithTimeout(ctx, wait)
		ready := transport.WaitHolePunchReady(wctx, d.host)
		cancel()
		if !ready {
			cfg.log.Info("hole punching is not ready: no public address of this client observed yet; a relayed connection may stay relayed", "waited", wait)
		}
	}
	return d, nil
}

// acrossNAT reports whether h reaches a bootstrap peer at a public address
// from a private one of its own: then a peer behind another NAT is reached
// through a relay first, and hole punching needs this host's public
// address, which identify with that bootstrap peer reports. Without such a
// peer (a LAN, loopback, a public host) there is nothing to wait for.
func acrossNAT(h host.Host, boot []peer.AddrInfo) bool {
	for _, ai := range boot {
		for _, conn := range h.Network().ConnsToPeer(ai.ID) {
			if manet.IsPublicAddr(conn.RemoteMultiaddr()) && !manet.IsPublicAddr(conn.LocalMultiaddr()) {
				return true
			}
		}
	}
	return false
}

// Host returns the dialer's libp2p host (nil WithoutMesh). The dialer owns
// it.
func (d *Dialer) Host() host.Host { return d.host }

// Client returns the dialer's mesh client (nil WithoutMesh). The dialer
// owns it.
func (d *Dialer) Client() *Client { return d.client }

// Discovery returns the dialer's DHT, or nil without bootstrap peers.
func (d *Dialer) Discovery() *discovery.Discovery { return d.disc }

// WaitDirect returns how long a call waits for a direct connection to a
// peer reached through a relay (the client's WithWaitDirect; 0 WithoutMesh).
func (d *Dialer) WaitDirect() time.Duration {
	if d.client == nil {
		return 0
	}
	return d.client.waitDirect
}

// NewClient returns another mesh client on the dialer's host (for calls
// with another secret): the options of the dialer's client, its router,
// then opts. Its caller may close it; Close closes it in any case.
func (d *Dialer) NewClient(opts ...ClientOption) (*Client, error) {
	if d.client == nil {
		return nil, fmt.Errorf("node: dialer: new client: %w", ErrNoMesh)
	}
	d.client.mu.Lock()
	r := d.client.router
	d.client.mu.Unlock()
	all := append(append(slices.Clone(d.clientOpts), WithRouter(r)), opts...)
	cl, err := NewClient(d.host, all...)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		_ = cl.Close()
		return nil, fmt.Errorf("node: dialer: new client: %w", net.ErrClosed)
	}
	d.extra = append(d.extra, cl)
	return cl, nil
}

// Route says how a Dialer reached a mesh peer.
type Route struct {
	// Peer is the peer reached.
	Peer peer.ID
	// Relayed reports that a connection to the peer went through a relay.
	Relayed bool
	// Direct is the remote address of a direct connection to the peer, or
	// nil when there is none (the calls go through the relay).
	Direct ma.Multiaddr
	// Took is how long reaching the peer took, counted from the join of
	// the mesh when the dialer joined one (so that it counts the wait for
	// hole punching to be ready), else from the start of Connect.
	Took time.Duration
}

// Connect connects to the peer at addr, waiting up to WaitDirect for a
// direct connection when the peer is reached through a relay, and says how
// it is reached. An HTTP edge address connects nothing (the edge client
// connects per call) and returns the zero Route.
func (d *Dialer) Connect(ctx context.Context, addr protocol.Address) (Route, error) {
	if err := d.route(addr); err != nil {
		return Route{}, err
	}
	if addr.Kind == protocol.AddrHTTP {
		return Route{}, nil
	}
	start := d.client.now()
	if !d.joined.IsZero() {
		start = d.joined
	}
	pid, err := d.client.Connect(ctx, addr)
	if err != nil {
		return Route{}, err
	}
	r := Route{Peer: pid}
	r.Relayed = slices.ContainsFunc(d.host.Network().ConnsToPeer(pid), func(c network.Conn) bool { return c.Stat().Limited })
	if conn := transport.DirectConn(d.host, pid); conn != nil {
		r.Direct = conn.RemoteMultiaddr()
	}
	r.Took = d.client.now().Sub(start)
	return r, nil
}

// route checks that the dialer is open and can call addr.
func (d *Dialer) route(addr protocol.Address) error {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("node: dialer: %w", net.ErrClosed)
	case addr.Kind == protocol.AddrHTTP && d.edge == nil:
		return fmt.Errorf("%w (%s)", ErrNoEdge, addr)
	case addr.Kind == protocol.AddrMesh && d.client == nil:
		return fmt.Errorf("%w (%s)", ErrNoMesh, addr)
	case addr.Kind != protocol.AddrHTTP && addr.Kind != protocol.AddrMesh:
		return fmt.Errorf("node: dialer: %w: no address given", protocol.ErrBadAddress)
	}
	return nil
}

// Call sends msg, a raw request (one slot or a batch), to addr and returns
// the raw answer: nil when msg holds notifications only. Over the mesh it
// is Client.Send after Connect; through an edge, the edge client's Call.
func (d *Dialer) Call(ctx context.Context, addr protocol.Address, msg []byte) ([]byte, error) {
	if err := d.route(addr); err != nil {
		return nil, err
	}
	if addr.Kind == protocol.AddrHTTP {
		return d.edge.Call(ctx, addr, msg)
	}
	pid, err := d.client.Connect(ctx, addr)
	if err != nil {
		return nil, err
	}
	return d.client.Send(ctx, pid, msg, true)
}

// CallSkill runs one tools/call of skill with args on addr, over the mesh
// or through the HTTP edge, and returns the result; a refusal by the peer
// is returned as its *protocol.Error.
func (d *Dialer) CallSkill(ctx context.Context, addr protocol.Address, skill string, args json.RawMessage, o protocol.CallOptions) (json.RawMessage, error) {
	if err := d.route(addr); err != nil {
		return nil, err
	}
	if addr.Kind == protocol.AddrHTTP {
		return d.edge.CallSkill(ctx, addr, skill, args, o)
	}
	return d.client.CallSkill(ctx, addr, skill, args, o)
}

// CallMethod runs one slot of method (tools/list, agent/card) with empty
// params on addr, over the mesh or through the HTTP edge.
func (d *Dialer) CallMethod(ctx context.Context, addr protocol.Address, method string, o protocol.CallOptions) (json.RawMessage, error) {
	if err := d.route(addr); err != nil {
		return nil, err
	}
	if addr.Kind == protocol.AddrHTTP {
		return d.edge.CallMethod(ctx, addr, method, o)
	}
	return d.client.CallMethod(ctx, addr, method, o)
}

// Close waits briefly for the hole punches of young relayed connections
// (settle), then closes the clients, the DHT and the host: what the dialer
// built, not the EdgeCaller. It is idempotent: a second call returns
// net.ErrClosed.
func (d *Dialer) Close() error { return d.close(true) }

func (d *Dialer) close(settle bool) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return net.ErrClosed
	}
	d.closed = true
	extra := d.extra
	d.extra = nil
	d.mu.Unlock()
	if d.host == nil {
		return nil
	}
	if settle && d.client != nil {
		d.settle()
	}
	for _, cl := range extra {
		_ = cl.Close() // nil, or net.ErrClosed when its user closed it
	}
	if d.client != nil {
		_ = d.client.Close()
	}
	var errs []error
	if d.disc != nil {
		errs = append(errs, d.disc.Close())
	}
	return errors.Join(append(errs, d.host.Close())...)
}

// Before a dialer closes (see settle).
const (
	// settleYoung is the age below which a relayed connection may still
	// have a hole punch under way.
	settleYoung = 3 * time.Second
	// settleWait bounds the wait for those punches to end: one that works
	// takes 0.2–0.5 s, more on a loaded machine (the NAT lab under -race
	// beside other tests missed 2 of 20 with 1 s). Behind symmetric NAT,
	// where no punch works, a find pays it whole.
	settleWait = 2 * time.Second
)

// settle waits, at most settleWait, for the hole punches that this
// dialer's recent relayed connections started, when it waits for direct
// connections at all. A peer behind NAT punches towards us when our
// relayed connection arrives (a find's reachability dial, say); a process
// that leaves in the middle leaves the peer's attempt pending until its
// dial times out (5 s), and until then the peer punches for no other
// connection of this identity ("another hole punching attempt to this peer
// is active"): the next process's call stays relayed.
func (d *Dialer) settle() {
	if d.client.waitDirect <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleWait)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range d.host.Network().Peers() {
		if d.host.Network().Connectedness(p) != network.Limited || d.client.WaitedInVain(p) {
			continue // direct, or a call already waited for the punch in vain
		}
		if !slices.ContainsFunc(d.host.Network().ConnsToPeer(p), func(c network.Conn) bool { return time.Since(c.Stat().Opened) < settleYoung }) { // Opened is on the real clock
			continue
		}
		wg.Go(func() { transport.WaitDirect(ctx, d.host, p) })
	}
	wg.Wait()
}
