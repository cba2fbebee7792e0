package node

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/mcpv2/mcpv2/transport"
)

// Hole punching: a peer behind a NAT is often reached through a relay
// first; it starts hole punching (DCUtR) when the relayed connection
// arrives, and a call waits a little for the direct connection that brings
// (Client.upgrade) before its first byte.

const (
	// punchRetry is how long after a fruitless wait calls to that peer go
	// through the relay without waiting for a direct connection again.
	punchRetry = 5 * time.Minute
	// maxNoDirect bounds Client.noDirect; past it the map starts over.
	maxNoDirect = 1024
)

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
	if n.onDirectWait != nil {
		n.onDirectWait(direct)
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
