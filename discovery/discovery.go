package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	ds "github.com/ipfs/go-datastore"
	dssync "github.com/ipfs/go-datastore/sync"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	kadpb "github.com/libp2p/go-libp2p-kad-dht/pb"
	"github.com/libp2p/go-libp2p-kad-dht/records"
	record "github.com/libp2p/go-libp2p-record"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	p2pprotocol "github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpv2/mcpv2/protocol"
)

// Defaults and protocol constants.
const (
	// ProtocolPrefix is the DHT protocol prefix: the DHT speaks
	// /mcpv2/kad/1.0.0 and never joins the public IPFS DHT.
	ProtocolPrefix p2pprotocol.ID = "/mcpv2"
	// BucketSize is the DHT's k: the size of a routing-table bucket and the
	// number of closest peers a record or provider record is stored on.
	BucketSize = 20
	// DefaultRepublish is how often the published card is put again and its
	// provider records announced again.
	DefaultRepublish = 10 * time.Minute
	// DefaultRecordTTL is how long a DHT server keeps a card record or a
	// provider record that was not put again: an agent that stopped drops
	// out of finds this long after its last republish at the latest. It
	// covers two missed republishes.
	DefaultRecordTTL = 30 * time.Minute
	// MDNSService is the DNS-SD service name under which mcpv2 nodes announce
	// themselves on the local network: "mcpv2" in DNS-SD form, as go-libp2p's
	// own is "_p2p._udp".
	MDNSService = "_mcpv2._udp"
	// DefaultFindLimit is the number of results Find returns when asked for
	// a limit of zero or less.
	DefaultFindLimit = 20
)

// Tuning that is not an option.
const (
	// bootstrapParallel is how many bootstrap peers are dialled at once.
	bootstrapParallel = 8
	// bootstrapEnough is how many connected peers end the dialling of cached
	// peers (configured bootstrap peers are all dialled).
	bootstrapEnough = 8
	// bootstrapDialTimeout bounds one bootstrap dial.
	bootstrapDialTimeout = 10 * time.Second
	// bootstrapRTWait bounds the wait for the first routing-table entry once
	// a bootstrap peer is connected (the DHT adds peers after identify).
	bootstrapRTWait = 5 * time.Second
	// announceParallel is how many provider announcements run at once.
	announceParallel = 4
	// announceTimeout bounds one republish round.
	announceTimeout = 2 * time.Minute
	// retryNoPeers is the longest wait before a publish that reached no DHT
	// peer is tried again.
	retryNoPeers = 30 * time.Second
	// defaultPeerCacheEvery is how often the peer cache is written.
	defaultPeerCacheEvery = 5 * time.Minute
	// mdnsParallel bounds the dials to peers found by mDNS.
	mdnsParallel = 4
	// mdnsDialTimeout bounds one dial to a peer found by mDNS.
	mdnsDialTimeout = 10 * time.Second
	// mdnsQueue is how many found peers may wait to be dialled; more are
	// dropped (mDNS announces again).
	mdnsQueue = 64
	// cardQuorum is how many peers' answers a card fetch waits for (beyond
	// the first) before it takes the highest seq seen.
	cardQuorum = 3
)

// Mode is the DHT mode of a node.
type Mode int

// DHT modes of [WithMode].
const (
	// ModeAuto serves the DHT unless the host knows that it cannot be
	// dialled: a client while its reachability is private (AutoNAT, or the
	// transport's presumption for a host behind NAT), a server while it is
	// public or unknown. On a private network (a VPC, a LAN) with no NAT
	// between the peers, every node serves. It is the default.
	ModeAuto Mode = iota
	// ModeServer always serves the DHT.
	ModeServer
	// ModeClient never serves the DHT; it only queries it.
	ModeClient
)

// String returns "auto", "server" or "client".
func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeServer:
		return "server"
	case ModeClient:
		return "client"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

func (m Mode) dhtMode() (dht.ModeOpt, error) {
	switch m {
	case ModeAuto:
		return dht.ModeAutoServer, nil
	case ModeServer:
		return dht.ModeServer, nil
	case ModeClient:
		return dht.ModeClient, nil
	}
	return 0, fmt.Errorf("unknown mode %d", int(m))
}

