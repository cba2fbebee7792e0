package discovery

import (
	"context"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
)

// mdnsNotifee receives the peers mDNS finds. The mdns package calls
// HandlePeerFound on goroutines of its own, so it only queues the peer,
// never blocking; the Discovery's own goroutine dials.
type mdnsNotifee struct{ d *Discovery }

// HandlePeerFound queues pi to be dialled, or drops it when the queue is
// full or the Discovery closing.
func (n mdnsNotifee) HandlePeerFound(pi peer.AddrInfo) {
	select {
	case n.d.found <- pi:
	case <-n.d.ctx.Done():
	default:
		n.d.log.Debug("discovery: mdns: queue full; peer dropped", "peer", pi.ID)
	}
}

// startMDNS starts the mDNS service and the goroutine that dials the peers
// it finds. A service that cannot start is logged and left off.
func (d *Discovery) startMDNS() {
	d.found = make(chan peer.AddrInfo, mdnsQueue)
	svc := mdns.NewMdnsService(d.h, d.cfg.mdnsService, mdnsNotifee{d})
	if err := svc.Start(); err != nil {
		_ = svc.Close()
		// No multicast interface (offline, a container): nothing to fix.
		d.log.Info("discovery: no peer search on the local network (mDNS): no interface for it", "err", err)
		return
	}
	d.mdns = svc
	d.wg.Add(1)
	go d.mdnsLoop()
}

// mdnsLoop dials the peers mDNS found, at most mdnsParallel at once, until
// Close.
func (d *Discovery) mdnsLoop() {
	defer d.wg.Done()
	sem := make(chan struct{}, mdnsParallel)
	for {
		var pi peer.AddrInfo
		select {
		case <-d.ctx.Done():
			return
		case pi = <-d.found:
		}
		if pi.ID == d.h.ID() || d.h.Network().Connectedness(pi.ID) == network.Connected {
			continue
		}
		select {
		case <-d.ctx.Done():
			return
		case sem <- struct{}{}:
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(d.ctx, mdnsDialTimeout)
			defer cancel()
			if err := d.h.Connect(ctx, pi); err != nil {
				d.log.Debug("discovery: mdns: peer unreachable", "peer", pi.ID, "err", err)
				return
			}
			d.log.Debug("discovery: mdns: peer connected", "peer", pi.ID)
		}()
	}
}
