package node

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/mcpv2/mcpv2/discovery"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// MeshConfig turns on discovery and NAT traversal (issue: find agents by
// skill, reach them behind NAT). The zero value is a DHT client-or-server
// (auto) with mDNS and NAT traversal on and no bootstrap peers.
type MeshConfig struct {
	// Bootstrap are multiaddrs (with /p2p/) of peers to join the DHT
	// through; they also serve as static relays.
	Bootstrap []string
	// Mode is the DHT mode: "auto" (default), "server" or "client". Auto
	// serves the DHT once AutoNAT finds the node publicly reachable, and
	// from the start when it has no bootstrap peers: such a node is a root
	// that others join through, on a LAN or a private overlay too.
	Mode string
	// NoMDNS turns off peer discovery on the local network.
	NoMDNS bool
	// NoNAT turns off AutoNAT, port mapping, AutoRelay and hole punching.
	NoNAT bool
	// RelayService makes the node a public helper: circuit relay v2 within
	// RelayLimits, an AutoNAT server and a DHT server.
	RelayService bool
	// RelayLimits bound the relay service (transport defaults when zero).
	RelayLimits transport.RelayLimits
	// Reachability skips AutoNAT's detection: "private" or "public" ("" or
	// "auto": detect). See transport.WithReachability.
	Reachability string
	// Republish is how often the card is put again
	// (discovery.DefaultRepublish when zero).
	Republish time.Duration
	// RecordTTL is how long this node keeps others' card and provider
	// records after their last put (discovery.DefaultRecordTTL when zero);
	// at least three times every node's Republish.
	RecordTTL time.Duration
	// WaitDirect is how long a call waits for a direct connection to a peer
	// reached only through a relay (WithWaitDirect): default
	// DefaultWaitDirect with NAT traversal, negative never.
	WaitDirect time.Duration
}

// DefaultWaitDirect is how long a call waits for hole punching to turn a
// relayed connection into a direct one before its first byte, by default.
const DefaultWaitDirect = 2 * time.Second

// waitDirect is the client's WithWaitDirect of a node with mesh m.
func (m *MeshConfig) waitDirect() time.Duration {
	switch {
	case m == nil || m.NoNAT || m.WaitDirect < 0:
		return 0
	case m.WaitDirect == 0:
		return DefaultWaitDirect
	}
	return m.WaitDirect
}

// ParseBootstrap parses bootstrap multiaddrs into peer infos, merging
// addresses of the same peer. An address that is not a multiaddr with a
// /p2p/ PeerID (an HTTP edge address, a bare PeerID) is refused with an
// example of the right form.
func ParseBootstrap(addrs []string) ([]peer.AddrInfo, error) {
	const example = "bootstrap peers are libp2p multiaddrs that end in the peer's PeerID, e.g. /ip4/1.2.3.4/tcp/4001/p2p/12D3KooW… (the MCPV2_P2P_ADDRESS lines a node prints)"
	var mas []ma.Multiaddr
	for _, s := range addrs {
		if scheme, _, ok := strings.Cut(s, "://"); ok {
			return nil, fmt.Errorf("bootstrap address %q is a URL (%s://), not a multiaddr: %s; an HTTP edge cannot be a bootstrap peer", s, scheme, example)
		}
		m, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("bootstrap address %q is not a multiaddr (%v): %s", s, err, example)
		}
		if _, err := peer.AddrInfoFromP2pAddr(m); err != nil {
			return nil, fmt.Errorf("bootstrap address %q has no /p2p/<PeerID>: %s", s, example)
		}
		mas = append(mas, m)
	}
	infos, err := peer.AddrInfosFromP2pAddrs(mas...)
	if err != nil {
		return nil, fmt.Errorf("bootstrap addresses: %w: %s", err, example)
	}
	return infos, nil
}

// Check reports what New would refuse in m, starting nothing: the
// bootstrap addresses, the DHT mode and the reachability (refused even when
// NoNAT leaves it unused).
func (m *MeshConfig) Check() error {
	if _, err := ParseBootstrap(m.Bootstrap); err != nil {
		return err
	}
	if _, err := parseMode(m.Mode); err != nil {
		return err
	}
	republish, ttl := cmp.Or(m.Republish, discovery.DefaultRepublish), cmp.Or(m.RecordTTL, discovery.DefaultRecordTTL)
	if m.Republish < 0 || m.RecordTTL < 0 || ttl < 3*republish {
		return fmt.Errorf("record TTL %s and republish interval %s: want both positive and the TTL at least three intervals", ttl, republish)
	}
	return transport.CheckOptions(transport.WithReachability(m.Reachability))
}

