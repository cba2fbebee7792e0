package transport

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/libp2p/go-libp2p"
	coreconnmgr "github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/protocol"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	libp2pquic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
)

// Defaults of [NewHost].
const (
	// DefaultPort is the TCP and UDP port the host listens on by default.
	DefaultPort = 4001
	// DefaultConnLow is the connection manager's default low watermark.
	DefaultConnLow = 100
	// DefaultConnHigh is the connection manager's default high watermark.
	DefaultConnHigh = 400
	// DefaultConnGrace is the connection manager's default grace period, during
	// which a new connection is never trimmed.
	DefaultConnGrace = time.Minute
	// peerConns is the connections the resource manager admits per peer
	// (each way, and in all); see NewHost.
	peerConns = 32
)

// Option configures [NewHost]. Options are applied in order after the
// defaults; a later option overrides an earlier one of the same kind, except
// [WithProtocolLimit] and [WithLibp2pOptions], which accumulate.
type Option func(*hostConfig) error

// hostConfig is what the options build; NewHost validates it once all options
// have been applied.
type hostConfig struct {
	key         crypto.PrivKey
	listenAddrs []ma.Multiaddr
	protoLimits map[protocol.ID]rcmgr.BaseLimit
	// protoPeerLimits are the per-peer caps of WithProtocolPeerLimit.
	protoPeerLimits map[protocol.ID]rcmgr.BaseLimit
	// svcLimits and svcPeerLimits are the service caps.
	svcLimits, svcPeerLimits map[string]rcmgr.BaseLimit
	// streamMemory, when above the default, is every stream's memory limit.
	streamMemory int64
	connLow      int
	connHigh     int
	connGrace    time.Duration
	logger       *slog.Logger
	extra        []libp2p.Option
	natConfig    // what the NAT options (nat.go) add
	// publicScope is WithDialScope("public"): dial public addresses only.
	publicScope bool
	// metrics is WithMetrics's registerer (nil: go-libp2p's metrics off);
	// rcmgrMetrics is WithResourceManagerMetrics.
	metrics      prometheus.Registerer
	rcmgrMetrics bool
}

