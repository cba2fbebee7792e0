package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	kb "github.com/libp2p/go-libp2p-kbucket"
	record "github.com/libp2p/go-libp2p-record"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/sync/errgroup"

	"github.com/mcpv2/mcpv2/protocol"
)

// Replication tuning.
const (
	// putTimeout bounds one put (PUT_VALUE or ADD_PROVIDER) to one peer.
	putTimeout = 10 * time.Second
	// putRetryWait is the wait before the one retry of the puts that failed.
	putRetryWait = time.Second
	// growthFactor and growthMin: the routing table reaching growthFactor
	// times, and at least growthMin more than, its size at the last
	// announcement starts a new announcement. Doubling: when the mesh has
	// doubled since an announcement, about half of the k closest peers of
	// each key are still ones that got it, which a lookup finds; a smaller
	// factor re-announced ~20 times while mDNS filled the table of a
	// 100-node LAN one peer at a time (log1.25(100) against log2(100)).
	growthFactor = 2
	growthMin    = 3
	// growthGap is the least time between an announcement and one that
	// routing-table growth starts.
	growthGap = 5 * time.Second
)

// replicas is what the replication of one record achieved: the closest
// peers the lookup returned (at most k) and how many of them acknowledged.
type replicas struct {
	closest, acked int
}

// enough reports whether r reached at least half of the closest peers
// (of the k, or of all there are in a smaller network).
func (r replicas) enough() bool {
	return r.acked >= (r.closest+1)/2 && r.acked > 0
}

// replicate looks up the k closest peers of key and sends them the record
// with send, all at once, each within putTimeout; the peers that failed are
// tried once more after putRetryWait. It returns how many acknowledged. The
// error is the lookup's (kb.ErrLookupFailure with an empty routing table),
// or ctx's when it ended before the retry.
//
// kad-dht's own PutValue and Provide do the same but for the counting and
// the retry: they ignore every peer's answer, so a put that reached one
// peer of twenty looks like one that reached all.
func (d *Discovery) replicate(ctx context.Context, key string, send func(context.Context, peer.ID) error) (replicas, error) {
	// As kad-dht's Provide does: the lookup leaves a tenth of the time
	// (at most a second) for the puts, and when it runs out of its share
	// the puts go to the closest peers it found so far.
	lctx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		lctx, cancel = context.WithDeadline(ctx, deadline.Add(-min(time.Until(deadline)/10, time.Second)))
		defer cancel()
	}
	peers, err := d.kad.GetClosestPeers(lctx, key)
	if err != nil && (ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) || len(peers) == 0) {
		return replicas{}, err
	}
	r := replicas{closest: len(peers)}
	todo := peers
	for try := 0; try < 2 && len(todo) > 0; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return r, ctx.Err()
			case <-time.After(putRetryWait):
			}
		}
		var (
			mu     sync.Mutex
			failed []peer.ID
			g      errgroup.Group
		)
		g.SetLimit(BucketSize)
		for _, p := range todo {
			g.Go(func() error {
				pctx, cancel := context.WithTimeout(ctx, putTimeout)
				err := send(pctx, p)
				cancel()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = append(failed, p)
					d.log.Debug("discovery: put to a closest peer", "peer", p, "try", try+1, "err", err)
					return nil
				}
				r.acked++
				return nil
			})
		}
		_ = g.Wait()
		todo = failed
	}
	return r, nil
}