// config is what the options build.
type config struct {
	bootstrap []peer.AddrInfo
	mode      Mode
	peerCache string
	mdns      bool
	republish time.Duration
	ttl       time.Duration
	logger    *slog.Logger
	metrics   prometheus.Registerer // WithMetrics

	// Test knobs, set by unexported options.
	dhtOpts        []dht.Option
	peerCacheEvery time.Duration
	mdnsService    string
}

// Option configures [New].
type Option func(*config) error

// WithBootstrap adds peers to connect to on [Discovery.Bootstrap] and
// whenever the routing table runs empty. Each needs an ID and addresses.
func WithBootstrap(peers ...peer.AddrInfo) Option {
	return func(c *config) error {
		for i, p := range peers {
			if err := p.ID.Validate(); err != nil {
				return fmt.Errorf("WithBootstrap: peer %d: %w", i, err)
			}
			if len(p.Addrs) == 0 {
				return fmt.Errorf("WithBootstrap: peer %s has no address", p.ID)
			}
		}
		c.bootstrap = append(c.bootstrap, peers...)
		return nil
	}
}

// WithMode sets the DHT mode; the default is [ModeAuto].
func WithMode(m Mode) Option {
	return func(c *config) error {
		if _, err := m.dhtMode(); err != nil {
			return fmt.Errorf("WithMode: %w", err)
		}
		c.mode = m
		return nil
	}
}

// WithPeerCache keeps the routing table's peers and their addresses in the
// JSON file at path: written every few minutes and on Close, read by New and
// used as extra bootstrap peers, so that the routing table refills after a
// restart without any configured bootstrap peer. A missing or unreadable
// file is not an error (it is logged). The default is no cache.
func WithPeerCache(path string) Option {
	return func(c *config) error {
		if path == "" {
			return errors.New("WithPeerCache: empty path")
		}
		c.peerCache = path
		return nil
	}
}

// WithMDNS turns discovery of peers on the local network by mDNS on or off;
// it is on by default. Peers found are dialled, a few at a time. If mDNS
// cannot start (no multicast interface), New logs it and goes on without.
func WithMDNS(on bool) Option {
	return func(c *config) error {
		c.mdns = on
		return nil
	}
}

// WithRepublish sets how often the published card is put again and its
// provider records announced again; the default is [DefaultRepublish]. It
// must be positive.
func WithRepublish(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithRepublish: interval must be positive, got %s", d)
		}
		c.republish = d
		return nil
	}
}

// WithRecordTTL sets how long this node, as a DHT server, keeps the card
// records and provider records that others put, counted from their last
// put; the default is [DefaultRecordTTL]. Every node of a mesh should use
// the same TTL, and the republish interval (of every node) must be shorter
// than half of it, so that a record survives a missed republish. New
// refuses a TTL under three republish intervals.
func WithRecordTTL(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithRecordTTL: TTL must be positive, got %s", d)
		}
		c.ttl = d
		return nil
	}
}

// WithLogger sets the logger; nil, like the default, means [slog.Default].
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			l = slog.Default()
		}
		c.logger = l
		return nil
	}
}

// withDHTOptions appends raw DHT options after the package's own (tests).
func withDHTOptions(opts ...dht.Option) Option {
	return func(c *config) error {
		c.dhtOpts = append(c.dhtOpts, opts...)
		return nil
	}
}

// withPeerCacheEvery sets how often the peer cache is written (tests).
func withPeerCacheEvery(d time.Duration) Option {
	return func(c *config) error {
		c.peerCacheEvery = d
		return nil
	}
}

// withMDNSService sets the mDNS service name (tests).
func withMDNSService(name string) Option {
	return func(c *config) error {
		c.mdnsService = name
		return nil
	}
}