// DefaultListenAddrs returns the addresses a host listens on by default, for
// the given port: TCP and QUIC-v1 on every IPv4 and every IPv6 interface.
// Port 0 asks the system for a free port per address. A port outside
// 0–65535 is a programming error and panics; validate user input first.
func DefaultListenAddrs(port int) []ma.Multiaddr {
	return []ma.Multiaddr{
		ma.StringCast(fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", port)),
		ma.StringCast(fmt.Sprintf("/ip4/0.0.0.0/udp/%d/quic-v1", port)),
		ma.StringCast(fmt.Sprintf("/ip6/::/tcp/%d", port)),
		ma.StringCast(fmt.Sprintf("/ip6/::/udp/%d/quic-v1", port)),
	}
}

// WithIdentity sets the host's private key, which fixes its PeerID. It is
// required; see [LoadOrCreateIdentity].
func WithIdentity(key crypto.PrivKey) Option {
	return func(c *hostConfig) error {
		if key == nil {
			return errors.New("WithIdentity: nil key")
		}
		c.key = key
		return nil
	}
}

// WithListenAddrs sets the addresses the host listens on, replacing the
// default [DefaultListenAddrs]([DefaultPort]). Only TCP and QUIC-v1 addresses
// can be served unless transports are added with [WithLibp2pOptions]. Called
// with no address, the host listens nowhere and can only dial out.
func WithListenAddrs(addrs ...ma.Multiaddr) Option {
	return func(c *hostConfig) error {
		for i, a := range addrs {
			if len(a) == 0 {
				return fmt.Errorf("WithListenAddrs: address %d is empty", i)
			}
		}
		c.listenAddrs = append([]ma.Multiaddr{}, addrs...)
		return nil
	}
}

// WithProtocolLimit caps, in the resource manager, the streams of protocol id
// across all peers: at most streamsInbound inbound and streamsOutbound
// outbound streams open at once, and at most memory bytes reserved by them.
// Streams over the cap are reset when their protocol is negotiated (inbound)
// or refused by NewStream (outbound). The cap is fixed: it does not scale with
// the machine's memory as the library defaults do. A count of 0 blocks that
// direction entirely; memory must be positive. Without this option a protocol
// gets the resource manager's default protocol limits. Calling it again for
// the same id replaces the earlier cap.
func WithProtocolLimit(id protocol.ID, streamsInbound, streamsOutbound int, memory int64) Option {
	return func(c *hostConfig) error {
		l, err := protocolBaseLimit("WithProtocolLimit", id, streamsInbound, streamsOutbound, memory)
		if err != nil {
			return err
		}
		if c.protoLimits == nil {
			c.protoLimits = make(map[protocol.ID]rcmgr.BaseLimit)
		}
		c.protoLimits[id] = l
		return nil
	}
}

// WithProtocolPeerLimit caps the streams and memory of protocol id per peer,
// as WithProtocolLimit does across all peers (go-libp2p's default per-peer
// protocol memory is 16 MiB). Calling it again for the same id replaces the
// earlier cap.
func WithProtocolPeerLimit(id protocol.ID, streamsInbound, streamsOutbound int, memory int64) Option {
	return func(c *hostConfig) error {
		l, err := protocolBaseLimit("WithProtocolPeerLimit", id, streamsInbound, streamsOutbound, memory)
		if err != nil {
			return err
		}
		if c.protoPeerLimits == nil {
			c.protoPeerLimits = make(map[protocol.ID]rcmgr.BaseLimit)
		}
		c.protoPeerLimits[id] = l
		return nil
	}
}

// WithServiceLimit caps, in the resource manager, the streams and memory of
// the stream-handler service name across all peers; WithServicePeerLimit
// does it per peer (go-libp2p's default per-peer service memory is 16 MiB
// plus a little per GiB of RAM). A handler joins a service with
// Stream.Scope().SetService(name). Calling either again for the same name
// replaces the earlier cap.
func WithServiceLimit(name string, streamsInbound, streamsOutbound int, memory int64) Option {
	return func(c *hostConfig) error {
		l, err := protocolBaseLimit("WithServiceLimit", protocol.ID(name), streamsInbound, streamsOutbound, memory)
		if err != nil {
			return err
		}
		if c.svcLimits == nil {
			c.svcLimits = make(map[string]rcmgr.BaseLimit)
		}
		c.svcLimits[name] = l
		return nil
	}
}

// WithServicePeerLimit caps a service's streams and memory per peer; see
// WithServiceLimit.
func WithServicePeerLimit(name string, streamsInbound, streamsOutbound int, memory int64) Option {
	return func(c *hostConfig) error {
		l, err := protocolBaseLimit("WithServicePeerLimit", protocol.ID(name), streamsInbound, streamsOutbound, memory)
		if err != nil {
			return err
		}
		if c.svcPeerLimits == nil {
			c.svcPeerLimits = make(map[string]rcmgr.BaseLimit)
		}
		c.svcPeerLimits[name] = l
		return nil
	}
}

// protocolBaseLimit checks and builds the limit of a protocol option.
func protocolBaseLimit(opt string, id protocol.ID, streamsInbound, streamsOutbound int, memory int64) (rcmgr.BaseLimit, error) {
	switch {
	case id == "":
		return rcmgr.BaseLimit{}, fmt.Errorf("%s: empty protocol ID", opt)
	case streamsInbound < 0 || streamsOutbound < 0:
		return rcmgr.BaseLimit{}, fmt.Errorf("%s %s: negative stream count (%d inbound, %d outbound)", opt, id, streamsInbound, streamsOutbound)
	case memory <= 0:
		return rcmgr.BaseLimit{}, fmt.Errorf("%s %s: memory must be positive, got %d", opt, id, memory)
	}
	return rcmgr.BaseLimit{
		StreamsInbound:  streamsInbound,
		StreamsOutbound: streamsOutbound,
		Streams:         streamsInbound + streamsOutbound,
		Memory:          memory,
	}, nil
}

// WithStreamMemory raises the memory one stream may reserve in the resource
// manager to at least n bytes (go-libp2p's default is 16 MiB), for protocols
// whose messages may be larger. It never lowers the default; n must be
// positive.
func WithStreamMemory(n int64) Option {
	return func(c *hostConfig) error {
		if n <= 0 {
			return fmt.Errorf("WithStreamMemory: memory must be positive, got %d", n)
		}
		c.streamMemory = n
		return nil
	}
}

// WithConnManager sets the connection manager's watermarks and grace period:
// once more than high connections are open, the least useful are closed until
// low remain, sparing connections younger than grace. The defaults are
// [DefaultConnLow], [DefaultConnHigh] and [DefaultConnGrace] (100, 400, 1m).
// NewHost requires 0 <= low <= high, high > 0 and grace >= 0.
func WithConnManager(low, high int, grace time.Duration) Option {
	return func(c *hostConfig) error {
		c.connLow, c.connHigh, c.connGrace = low, high, grace
		return nil
	}
}

// WithLogger sets the logger for the package's own messages; libp2p logs
// through its own logging setup. The default, also chosen by a nil logger, is
// [slog.Default].
func WithLogger(l *slog.Logger) Option {
	return func(c *hostConfig) error {
		if l == nil {
			l = slog.Default()
		}
		c.logger = l
		return nil
	}
}

// WithLibp2pOptions appends raw libp2p options, applied after the ones
// NewHost builds: the escape hatch for NAT port mapping, relays, hole
// punching, extra transports and the like. An option that sets something
// NewHost already set and that libp2p refuses to set twice (the identity, the
// resource manager, the connection manager) makes NewHost fail; use this
// package's options for those.
func WithLibp2pOptions(opts ...libp2p.Option) Option {
	return func(c *hostConfig) error {
		c.extra = append(c.extra, opts...)
		return nil
	}
}

// WithMetrics registers go-libp2p's own metrics (swarm, identify, hole
// punching, the relay service and client, AutoNAT, the event bus) on reg;
// nil, the default, registers them on a fresh registry that nothing reads
// (go-libp2p's set-up is the same either way), never on the process-wide
// default registry. go-libp2p's collectors are package globals: every host
// of the process adds to the same series, whichever registry shows them,
// and nothing takes them off reg when the host closes (a registry that
// outlives a host keeps showing them). The resource manager's metrics stay off
// unless [WithResourceManagerMetrics] is given too: their stats reporter
// costs CPU on every reservation.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(c *hostConfig) error {
		c.metrics = reg
		return nil
	}
}