// announce stores env, the sealed card, locally and on the k closest peers
// of its key, and (if full) announces the host as a provider of the card's
// skill and tag CIDs on the k closest peers of each, counting the
// acknowledgements (see replicate). A full announcement then records when
// it was, the routing table's size then, and whether it must be retried
// soon: when it reached no DHT peer, or fewer than half of the closest peers
// of some key. The caller holds pubMu.
func (d *Discovery) announce(ctx context.Context, card protocol.AgentCard, env []byte, full bool) (err error) {
	start := time.Now()
	rtSize := d.kad.RoutingTable().Size()
	pending := false
	defer func() {
		d.metrics.announced(err, pending, time.Since(start))
		if !full && !pending {
			return
		}
		d.mu.Lock()
		// Both count from the start: a peer that joined while the
		// announcement ran may have missed it, and the republish interval
		// is from one start to the next.
		d.lastAnnounce, d.announcedRT, d.pending = start, rtSize, pending
		if err == nil && !pending {
			d.saidNoPeer = false
		}
		d.mu.Unlock()
	}()
	self := d.h.ID()
	key := CardKey(self)
	rec := record.MakePutRecord(key, env)
	if err := d.values.Put(ctx, key, rec); err != nil {
		// The local store refused the card: it holds a higher seq.
		return fmt.Errorf("discovery: publish: put card: %w: %w", errNotStored, err)
	}
	cids := cardCIDs(card)
	for _, c := range cids {
		// Local finds work before any peer took the record.
		if err := d.kad.ProviderStore().AddProvider(ctx, c.Hash(), peer.AddrInfo{ID: self}); err != nil {
			return fmt.Errorf("discovery: publish: store provider %s locally: %w", c, err)
		}
	}

	cardReps, err := d.replicate(ctx, key, func(ctx context.Context, p peer.ID) error {
		return d.pm.PutValue(ctx, p, rec)
	})
	if errors.Is(err, kb.ErrLookupFailure) {
		pending = true
		d.sayNoPeer(ctx, card.Seq)
		return nil
	}
	if err != nil {
		return fmt.Errorf("discovery: publish: put card: %w", err)
	}
	if !full {
		pending = !cardReps.enough()
		d.log.Debug("discovery: card put", "seq", card.Seq, "card_acks", cardReps.acked, "closest", cardReps.closest)
		return nil
	}

	addrs := d.kad.FilteredAddrs()
	var (
		mu    sync.Mutex
		short []string
		errs  []error
		least = cardReps
		g     errgroup.Group
	)
	g.SetLimit(announceParallel)
	for _, c := range cids {
		g.Go(func() error {
			reps, err := d.replicate(ctx, string(c.Hash()), func(ctx context.Context, p peer.ID) error {
				return d.pm.PutProviderAddrs(ctx, p, c.Hash(), peer.AddrInfo{ID: self, Addrs: addrs})
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("provide %s: %w", c, err))
				return nil
			}
			if !reps.enough() {
				short = append(short, c.String())
			}
			if reps.acked < least.acked {
				least = reps
			}
			return nil
		})
	}
	_ = g.Wait()
	if !cardReps.enough() {
		short = append(short, key)
	}
	pending = len(short) > 0 || len(errs) > 0
	// The first complete announcement, and one short of peers, at Info: the
	// moment the agent can be found, and a mesh that is not healthy.
	lvl := slog.LevelDebug
	d.mu.Lock()
	if len(short) > 0 || !d.announcedOnce {
		lvl, d.announcedOnce = slog.LevelInfo, true
	}
	d.mu.Unlock()
	d.log.Log(ctx, lvl, "discovery: card published", "seq", card.Seq, "cids", len(cids),
		"card_acks", cardReps.acked, "closest", cardReps.closest, "least_acks", least.acked,
		"under_replicated", len(short), "errors", len(errs), "routing_table", rtSize, "routing_table_after", d.kad.RoutingTable().Size(), "took", time.Since(start))
	if len(errs) > 0 {
		if !hasOtherThan(errs, kb.ErrLookupFailure) {
			// The routing table emptied since the card went out.
			d.sayNoPeer(ctx, card.Seq)
			return nil
		}
		return fmt.Errorf("discovery: publish: %w", errors.Join(errs...))
	}
	select {
	case d.announced <- struct{}{}:
	default:
	}
	return nil
}

// hasOtherThan reports whether some error of errs is not target.
func hasOtherThan(errs []error, target error) bool {
	for _, e := range errs {
		if !errors.Is(e, target) {
			return true
		}
	}
	return false
}