// Discovery is a node's view of the mcpv2 DHT: it owns the DHT, mDNS, the
// republish loop and the peer cache writer. Its methods may be called
// concurrently. Close stops everything it started, but not the host.
type Discovery struct {
	h       host.Host
	kad     *dht.IpfsDHT
	metrics *metrics // nil without WithMetrics
	// pm sends single DHT requests through the DHT's own message sender.
	pm     *kadpb.ProtocolMessenger
	dstore ds.Batching
	// values is the local store of the published card: kad-dht's value
	// store type over dstore, so that the DHT serves what Publish put.
	values *records.ValueStore
	// grew signals republishLoop that the routing table grew (growthLoop).
	grew chan struct{}
	// rt wakes growthLoop, waitRoutingTable and tests when the DHT adds a peer to
	// its routing table or removes one (rtHost).
	rt rtSignal
	// announced signals peerCacheLoop that an announcement completed: the
	// routing table is worth keeping from then on, not only 5 min later.
	announced chan struct{}
	log       *slog.Logger
	cfg       config
	// cached are the peers read from the peer cache at start; read only.
	cached []peer.AddrInfo

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mdns  mdns.Service // nil when off or not started
	found chan peer.AddrInfo

	closeMu sync.Mutex
	closed  bool

	// pubMu serialises Publish and the republish rounds, network work
	// included; mu is held only briefly.
	pubMu sync.Mutex
	// mu guards the fields below it.
	mu sync.Mutex
	// card is the card last published (with its seq and issued_at), nil
	// before the first Publish; env is its sealed envelope.
	card *protocol.AgentCard
	env  []byte
	// lastAnnounce is when card was last announced; pending means the last
	// announcement reached no DHT peer and is retried soon.
	lastAnnounce time.Time
	pending      bool
	// saidNoPeer: "no DHT peer yet" was logged at Info since the last
	// announcement that reached a peer; the retries log it at Debug.
	saidNoPeer bool
	// announcedRT is the routing table's size when the last complete
	// announcement ended; announcedOnce is set by the first that reached a
	// peer.
	announcedRT   int
	announcedOnce bool
}

// New builds the discovery of host h: a DHT speaking /mcpv2/kad/1.0.0 with
// the card validator, mDNS (unless turned off), the republish loop and the
// peer cache writer. The DHT dials the bootstrap peers (configured and
// cached) by itself whenever its routing table is empty, from the start and
// then every two minutes; Bootstrap does it at once and waits for the
// routing table. The caller keeps ownership of h and must Close the
// Discovery before closing h. A failed New leaves nothing running.
func New(h host.Host, opts ...Option) (_ *Discovery, err error) {
	if h == nil {
		return nil, errors.New("discovery: new: nil host")
	}
	cfg := config{
		mode:           ModeAuto,
		mdns:           true,
		republish:      DefaultRepublish,
		ttl:            DefaultRecordTTL,
		logger:         slog.Default(),
		peerCacheEvery: defaultPeerCacheEvery,
		mdnsService:    MDNSService,
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("discovery: new: %w", err)
		}
	}
	mode, err := cfg.mode.dhtMode()
	if err != nil {
		return nil, fmt.Errorf("discovery: new: %w", err)
	}
	if cfg.ttl < 3*cfg.republish {
		return nil, fmt.Errorf("discovery: new: the record TTL %s is under three republish intervals (%s): a record must outlive a missed republish and a slow announcement", cfg.ttl, cfg.republish)
	}
	if h.Peerstore().PrivKey(h.ID()) == nil {
		return nil, fmt.Errorf("discovery: new: the host's peerstore has no private key for %s", h.ID())
	}

	d := &Discovery{
		h:         h,
		dstore:    dssync.MutexWrap(ds.NewMapDatastore()),
		grew:      make(chan struct{}, 1),
		announced: make(chan struct{}, 1),
		log:       cfg.logger,
		cfg:       cfg,
	}
	if cfg.peerCache != "" {
		d.cached = loadPeerCache(cfg.peerCache, h.ID(), d.log)
	}

	dopts := append([]dht.Option{
		dht.ProtocolPrefix(ProtocolPrefix),
		dht.Mode(mode),
		dht.NamespacedValidator(CardNamespace, CardValidator{}),
		dht.Datastore(d.dstore),
		dht.BucketSize(BucketSize),
		dht.BootstrapPeersFunc(d.bootstrapPeers),
		dht.MaxRecordAge(cfg.ttl),
		dht.ProviderManagerOpts(records.ProvideValidity(cfg.ttl), records.ProviderAddrTTL(cfg.ttl)),
	}, cfg.dhtOpts...)
	d.kad, err = dht.New(rtHost{Host: h, rt: &d.rt}, dopts...)
	if err != nil {
		return nil, fmt.Errorf("discovery: new: dht: %w", err)
	}
	d.pm, err = kadpb.NewProtocolMessenger(d.kad.MessageSender())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("discovery: new: %w", err), d.kad.Close())
	}
	d.values = records.NewValueStore(d.dstore, record.NamespacedValidator{CardNamespace: CardValidator{}}, cfg.ttl)
	if cfg.metrics != nil {
		if d.metrics, err = newMetrics(cfg.metrics, d); err != nil {
			return nil, errors.Join(fmt.Errorf("discovery: new: metrics: %w", err), d.kad.Close())
		}
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())

	d.wg.Add(2)
	go d.republishLoop()
	go d.growthLoop()
	if cfg.peerCache != "" {
		d.wg.Add(1)
		go d.peerCacheLoop()
	}
	if cfg.mdns {
		d.startMDNS()
	}
	d.log.Debug("discovery: started", "peer", h.ID(), "mode", cfg.mode, "bootstrap", len(cfg.bootstrap), "cached_peers", len(d.cached), "mdns", d.mdns != nil)
	return d, nil
}

