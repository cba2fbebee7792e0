package discovery

import (
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// rtSignal tells growthLoop, waitRoutingTable and tests that the routing table may
// have changed.
// Its zero value is ready; its methods may be called concurrently.
type rtSignal struct {
	mu sync.Mutex
	ch chan struct{} // closed and replaced by grew; nil until first used
}

// wait returns a channel closed at the next grew.
func (s *rtSignal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// grew wakes every waiter. It is called from kad-dht's routing-table
// callbacks, under the table's lock, so it only closes a channel.
func (s *rtSignal) grew() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// rtHost is h as the DHT sees it: a host whose connection manager also
// signals rt. kad-dht's RoutingTable.PeerAdded callback protects or tags
// every peer it adds to the table (tag "kbucket"), and PeerRemoved
// unprotects and untags it, through the host's connection manager: these
// are the routing table's notifications, in place before the DHT starts
// (assigning RoutingTable().PeerAdded after dht.New would race with the
// DHT's own adds). Any Protect, TagPeer, Unprotect or UntagPeer signals: a
// waiter only looks at the table again, so a spurious wake-up costs
// nothing.
type rtHost struct {
	host.Host
	rt *rtSignal
}

// ConnManager returns h's connection manager, wrapped to signal rt.
func (h rtHost) ConnManager() connmgr.ConnManager {
	return rtConnMgr{ConnManager: h.Host.ConnManager(), rt: h.rt}
}

// rtConnMgr is a connection manager that signals rt when a peer is
// protected, tagged, unprotected or untagged.
type rtConnMgr struct {
	connmgr.ConnManager
	rt *rtSignal
}

// TagPeer tags p, then signals.
func (c rtConnMgr) TagPeer(p peer.ID, tag string, v int) {
	c.ConnManager.TagPeer(p, tag, v)
	c.rt.grew()
}

// Protect protects p, then signals.
func (c rtConnMgr) Protect(p peer.ID, tag string) {
	c.ConnManager.Protect(p, tag)
	c.rt.grew()
}

// UntagPeer untags p, then signals: kad-dht's PeerRemoved callback calls
// it and Unprotect, so a waiter also sees the table shrink.
func (c rtConnMgr) UntagPeer(p peer.ID, tag string) {
	c.ConnManager.UntagPeer(p, tag)
	c.rt.grew()
}

// Unprotect unprotects p, then signals.
func (c rtConnMgr) Unprotect(p peer.ID, tag string) bool {
	protected := c.ConnManager.Unprotect(p, tag)
	c.rt.grew()
	return protected
}

// waitRoutingTable waits until the routing table has a peer, at most limit
// or until ctx ends. The DHT adds a connected peer once identify has shown
// that it serves the DHT protocol and it answered a request; the wait wakes
// on the routing table's add callback (rtHost).
func (d *Discovery) waitRoutingTable(ctx context.Context, limit time.Duration) {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		grew := d.rt.wait() // before the look, so that no add is missed
		if d.kad.RoutingTable().Size() > 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		case <-grew:
		}
	}
}