// WithResourceManagerMetrics adds the resource manager's metrics to those
// of [WithMetrics] (which it needs; without it, it does nothing).
func WithResourceManagerMetrics() Option {
	return func(c *hostConfig) error {
		c.rcmgrMetrics = true
		return nil
	}
}

// CheckOptions applies opts to a fresh configuration, as NewHost does
// first, and returns the error of the first option that refuses its
// arguments (a bad reachability, a negative limit); it starts nothing. A
// program checks its flags with it before it starts anything.
func CheckOptions(opts ...Option) error {
	c := &hostConfig{}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(c); err != nil {
			return err
		}
	}
	return nil
}

// validate checks the configuration once all options are applied.
func (c *hostConfig) validate() error {
	if c.key == nil {
		return errors.New("an identity is required (WithIdentity)")
	}
	if c.connLow < 0 || c.connHigh <= 0 || c.connLow > c.connHigh {
		return fmt.Errorf("connection manager watermarks need 0 <= low <= high and high > 0, got low %d, high %d", c.connLow, c.connHigh)
	}
	if c.connGrace < 0 {
		return fmt.Errorf("connection manager grace period is negative: %s", c.connGrace)
	}
	return nil
}

// NewHost builds and starts a libp2p host: TCP and QUIC-v1 transports, Noise
// and TLS security (Noise offered first on TCP: it is the one every libp2p
// implementation speaks; QUIC always uses TLS 1.3), the yamux muxer, the
// resource manager with go-libp2p's default limits and service limits
// auto-scaled to the machine plus the caps of [WithProtocolLimit], and the
// connection manager of [WithConnManager], and a connection gater that
// dials an address only within the host's scope (see [WithDialScope] and
// the dialling rule in scope.go). Everything else is libp2p's
// default (in-memory peerstore, identify, ping, the relay client transport,
// go-libp2p's metrics, on [WithMetrics]'s registerer or else on one of the
// host's own) except the resource manager's metrics, which are off unless
// [WithResourceManagerMetrics] is given.
// The default listen addresses
// are [DefaultListenAddrs]([DefaultPort]). NewHost may be called
// concurrently.
//
// [WithIdentity] is required. Options are applied after the defaults and the
// result is validated before anything starts. A failed NewHost leaves nothing
// running. The caller owns the returned host and must Close it, which also
// stops the resource and connection managers.
func NewHost(opts ...Option) (host.Host, error) {
	c := &hostConfig{
		listenAddrs: DefaultListenAddrs(DefaultPort),
		connLow:     DefaultConnLow,
		connHigh:    DefaultConnHigh,
		connGrace:   DefaultConnGrace,
		logger:      slog.Default(),
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(c); err != nil {
			return nil, fmt.Errorf("transport: new host: %w", err)
		}
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("transport: new host: %w", err)
	}
	// A port that another host holds with SO_REUSEPORT would be shared
	// silently by libp2p's TCP listener: probe it plainly first.
	if err := CheckListenAddrs(c.listenAddrs...); err != nil {
		return nil, fmt.Errorf("transport: new host: %w", err)
	}

	// rcmgr.DefaultLimits holds no maps, so this copy shares nothing with the
	// package variable that the Add* calls below could mutate.
	limits := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&limits)
	// The connection manager trims down to the low watermark once the
	// connections pass the high one; the resource manager must let them
	// get there. Auto-scaled from an eighth of the memory, its system
	// limit on inbound connections is 64 + 64/GiB (256 on a 24 GiB
	// machine): a 300-node mesh's bootstrap node refused the 257th peer
	// before the handshake, forever, and never reached the trimming.
	limits.SystemBaseLimit.ConnsInbound = max(limits.SystemBaseLimit.ConnsInbound, c.connHigh)
	limits.SystemBaseLimit.Conns = max(limits.SystemBaseLimit.Conns, 2*c.connHigh)
	// A peer that restarts without closing its connections (a process
	// killed by the MCP host that started it) leaves QUIC connections
	// here until they time out (30 s idle); eight per peer, libp2p's
	// default, locked such a peer out after its third quick restart.
	limits.PeerBaseLimit.ConnsInbound = max(limits.PeerBaseLimit.ConnsInbound, peerConns)
	limits.PeerBaseLimit.ConnsOutbound = max(limits.PeerBaseLimit.ConnsOutbound, peerConns)
	limits.PeerBaseLimit.Conns = max(limits.PeerBaseLimit.Conns, peerConns)
	if c.streamMemory > limits.StreamBaseLimit.Memory {
		limits.StreamBaseLimit.Memory = c.streamMemory
	}
	for id, l := range c.protoLimits {
		limits.AddProtocolLimit(id, l, rcmgr.BaseLimitIncrease{})
	}
	for id, l := range c.protoPeerLimits {
		limits.AddProtocolPeerLimit(id, l, rcmgr.BaseLimitIncrease{})
	}
	for name, l := range c.svcLimits {
		limits.AddServiceLimit(name, l, rcmgr.BaseLimitIncrease{})
	}
	for name, l := range c.svcPeerLimits {
		limits.AddServicePeerLimit(name, l, rcmgr.BaseLimitIncrease{})
	}
	// The resource manager's metrics are off: nothing serves them, and its
	// stats reporter turned every memory reservation into a formatted
	// event, a fifth of a mesh call's CPU (docs/benchmarks.md).
	// WithResourceManagerMetrics turns them on (measured in the bench's
	// metrics row).
	ropts := c.rcmgrOptions()
	if c.metrics == nil || !c.rcmgrMetrics {
		ropts = append(ropts, rcmgr.WithMetricsDisabled())
	}
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(limits.AutoScale()), ropts...)
	if err != nil {
		return nil, fmt.Errorf("transport: new host: resource manager: %w", err)
	}
	cm, err := connmgr.NewConnManager(c.connLow, c.connHigh, connmgr.WithGracePeriod(c.connGrace))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("transport: new host: connection manager: %w", err), rm.Close())
	}

	// On a small machine the auto-scaled system connection limit can be below
	// the high watermark; the resource manager then refuses connections before
	// the connection manager trims. libp2p warns through its own logger; say it
	// through ours too, where the operator looks.
	if l, ok := rm.(coreconnmgr.GetConnLimiter); ok {
		if err := cm.CheckLimit(l); err != nil {
			c.logger.Warn("transport: connection manager limit above the resource manager's", "err", err)
		}
	}

	listen := libp2p.ListenAddrs(c.listenAddrs...)
	if len(c.listenAddrs) == 0 {
		listen = libp2p.NoListenAddrs
	}
	// libp2p.New does not close the swarm or the peerstore when the host fails
	// to start (for instance when no listen address can be bound), which would
	// leave their goroutines running; capture the swarm to close them then.
	var sw *swarm.Swarm
	reg := c.registerer()
	gater := newScopeGater(c.listenAddrs, c.publicScope, c.logger)
	c.warnOutOfScope(gater)
	lopts := append([]libp2p.Option{
		libp2p.Identity(c.key),
		listen,
		// NoListenAddrs turns the relay transport off; a dial-only client
		// must still reach peers by their /p2p-circuit addresses.
		libp2p.EnableRelay(),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Security(libp2ptls.ID, libp2ptls.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(libp2pquic.NewTransport),
		libp2p.ResourceManager(rm),
		libp2p.ConnectionManager(cm),
		libp2p.ConnectionGater(gater),
		libp2p.WithFxOption(fx.Invoke(func(s *swarm.Swarm) { sw = s })),
		libp2p.PrometheusRegisterer(reg),
	}, c.holePunchOptions(reg)...)
	lopts = append(lopts, c.extra...)

	h, err := libp2p.New(lopts...)
	if err != nil {
		// libp2p closes these on some failure paths but not all; every Close
		// here tolerates a second call.
		errs := []error{fmt.Errorf("transport: new host: %w", err)}
		if sw != nil {
			errs = append(errs, sw.Close(), sw.Peerstore().Close())
		}
		errs = append(errs, rm.Close(), cm.Close())
		return nil, errors.Join(errs...)
	}
	// libp2p fails only when no listen address at all can be bound; a host
	// that lost one (its QUIC port taken, say) would run on, half deaf.
	if err := c.checkBound(sw); err != nil {
		return nil, errors.Join(fmt.Errorf("transport: new host: %w", err), h.Close())
	}
	relay, err := c.presumePrivate(h)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("transport: new host: %w", err), h.Close())
	}
	if relay != nil {
		c.logger.Debug("transport: every address of ours is private and a relay is public: behind NAT, reserving a relay slot now (AutoNAT may correct it)", "relay", relay)
	}
	c.logger.Debug("transport: host started", "peer", h.ID(), "addrs", h.Addrs())
	return h, nil
}

