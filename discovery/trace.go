package discovery

import (
	"context"

	kb "github.com/libp2p/go-libp2p-kbucket"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/routing"
)

// lookupTrace is what the query events of one provider lookup tell.
type lookupTrace struct {
	// queried counts the GET_PROVIDERS requests sent; distinct counts the
	// peers they went to.
	queried, distinct int
	// hops is the depth of the deepest peer queried: 1 for a peer taken from
	// the finder's own routing table (the lookup's seeds), d+1 for a peer
	// first learned from the answer of a peer at depth d.
	hops int
}

// traceLookup registers for the query events of the lookups for keys run
// with the returned context; finish ends the registration and returns the
// trace. Seeds are the k nearest peers of the routing table to each key, as
// kad-dht picks them.
func traceLookup(ctx context.Context, d *Discovery, keys ...string) (context.Context, func() lookupTrace) {
	ctx, cancel := context.WithCancel(ctx)
	ctx, events := routing.RegisterForQueryEvents(ctx)
	depth := map[peer.ID]int{}
	for _, key := range keys {
		for _, p := range d.DHT().RoutingTable().NearestPeers(kb.ConvertKey(key), BucketSize) {
			depth[p] = 1
		}
	}
	done := make(chan lookupTrace, 1)
	go func() {
		var tr lookupTrace
		asked := map[peer.ID]bool{}
		for ev := range events {
			switch ev.Type {
			case routing.SendingQuery:
				tr.queried++
				if !asked[ev.ID] {
					asked[ev.ID] = true
					tr.distinct++
				}
				dp, ok := depth[ev.ID]
				if !ok {
					dp = 1
					depth[ev.ID] = dp
				}
				tr.hops = max(tr.hops, dp)
			case routing.PeerResponse:
				for _, ai := range ev.Responses {
					if _, ok := depth[ai.ID]; !ok {
						depth[ai.ID] = depth[ev.ID] + 1
					}
				}
			}
		}
		done <- tr
	}()
	return ctx, func() lookupTrace {
		cancel()
		return <-done
	}
}