// DHT returns the underlying DHT, for inspection and for what this package
// does not wrap. It stays owned by the Discovery.
func (d *Discovery) DHT() *dht.IpfsDHT { return d.kad }

// Close stops mDNS, the republish loop and the peer cache writer and waits
// for them, writes the peer cache a last time, and closes the DHT. It does
// not close the host. A second call returns net.ErrClosed.
func (d *Discovery) Close() error {
	d.closeMu.Lock()
	if d.closed {
		d.closeMu.Unlock()
		return net.ErrClosed
	}
	d.closed = true
	d.closeMu.Unlock()
	d.metrics.unregister() // first: a scrape reads the DHT

	var errs []error
	if d.mdns != nil {
		if err := d.mdns.Close(); err != nil {
			errs = append(errs, fmt.Errorf("mdns: %w", err))
		}
	}
	d.cancel()
	d.wg.Wait()
	if d.cfg.peerCache != "" {
		if err := d.savePeerCache(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := d.kad.Close(); err != nil {
		errs = append(errs, fmt.Errorf("dht: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("discovery: close: %w", err)
	}
	return nil
}

// isClosed reports whether Close was called.
func (d *Discovery) isClosed() bool {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	return d.closed
}

// bootstrapPeers returns the configured bootstrap peers then the cached
// ones in random order, without duplicates and without the host itself.
func (d *Discovery) bootstrapPeers() []peer.AddrInfo {
	seen := map[peer.ID]bool{d.h.ID(): true}
	var out []peer.AddrInfo
	cached := slices.Clone(d.cached)
	rand.Shuffle(len(cached), func(i, j int) { cached[i], cached[j] = cached[j], cached[i] })
	for _, p := range slices.Concat(d.cfg.bootstrap, cached) {
		if seen[p.ID] {
			continue
		}
		seen[p.ID] = true
		out = append(out, p)
	}
	return out
}

// Bootstrap connects to the bootstrap peers (those of WithBootstrap, then
// those of the peer cache until enough are connected), a few at a time with
// a bounded time each, then refreshes the routing table and waits for the
// refresh or ctx; in ModeClient, with a peer in the routing table, it does
// not wait for the refresh. It fails only when
// there were peers to connect to and none could be reached. Without any
// bootstrap peer it only refreshes the routing table from the peers already
// connected (mDNS, or dialled by the caller).
func (d *Discovery) Bootstrap(ctx context.Context) error {
	if d.isClosed() {
		return fmt.Errorf("discovery: bootstrap: %w", net.ErrClosed)
	}
	start := time.Now()
	peers := d.bootstrapPeers()
	if len(peers) > 0 {
		var (
			mu   sync.Mutex
			ok   int
			errs []error
			wg   sync.WaitGroup
			sem  = make(chan struct{}, bootstrapParallel)
		)
		for i, p := range peers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return
				}
				defer func() { <-sem }()
				mu.Lock()
				enough := ok >= bootstrapEnough && i >= len(d.cfg.bootstrap)
				mu.Unlock()
				if enough {
					return
				}
				cctx, cancel := context.WithTimeout(ctx, bootstrapDialTimeout)
				defer cancel()
				err := d.h.Connect(cctx, p)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					d.log.Debug("discovery: bootstrap peer unreachable", "peer", p.ID, "err", err)
					errs = append(errs, fmt.Errorf("%s: %w", p.ID, err))
					return
				}
				ok++
			}()
		}
		wg.Wait()
		if ok == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("discovery: bootstrap: %w", err)
			}
			return fmt.Errorf("discovery: bootstrap: none of %d peers reachable: %w", len(peers), errors.Join(errs...))
		}
		d.log.Debug("discovery: bootstrap peers connected", "connected", ok, "tried", len(peers), "took", time.Since(start))
		d.waitRoutingTable(ctx, bootstrapRTWait)
		d.log.Debug("discovery: routing table seeded", "size", d.kad.RoutingTable().Size(), "took", time.Since(start))
	}
	if err := d.kad.Bootstrap(ctx); err != nil {
		return fmt.Errorf("discovery: bootstrap: %w", err)
	}
	if d.cfg.mode == ModeClient && d.kad.RoutingTable().Size() > 0 {
		// A client (a one-shot CLI command) does not wait for the refresh, a
		// lookup per routing-table bucket: its own lookups start from the
		// bootstrap peers and learn the peers they need on the way.
		d.log.Debug("discovery: joined as a client", "routing_table", d.kad.RoutingTable().Size(), "took", time.Since(start))
		return nil
	}
	select {
	case err := <-d.kad.RefreshRoutingTable():
		if err != nil {
			// A refresh fails when one of its lookups does, which is common in a
			// small or young network; the routing table still filled.
			d.log.Debug("discovery: routing table refresh", "err", err, "size", d.kad.RoutingTable().Size())
		}
	case <-ctx.Done():
		return fmt.Errorf("discovery: bootstrap: %w", ctx.Err())
	}
	d.log.Debug("discovery: bootstrapped", "routing_table", d.kad.RoutingTable().Size(), "took", time.Since(start))
	return nil
}