// registerer is where go-libp2p's metrics go: WithMetrics's registerer,
// or, without it, a fresh registry that nothing reads (the collectors
// themselves are go-libp2p's package globals, shared by every host of the
// process): they are
// not turned off (libp2p.DisableMetrics), which also changes how the QUIC
// transport and hole punching are set up (docs/benchmarks.md: the NAT
// lab's QUIC calls went direct less often under load), and nothing lands
// on the process-wide default registry, where go-libp2p puts them unless
// told another. With the resource manager's metrics off, its collectors
// (which go-libp2p registers whenever metrics are on) are kept off the
// registry too: they would only show zeros.
func (c *hostConfig) registerer() prometheus.Registerer {
	switch {
	case c.metrics == nil:
		return withoutRcmgr{prometheus.NewRegistry()}
	case c.rcmgrMetrics:
		return c.metrics
	}
	return withoutRcmgr{c.metrics}
}

// withoutRcmgr is a Registerer that drops the resource manager's
// collectors (libp2p_rcmgr_*) and passes on the rest.
type withoutRcmgr struct{ prometheus.Registerer }

// Register registers c unless it describes a libp2p_rcmgr_ metric.
func (w withoutRcmgr) Register(c prometheus.Collector) error {
	if isRcmgr(c) {
		return nil
	}
	return w.Registerer.Register(c)
}

