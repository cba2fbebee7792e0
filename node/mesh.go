package node

import (
	"context"
	"fmt"
	"path/filepath"
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
	// Republish is how often the card is put again (default 30 min).
	Republish time.Duration
}

// ParseBootstrap parses bootstrap multiaddrs into peer infos, merging
// addresses of the same peer.
func ParseBootstrap(addrs []string) ([]peer.AddrInfo, error) {
	var mas []ma.Multiaddr
	for _, s := range addrs {
		m, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("bootstrap address %q: %w", s, err)
		}
		mas = append(mas, m)
	}
	infos, err := peer.AddrInfosFromP2pAddrs(mas...)
	if err != nil {
		return nil, fmt.Errorf("bootstrap addresses: %w (each needs /p2p/<PeerID>)", err)
	}
	return infos, nil
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
	// Known before New returns, so a call right after start can reach a
	// bootstrap peer by PeerID while the DHT is still joining.
	for _, ai := range boot {
		n.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.PermanentAddrTTL)
	}
	d, err := discovery.New(n.host, opts...)
	if err != nil {
		return err
	}
	n.disc = d
	n.SetRouter(d)
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