// joining waits, within bootstrapRTWait, for the first routing-table entry
// when the table is empty and bootstrap peers are configured: a node asked
// to find something in its first moments (a gateway call right after
// start) is still joining the mesh, and kad-dht fails a lookup on an empty
// table at once ("failed to find any peer in table").
func (d *Discovery) joining(ctx context.Context) {
	if len(d.cfg.bootstrap) > 0 && d.kad.RoutingTable().Size() == 0 {
		d.waitRoutingTable(ctx, bootstrapRTWait)
	}
}

// FindPeer finds the addresses of peer id through the DHT (peer routing).
// It answers at once for a connected peer.
func (d *Discovery) FindPeer(ctx context.Context, id peer.ID) (peer.AddrInfo, error) {
	if d.isClosed() {
		return peer.AddrInfo{}, fmt.Errorf("discovery: find peer: %w", net.ErrClosed)
	}
	d.joining(ctx)
	ai, err := d.kad.FindPeer(ctx, id)
	if err != nil {
		return peer.AddrInfo{}, fmt.Errorf("discovery: find peer %s: %w", id, err)
	}
	return ai, nil
}

// GetCard fetches the card of peer id from the DHT and verifies it fully
// (CardValidator). It takes the highest seq among the first four answers
// (a local record counts as one), or among all when fewer peers hold the
// card. A peer without a card is routing.ErrNotFound.
func (d *Discovery) GetCard(ctx context.Context, id peer.ID) (protocol.AgentCard, error) {
	if d.isClosed() {
		return protocol.AgentCard{}, fmt.Errorf("discovery: get card: %w", net.ErrClosed)
	}
	if err := id.Validate(); err != nil {
		return protocol.AgentCard{}, fmt.Errorf("discovery: get card: %w", err)
	}
	key := CardKey(id)
	// With a quorum, kad-dht's GetValue returns once enough answers came in
	// but leaves the rest of its lookup blocked until ctx ends: end it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v, err := d.kad.GetValue(ctx, key, dht.Quorum(cardQuorum))
	if err != nil {
		return protocol.AgentCard{}, fmt.Errorf("discovery: get card %s: %w", id, err)
	}
	return openCard(key, v)
}