// MustRegister registers cs but the resource manager's.
func (w withoutRcmgr) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := w.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister unregisters c.
func (w withoutRcmgr) Unregister(c prometheus.Collector) bool {
	if isRcmgr(c) {
		return false
	}
	return w.Registerer.Unregister(c)
}

func isRcmgr(c prometheus.Collector) bool {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	rc := false
	for d := range ch {
		rc = rc || strings.Contains(d.String(), `fqName: "libp2p_rcmgr_`)
	}
	return rc
}

// ErrPortInUse is matched (errors.Is) by the error of [NewHost] and
// [CheckListenAddrs] when a listen address's port is held by another
// socket: another process, or another host of this one.
var ErrPortInUse = errors.New("port in use")

// listenError reports listen addresses that cannot be bound, in one
// sentence per port or address. It matches ErrPortInUse when a port is held.
type listenError struct {
	msg   string
	inUse bool
}

func (e *listenError) Error() string { return e.msg }

// Is reports whether target is ErrPortInUse and a port was held.
func (e *listenError) Is(target error) bool { return e.inUse && target == ErrPortInUse }

// sockAddr is the socket of a TCP or UDP listen multiaddr.
type sockAddr struct {
	tcp  bool
	ip   netip.Addr
	port int
}

// network is the Go network name of s ("tcp4", "udp6", …): with IPv6 the
// socket is IPv6-only, as libp2p's are, so that a probe of [::] does not
// collide with 0.0.0.0.
func (s sockAddr) network() string {
	n := "udp"
	if s.tcp {
		n = "tcp"
	}
	if s.ip.Is4() {
		return n + "4"
	}
	return n + "6"
}

