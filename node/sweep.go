package node

import (
	"time"

	"github.com/mcpv2/mcpv2/node/store"
)

// maxSweepEvery is the longest pause between two sweeps of the store.
const maxSweepEvery = time.Hour

// minSweepEvery is the shortest, whatever the TTLs.
const minSweepEvery = 100 * time.Millisecond

// storeLimits turns cfg's disk limits into store options, and sets cfg's
// zero fields to the effective defaults (PartialTTL and ConversationTTL are
// read by the sweeper).
func storeLimits(cfg *Config) []store.Option {
	// orNone maps the Config convention (0: default, negative: none) to the
	// store's (0: none).
	orNone := func(v, def int64) int64 {
		switch {
		case v == 0:
			return def
		case v < 0:
			return 0
		}
		return v
	}
	if cfg.PartialTTL <= 0 {
		cfg.PartialTTL = store.DefaultPartialTTL
	}
	cfg.MaxPartial = orNone(cfg.MaxPartial, store.DefaultMaxPartial)
	cfg.MaxStore = orNone(cfg.MaxStore, store.DefaultMaxStore)
	cfg.AuditMaxBytes = orNone(cfg.AuditMaxBytes, store.DefaultAuditMaxBytes)
	cfg.AuditKeep = int(orNone(int64(cfg.AuditKeep), store.DefaultAuditKeep))
	cfg.MaxConversations = int(orNone(int64(cfg.MaxConversations), store.DefaultMaxConversations))
	cfg.ConversationTTL = time.Duration(orNone(int64(cfg.ConversationTTL), int64(store.DefaultConversationTTL)))
	cfg.TaskTTL = time.Duration(orNone(int64(cfg.TaskTTL), int64(store.DefaultTaskTTL)))
	cfg.MaxTasksBytes = orNone(cfg.MaxTasksBytes, store.DefaultMaxTasksBytes)
	return []store.Option{
		store.WithMaxPartial(cfg.MaxPartial),
		store.WithPartialTTL(cfg.PartialTTL),
		store.WithMaxStore(cfg.MaxStore),
		store.WithAuditRotation(cfg.AuditMaxBytes, cfg.AuditKeep),
		store.WithMaxConversations(cfg.MaxConversations),
		store.WithConversationTTL(cfg.ConversationTTL),
		store.WithTaskTTL(cfg.TaskTTL),
		store.WithMaxTasksBytes(cfg.MaxTasksBytes),
		store.WithClock(cfg.Now),
	}
}

// sweepEvery is the sweeper's period: a quarter of the shorter TTL (0: that
// TTL is off), between minSweepEvery and maxSweepEvery. So a partial upload
// is gone at most a quarter TTL after it became stale.
func sweepEvery(partialTTL time.Duration, ttls ...time.Duration) time.Duration {
	d := min(maxSweepEvery, partialTTL/4)
	for _, ttl := range ttls {
		if ttl > 0 {
			d = min(d, ttl/4)
		}
	}
	return max(d, minSweepEvery)
}

// startSweeper starts the goroutine that sweeps the store (stale partial
// uploads, expired conversations) every period, until Close. It belongs to
// the node: Close cancels n.ctx and waits for it (n.bg) before closing the
// store.
func (n *Node) startSweeper(every time.Duration) {
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-n.ctx.Done():
				return
			case <-t.C:
			}
			r, err := n.store.Sweep()
			if err != nil && n.ctx.Err() == nil {
				n.log.Warn("store sweep", "err", err)
			}
			if r.Partials > 0 || r.Conversations > 0 || r.Tasks > 0 {
				n.log.Info("store sweep", "stale_partial_uploads", r.Partials, "expired_conversations", r.Conversations, "expired_tasks", r.Tasks)
			}
		}
	}()
}