// Publish signs card with the host's key and stores it in the DHT under
// CardKey(host), then announces the host as a provider of SkillCID for each
// skill name and TagCID for each tag, and remembers the card to republish it
// every republish interval.
//
// An empty peer_id is set to the host's (another peer's is an error). A zero
// seq is set to the larger of the last published seq plus one and the Unix
// time in milliseconds, so that it grows across restarts; a non-zero seq is
// used as given and must grow when the card changes. A zero issued_at is set
// to the current Unix time. Publishing a card equal to the last one except
// for seq and issued_at does nothing: the republish loop keeps it alive.
//
// Publish fails when the card cannot be signed or stored locally, or is over
// MaxCardSize. When the DHT has no peer yet the card is stored locally only,
// Publish returns nil, and the republish loop retries within half a minute.
// Network errors of the announcement are returned after it completes.
func (d *Discovery) Publish(ctx context.Context, card protocol.AgentCard) error {
	if d.isClosed() {
		return fmt.Errorf("discovery: publish: %w", net.ErrClosed)
	}
	self := d.h.ID()
	if card.PeerID == "" {
		card.PeerID = self.String()
	} else if id, err := peer.Decode(card.PeerID); err != nil || id != self {
		return fmt.Errorf("discovery: publish: the card's peer_id %q is not this host's %s", card.PeerID, self)
	}

	d.pubMu.Lock()
	defer d.pubMu.Unlock()
	prev, prevEnv := d.published()
	if prev != nil {
		same := sameCard(*prev, card)
		switch {
		case same && (card.Seq == 0 || card.Seq == prev.Seq):
			return nil
		case card.Seq != 0 && card.Seq <= prev.Seq:
			return fmt.Errorf("discovery: publish: seq %d does not grow past the published %d", card.Seq, prev.Seq)
		}
	}
	now := time.Now()
	if card.Seq == 0 {
		card.Seq = uint64(now.UnixMilli())
		if prev != nil && prev.Seq >= card.Seq {
			card.Seq = prev.Seq + 1
		}
	}
	if card.IssuedAt == 0 {
		card.IssuedAt = now.Unix()
	}
	key := d.h.Peerstore().PrivKey(self)
	if key == nil {
		return fmt.Errorf("discovery: publish: the host's peerstore has no private key for %s", self)
	}
	env, err := sealCard(card, key)
	if err != nil {
		return fmt.Errorf("discovery: publish: seal: %w", err)
	}
	if len(env) > MaxCardSize {
		return fmt.Errorf("discovery: publish: the signed card is %d bytes, over the %d-byte limit", len(env), MaxCardSize)
	}
	if err := (CardValidator{}).Validate(CardKey(self), env); err != nil {
		return fmt.Errorf("discovery: publish: %w", err)
	}
	d.setPublished(&card, env)
	d.mu.Lock()
	// The provider records name the host, not the card: when the card
	// changed but not its skills and tags (a new address), and the last
	// announcement was complete and recent, only the card is put again.
	full := prev == nil || d.pending || !slices.Equal(cardCIDs(*prev), cardCIDs(card)) || time.Since(d.lastAnnounce) >= d.cfg.republish
	d.mu.Unlock()
	err = d.announce(ctx, card, env, full)
	if errors.Is(err, errNotStored) {
		// The local store refused the card (it holds a higher seq): keep
		// republishing the previous one.
		d.setPublished(prev, prevEnv)
	}
	return err
}

// published returns the card last published and its envelope, nil before
// the first Publish.
func (d *Discovery) published() (*protocol.AgentCard, []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.card, d.env
}

// setPublished records card and env as the published card.
func (d *Discovery) setPublished(card *protocol.AgentCard, env []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.card, d.env = card, env
}

// errNotStored marks an announcement whose card the local store refused.
var errNotStored = errors.New("not stored locally")

// sameCard reports whether a and b are equal except for seq and issued_at.
func sameCard(a, b protocol.AgentCard) bool {
	a.Seq, a.IssuedAt, b.Seq, b.IssuedAt = 0, 0, 0, 0
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}