// sockOf returns the socket of an /ip4 or /ip6 address followed by /tcp or
// /udp; ok is false for any other address (DNS, circuit, memory …).
func sockOf(a ma.Multiaddr) (s sockAddr, ok bool) {
	if len(a) < 2 {
		return s, false
	}
	switch a[0].Code() {
	case ma.P_IP4, ma.P_IP6:
	default:
		return s, false
	}
	ip, err := netip.ParseAddr(a[0].Value())
	if err != nil {
		return s, false
	}
	switch a[1].Code() {
	case ma.P_TCP:
		s.tcp = true
	case ma.P_UDP:
	default:
		return s, false
	}
	port, err := strconv.Atoi(a[1].Value())
	if err != nil {
		return s, false
	}
	return sockAddr{tcp: s.tcp, ip: ip.Unmap(), port: port}, true
}

// CheckListenAddrs binds for a moment the socket of every TCP or UDP
// address in addrs that names a port (not 0), and reports the ones that
// cannot be bound: a port held by another process (wrapping [ErrPortInUse]),
// an IP that is not this machine's, a privileged port. The probe binds
// without SO_REUSEPORT, so it fails where another libp2p host listens with
// it, whereas libp2p's own TCP listener would share the port in silence and
// split the incoming connections between the two hosts. A wildcard address
// of a family this machine lacks (no IPv6) is not an error: libp2p skips it
// too. Other addresses (port 0, DNS, circuit) are not probed. Safe for
// concurrent use; nothing stays bound.
func CheckListenAddrs(addrs ...ma.Multiaddr) error {
	var fails []listenFailure
	for _, a := range addrs {
		s, ok := sockOf(a)
		if !ok || s.port == 0 {
			continue
		}
		if err := probe(s); err != nil {
			if f, skip := classifyListen(a, s, true, err); !skip {
				fails = append(fails, f)
			}
		}
	}
	return joinListenFailures(fails)
}

// probe binds s plainly (Go sets SO_REUSEADDR on TCP listeners, which
// tolerates TIME_WAIT but never a listening socket) and closes it at once.
func probe(s sockAddr) error {
	addr := netip.AddrPortFrom(s.ip, uint16(s.port)).String()
	if s.tcp {
		ln, err := net.Listen(s.network(), addr)
		if err != nil {
			return err
		}
		return ln.Close()
	}
	pc, err := net.ListenPacket(s.network(), addr)
	if err != nil {
		return err
	}
	return pc.Close()
}

// listenFailure is one address that could not be bound, and why.
type listenFailure struct {
	addr  ma.Multiaddr
	sock  sockAddr // valid when hasSock
	has   bool
	inUse bool
	err   error
}