// sayNoPeer logs that the card reached no DHT peer: at Info the first time
// since an announcement last reached one, then at Debug, so that a node
// alone on its network says it once, not at every retry.
func (d *Discovery) sayNoPeer(ctx context.Context, seq uint64) {
	d.mu.Lock()
	lvl := slog.LevelDebug
	if !d.saidNoPeer {
		lvl, d.saidNoPeer = slog.LevelInfo, true
	}
	d.mu.Unlock()
	d.log.Log(ctx, lvl, "discovery: card stored locally; no DHT peer yet, will retry (further retries log at debug level)", "seq", seq)
}

// cardCIDs returns the provider CIDs of a card: one per distinct skill name
// and one per distinct tag.
func cardCIDs(card protocol.AgentCard) []cid.Cid {
	skills, tags := map[string]bool{}, map[string]bool{}
	var out []cid.Cid
	for _, s := range card.Skills {
		if s.Name != "" && !skills[s.Name] {
			skills[s.Name] = true
			out = append(out, SkillCID(s.Name))
		}
		for _, t := range s.Tags {
			if t != "" && !tags[t] {
				tags[t] = true
				out = append(out, TagCID(t))
			}
		}
	}
	return out
}

// republishLoop announces the card again every republish interval, within
// half a minute when the last announcement was short of peers, and soon
// after the routing table grew (growthLoop): a node that published while
// the mesh was young stored its records on the few peers there were, and
// the peers that joined since are the closest to its keys now.
func (d *Discovery) republishLoop() {
	defer d.wg.Done()
	t := time.NewTicker(d.republishTick())
	defer t.Stop()
	for {
		growth := false
		select {
		case <-d.ctx.Done():
			return
		case <-t.C:
		case <-d.grew:
			d.mu.Lock()
			wait := time.Until(d.lastAnnounce.Add(growthGap))
			d.mu.Unlock()
			if wait > 0 {
				select {
				case <-d.ctx.Done():
					return
				case <-time.After(wait):
				}
			}
			growth = true
		}
		d.republish(growth)
	}
}

// republishTick is how often republishLoop looks whether a republish is
// due.
func (d *Discovery) republishTick() time.Duration { return min(d.cfg.republish, retryNoPeers) }

// growthLoop wakes on every change of the routing table (rtHost: kad-dht's
// add and remove callbacks) and signals republishLoop once the table has
// grown enough since the last announcement.
func (d *Discovery) growthLoop() {
	defer d.wg.Done()
	for {
		changed := d.rt.wait() // before the look, so that no add is missed
		if d.grown() {
			select {
			case d.grew <- struct{}{}:
			default:
			}
		}
		select {
		case <-d.ctx.Done():
			return
		case <-changed:
		}
	}
}

// grown reports whether a card was published and the routing table has
// grown enough since the last announcement to announce it again.
func (d *Discovery) grown() bool {
	size := d.kad.RoutingTable().Size()
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.card != nil && size >= max(d.announcedRT+growthMin, int(float64(d.announcedRT)*growthFactor))
}

// republish announces the card again if it is due: the last announcement
// was a republish interval ago or must be retried, or (when growth is set)
// the routing table grew enough since.
func (d *Discovery) republish(growth bool) {
	d.pubMu.Lock()
	defer d.pubMu.Unlock()
	// Checked under pubMu: the signal may predate an announcement that has
	// since counted the growth.
	grown := growth && d.grown()
	d.mu.Lock()
	card, env := d.card, d.env
	// Half a tick early rather than a whole tick late.
	due := card != nil && (grown || d.pending || time.Since(d.lastAnnounce) >= d.cfg.republish-d.republishTick()/2)
	d.mu.Unlock()
	if !due {
		return
	}
	ctx, cancel := context.WithTimeout(d.ctx, announceTimeout)
	defer cancel()
	if err := d.announce(ctx, *card, env, true); err != nil && d.ctx.Err() == nil {
		d.log.Warn("discovery: republish", "err", err)
	}
}