// meshHostOptions are the transport options a MeshConfig adds.
func meshHostOptions(m *MeshConfig) ([]transport.Option, []peer.AddrInfo, error) {
	boot, err := ParseBootstrap(m.Bootstrap)
	if err != nil {
		return nil, nil, err
	}
	var opts []transport.Option
	if m.RelayService {
		opts = append(opts, transport.WithRelayService(m.RelayLimits))
	}
	if !m.NoNAT {
		opts = append(opts, transport.WithNATTraversal(boot), transport.WithReachability(m.Reachability))
	}
	return opts, boot, nil
}

func parseMode(s string) (discovery.Mode, error) {
	switch s {
	case "", "auto":
		return discovery.ModeAuto, nil
	case "server":
		return discovery.ModeServer, nil
	case "client":
		return discovery.ModeClient, nil
	}
	return 0, fmt.Errorf("DHT mode %q: want auto, server or client", s)
}

// startMesh starts discovery on the node's host, installs it as the peer
// router and starts the goroutine that bootstraps and (re)publishes the card
// whenever the node's addresses change.
func (n *Node) startMesh(m *MeshConfig, boot []peer.AddrInfo) error {
	mode, err := parseMode(m.Mode)
	if err != nil {
		return err
	}
	if m.RelayService || (mode == discovery.ModeAuto && len(boot) == 0) {
		mode = discovery.ModeServer
	}
	opts := []discovery.Option{
		discovery.WithBootstrap(boot...),
		discovery.WithMode(mode),
		discovery.WithPeerCache(filepath.Join(n.cfg.DataDir, "peers.json")),
		discovery.WithMDNS(!m.NoMDNS),
		discovery.WithLogger(n.log),
	}
	if m.Republish > 0 {
		opts = append(opts, discovery.WithRepublish(m.Republish))
	}
	if m.RecordTTL > 0 {
		opts = append(opts, discovery.WithRecordTTL(m.RecordTTL))
	}
	// Known before New returns, so a call right after start can reach a
	// bootstrap peer by PeerID while the DHT is still joining.
	for _, ai := range boot {
		n.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.PermanentAddrTTL)
	}
	if n.cfg.Metrics != nil {
		opts = append(opts, discovery.WithMetrics(n.cfg.Metrics))
	}
	d, err := discovery.New(n.host, opts...)
	if err != nil {
		return err
	}
	n.disc = d
	n.client.SetRouter(d)
	sub, err := n.host.EventBus().Subscribe(new(event.EvtLocalAddressesUpdated))
	if err != nil {
		return fmt.Errorf("node: subscribe to address changes: %w", err)
	}
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		defer sub.Close()
		if err := d.Bootstrap(n.ctx); err != nil && n.ctx.Err() == nil {
			n.log.Warn("mesh: bootstrap", "err", err)
		}
		n.publish()
		for {
			select {
			case <-n.ctx.Done():
				return
			case <-sub.Out():
				n.publish()
			case <-n.republish:
				n.publish()
			}
		}
	}()
	return nil
}

// publish puts the node's current card in the DHT (when it changed).
func (n *Node) publish() {
	ctx, cancel := context.WithTimeout(n.ctx, time.Minute)
	defer cancel()
	if err := n.disc.Publish(ctx, n.Card()); err != nil && n.ctx.Err() == nil {
		n.log.Debug("mesh: publish card", "err", err)
	}
}

// CardChanged tells the node that its card changed (skills added, an
// endpoint set), so that it is published again.
func (n *Node) CardChanged() {
	select {
	case n.republish <- struct{}{}:
	default:
	}
}

// Discovery returns the node's discovery, nil when the mesh is off.
func (n *Node) Discovery() *discovery.Discovery { return n.disc }

// Find returns agents that offer skillOrTag, ranked (SPEC §4). Without the
// DHT it fails with protocol.ErrNoDiscovery.
func (n *Node) Find(ctx context.Context, skillOrTag string, limit int) ([]protocol.FindResult, error) {
	if n.disc == nil {
		return nil, protocol.ErrNoDiscovery
	}
	return n.disc.Find(network.WithAllowLimitedConn(ctx, "mcpv2 find"), skillOrTag, limit)
}