// classifyListen says why a could not be bound; skip reports a wildcard
// address of a family this machine does not have, which is no error.
func classifyListen(a ma.Multiaddr, s sockAddr, hasSock bool, err error) (f listenFailure, skip bool) {
	f = listenFailure{addr: a, sock: s, has: hasSock, err: err}
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		f.inUse = true
	case hasSock && s.ip.IsUnspecified() && (errors.Is(err, syscall.EAFNOSUPPORT) || errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.EPROTONOSUPPORT)):
		return f, true
	}
	return f, false
}

// joinListenFailures makes one error of fails: "port 4001 is in use (TCP,
// UDP) by another process" once per held port (naming the IP when it is
// not a wildcard), then one clause per other failure; nil for none.
func joinListenFailures(fails []listenFailure) error {
	if len(fails) == 0 {
		return nil
	}
	type portKey struct {
		ip   string // "" for a wildcard
		port int
	}
	var (
		order  []portKey
		protos = map[portKey][]string{}
		others []string
		inUse  bool
	)
	for _, f := range fails {
		if !f.inUse || !f.has {
			switch {
			case f.inUse:
				others = append(others, fmt.Sprintf("cannot listen on %s: its port is in use by another process", f.addr))
			case errors.Is(f.err, syscall.EADDRNOTAVAIL):
				others = append(others, fmt.Sprintf("cannot listen on %s: %s is not an address of this machine", f.addr, f.sock.ip))
			case errors.Is(f.err, syscall.EACCES):
				others = append(others, fmt.Sprintf("cannot listen on %s: permission denied (ports below 1024 need privileges)", f.addr))
			default:
				others = append(others, fmt.Sprintf("cannot listen on %s: %v", f.addr, f.err))
			}
			inUse = inUse || f.inUse
			continue
		}
		inUse = true
		k := portKey{port: f.sock.port}
		if !f.sock.ip.IsUnspecified() {
			k.ip = f.sock.ip.String()
		}
		p := "UDP"
		if f.sock.tcp {
			p = "TCP"
		}
		if _, ok := protos[k]; !ok {
			order = append(order, k)
		}
		if !slices.Contains(protos[k], p) {
			protos[k] = append(protos[k], p)
		}
	}
	var parts []string
	for _, k := range order {
		on := ""
		if k.ip != "" {
			on = " on " + k.ip
		}
		ps := protos[k]
		slices.Sort(ps) // TCP before UDP
		parts = append(parts, fmt.Sprintf("port %d%s is in use (%s) by another process", k.port, on, strings.Join(ps, ", ")))
	}
	return &listenError{msg: strings.Join(append(parts, others...), "; "), inUse: inUse}
}

// checkBound compares the listen addresses asked for with those the swarm
// bound, and fails naming each one that is missing: libp2p itself fails
// only when none could be bound. A missing address is tried once more
// alone, which both gives its error and closes the race with a port that
// was freed meanwhile.
func (c *hostConfig) checkBound(sw *swarm.Swarm) error {
	if sw == nil || len(c.listenAddrs) == 0 {
		return nil
	}
	var fails []listenFailure
	for _, a := range c.listenAddrs {
		if slices.ContainsFunc(sw.ListenAddresses(), func(b ma.Multiaddr) bool { return listenMatches(a, b) }) {
			continue
		}
		err := sw.AddListenAddr(a)
		if err == nil {
			continue
		}
		s, ok := sockOf(a)
		f, skip := classifyListen(a, s, ok, err)
		if skip {
			c.logger.Debug("transport: not listening on an address of a family this machine lacks", "addr", a, "err", err)
			continue
		}
		fails = append(fails, f)
	}
	return joinListenFailures(fails)
}

// listenMatches reports whether the bound listen address got serves the
// requested one want: the same components, except that port 0 in want
// matches any port.
func listenMatches(want, got ma.Multiaddr) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.Code() != g.Code() {
			return false
		}
		if w.Value() == g.Value() {
			continue
		}
		if (w.Code() != ma.P_TCP && w.Code() != ma.P_UDP) || w.Value() != "0" {
			return false
		}
	}
	return true
}
