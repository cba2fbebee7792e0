package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/mcpv2/mcpv2/protocol"
)

// Ranking weights (SPEC §4), also those of the orchestrator's ranking of
// candidates for a subtask (node/orchestrate).
const (
	// ScoreName is added when a skill name, or a capability name (an LLM
	// provider), equals the query.
	ScoreName = 2.0
	// ScoreTag is added when a skill's tag equals the query.
	ScoreTag = 1.5
	// ScoreDescription is added when a word of the query is a word of the
	// card's or a skill's description.
	ScoreDescription = 0.5
	// ScoreReachable is added when the agent is reachable now.
	ScoreReachable = 1.0
)

// Find tuning.
const (
	// maxFindProviders caps the providers taken from each provider lookup.
	maxFindProviders = 64
	// findGrace is how long the provider lookups go on after the first
	// provider came. Every holder of a key holds all the key's providers
	// it was sent, so the first answer brings nearly all of them and the
	// other holders asked in the same rounds answer within round trips;
	// what is left of an exhausting lookup is waiting on peers that left
	// (a dead peer's dial takes its timeout: 5 s on a LAN over QUIC, 15 s
	// on the Internet), which made finds take 15-50 s after 30% churn.
	findGrace = 2 * time.Second
	// findParallel bounds the card fetches (and reachability dials) of a find.
	findParallel = 8
	// cardFetchTimeout bounds one card fetch.
	cardFetchTimeout = 10 * time.Second
	// reachTimeout bounds the dial that tells whether an agent is reachable.
	reachTimeout = 2 * time.Second
	// cardLookups is how many DHT lookups a card fetch makes before it drops
	// the provider; cardLookupWait is the wait before the second.
	cardLookups    = 2
	cardLookupWait = 300 * time.Millisecond
)

// FindStats is how far a find got: what its two provider lookups asked and
// what became of the providers they found.
type FindStats struct {
	// PeersAsked is the number of distinct peers the provider lookups asked;
	// Requests the GET_PROVIDERS requests they sent.
	PeersAsked int `json:"peers_asked"`
	Requests   int `json:"requests"`
	// Hops is the depth of the deepest peer asked: 1 for a peer of the
	// finder's own routing table, d+1 for a peer first learned from the
	// answer of a peer at depth d.
	Hops int `json:"hops"`
	// Providers is the number of distinct providers found (the host itself
	// included when its card matches); Cards of them had a card that was
	// fetched and verified, CardFailures did not; Matched cards matched the
	// query (the results before the limit).
	Providers    int `json:"providers"`
	Cards        int `json:"cards"`
	CardFailures int `json:"card_failures"`
	Matched      int `json:"matched"`
	// TookMS is the find's duration in milliseconds.
	TookMS int64 `json:"took_ms"`
	// Cut reports that the lookups were stopped findGrace after the first
	// provider came, before they were exhausted.
	Cut bool `json:"cut,omitempty"`
}

// String says how far the find got, for an answer that found nothing.
func (s FindStats) String() string {
	cut := ""
	if s.Cut {
		cut = fmt.Sprintf(" (lookups stopped %s after the first provider)", findGrace)
	}
	return fmt.Sprintf("asked %d peers (%d requests, %d hops), found %d providers%s, verified %d cards (%d failed), %d matched, in %d ms",
		s.PeersAsked, s.Requests, s.Hops, s.Providers, cut, s.Cards, s.CardFailures, s.Matched, s.TookMS)
}

// ErrNoPeers is returned by Find when nothing matched locally and the
// routing table is empty: there was nobody to ask (Bootstrap first).
var ErrNoPeers = errors.New("no DHT peer to ask")

// Find returns the agents that offer a skill named query or a skill tagged
// query, best first, at most limit of them (DefaultFindLimit when limit <= 0).
//
// It looks up the providers of SkillCID(query) and TagCID(query) in the DHT,
// fetches and verifies each provider's card (a few at a time), drops a card
// that does not match the query by name, tag or description, and ranks the
// rest: skill or capability name match 2.0, tag match 1.5, description word
// 0.5, reachable now 1.0 (already connected, or a dial within 2 s succeeds),
// summed. Ties are ordered by PeerID. The host itself is included when its
// published card matches; it counts as reachable.
//
// A provider whose card cannot be fetched or does not verify is left out
// (logged at Debug). Find returns an error only for an empty query, a closed
// Discovery, when ctx ends before any result was found, and (ErrNoPeers)
// when nothing was found and the routing table is empty.
func (d *Discovery) Find(ctx context.Context, query string, limit int) ([]protocol.FindResult, error) {
	res, _, err := d.FindWithStats(ctx, query, limit)
	return res, err
}

// FindWithStats is Find, and also says how far the find got.
func (d *Discovery) FindWithStats(ctx context.Context, query string, limit int) (res []protocol.FindResult, st FindStats, err error) {
	start := time.Now()
	defer func() {
		took := time.Since(start)
		st.TookMS = took.Milliseconds()
		d.metrics.found(len(res), err, took)
	}()
	if d.isClosed() {
		return nil, st, fmt.Errorf("discovery: find: %w", net.ErrClosed)
	}
	query = strings.TrimSpace(query)
	if query == "" {
		return nil, st, errors.New("discovery: find: empty query")
	}
	if limit <= 0 {
		limit = DefaultFindLimit
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d.joining(ctx)

	skill, tag := SkillCID(query), TagCID(query)
	lctx, finish := traceLookup(ctx, d, string(skill.Hash()), string(tag.Hash()))
	providers, cut := d.findProviders(lctx, skill, tag)
	st.Cut = cut
	tr := finish()
	st.PeersAsked, st.Requests, st.Hops = tr.distinct, tr.queried, tr.hops
	self := d.h.ID()
	if c, _ := d.published(); c != nil {
		if _, ok := providers[self]; !ok {
			providers[self] = peer.AddrInfo{ID: self}
		}
	}

	var (
		mu      sync.Mutex
		results []protocol.FindResult
		wg      sync.WaitGroup
		sem     = make(chan struct{}, findParallel)
	)
	for _, ai := range providers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			rs, fetched := d.rankProvider(ctx, ai, query)
			mu.Lock()
			defer mu.Unlock()
			if fetched {
				st.Cards++
			} else {
				st.CardFailures++
			}
			results = append(results, rs...)
		}()
	}
	wg.Wait()
	st.Providers, st.Matched = len(providers), len(results)

	if len(results) == 0 {
		if err := ctx.Err(); err != nil {
			return nil, st, fmt.Errorf("discovery: find %q: %w (%s)", query, err, st)
		}
		if d.kad.RoutingTable().Size() == 0 {
			return nil, st, fmt.Errorf("discovery: find %q: %w", query, ErrNoPeers)
		}
	}
	slices.SortFunc(results, func(a, b protocol.FindResult) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		if c := strings.Compare(a.Card.PeerID, b.Card.PeerID); c != 0 {
			return c
		}
		return strings.Compare(bridgedURL(a), bridgedURL(b))
	})
	if len(results) > limit {
		results = results[:limit]
	}
	return results, st, nil
}

// bridgedURL is the URL of r's bridged agent ("" for the agent itself).
func bridgedURL(r protocol.FindResult) string {
	if r.Bridged == nil {
		return ""
	}
	return r.Bridged.URL
}

// findProviders runs the provider lookups of cids in parallel and returns
// the providers found, with the addresses the lookups gave. The lookups
// end when exhausted, or findGrace after the first provider came (cut).
func (d *Discovery) findProviders(ctx context.Context, cids ...cid.Cid) (_ map[peer.ID]peer.AddrInfo, cut bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		out   = map[peer.ID]peer.AddrInfo{}
		wg    sync.WaitGroup
		grace *time.Timer // set at the first provider, under mu
		cuts  atomic.Bool
	)
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		if grace != nil {
			grace.Stop()
		}
	}()
	for _, c := range cids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The channel closes when the lookup ends, also when ctx does.
			for ai := range d.kad.FindProvidersAsync(ctx, c, maxFindProviders) {
				mu.Lock()
				prev := out[ai.ID]
				prev.ID = ai.ID
				prev.Addrs = append(prev.Addrs, ai.Addrs...)
				out[ai.ID] = prev
				if grace == nil {
					grace = time.AfterFunc(findGrace, func() { cuts.Store(true); cancel() })
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out, cuts.Load()
}

// rankProvider fetches, verifies and scores the card of provider ai;
// fetched reports whether the card was had. It returns the card's results
// that match query: the agent itself, and each agent it bridges (see
// Results).
func (d *Discovery) rankProvider(ctx context.Context, ai peer.AddrInfo, query string) (_ []protocol.FindResult, fetched bool) {
	var (
		card      protocol.AgentCard
		reachable bool
	)
	if ai.ID == d.h.ID() {
		c, _ := d.published()
		if c == nil {
			return nil, false
		}
		card, reachable = *c, true
	} else {
		// Dial first: the reachability counts in the rank, and a connected
		// provider is asked for its card directly.
		reachable = d.reachable(ctx, ai)
		fctx, cancel := context.WithTimeout(ctx, cardFetchTimeout)
		var err error
		card, err = d.fetchCard(fctx, ai.ID, reachable)
		cancel()
		if err != nil {
			d.log.Debug("discovery: find: provider's card", "peer", ai.ID, "err", err)
			return nil, false
		}
	}
	return Results(card, query, reachable), true
}

// MaxBridgedResults caps the bridged agents one card gives results for
// (a node bridges at most 8): a peer's card cannot push every other
// provider out of a find's limit with many small bridged entries.
const MaxBridgedResults = 8

// Results ranks card for query as Find does: one result for the agent's
// own skills when they match, and one for each agent the card bridges
// (protocol.AgentCard.Bridged) that matches, on its own name, description
// and skills, with Bridged set and the bridging card as Card: the first
// MaxBridgedResults of them, each URL once. A bridged agent counts as
// reachable when the bridging agent is and the bridge found it healthy.
func Results(card protocol.AgentCard, query string, reachable bool) []protocol.FindResult {
	var out []protocol.FindResult
	own := card
	if len(card.Bridged) > 0 {
		own.Skills = slices.DeleteFunc(slices.Clone(card.Skills), func(sk protocol.SkillDescriptor) bool {
			_, bridged := card.BridgedSkill(sk.Name)
			return bridged
		})
	}
	if matchScore(own, query) > 0 {
		out = append(out, protocol.FindResult{Card: card, Score: score(own, query, reachable), Reachable: reachable})
	}
	seen := map[string]bool{}
	for i, b := range card.Bridged {
		if i == MaxBridgedResults {
			break
		}
		if seen[b.URL] {
			continue
		}
		seen[b.URL] = true
		bc := BridgedCard(card, b)
		if matchScore(bc, query) == 0 {
			continue
		}
		r := reachable && b.Healthy
		out = append(out, protocol.FindResult{Card: card, Score: score(bc, query, r), Reachable: r, Bridged: &b})
	}
	return out
}

// BridgedCard is the card of an agent that card bridges, for ranking it:
// its name, description and skills (their descriptors from card.Skills),
// the bridging agent's PeerID.
func BridgedCard(card protocol.AgentCard, b protocol.BridgedAgent) protocol.AgentCard {
	bc := protocol.AgentCard{Name: b.Name, Description: b.Description, PeerID: card.PeerID, Skills: []protocol.SkillDescriptor{}}
	for _, sk := range card.Skills {
		if slices.Contains(b.Skills, sk.Name) {
			bc.Skills = append(bc.Skills, sk)
		}
	}
	return bc
}

// reachable reports whether the agent is connected, or can be dialled within
// reachTimeout at the addresses the DHT gave.
func (d *Discovery) reachable(ctx context.Context, ai peer.AddrInfo) bool {
	if d.h.Network().Connectedness(ai.ID) == network.Connected {
		return true
	}
	rctx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	return d.h.Connect(rctx, ai) == nil
}

// fetchCard returns the verified card of provider id. A connected provider
// is asked first, with one DHT request: a DHT server holds its own latest
// card, and only its own key can sign it. When that fails (a client-mode
// provider does not serve the DHT) or the provider is not connected, the
// card is looked up in the DHT (GetCard), which asks the peers holding it;
// when no holder answered, once more after a short wait (a holder busy or
// just gone, a routing table still filling) before the provider is dropped.
func (d *Discovery) fetchCard(ctx context.Context, id peer.ID, connected bool) (protocol.AgentCard, error) {
	if connected {
		key := CardKey(id)
		rec, _, err := d.pm.GetValue(ctx, id, key)
		if err == nil && rec != nil {
			card, err := openCard(key, rec.GetValue())
			if err == nil {
				return card, nil
			}
			d.log.Debug("discovery: find: provider's own card refused", "peer", id, "err", err)
		}
	}
	var err error
	for try := range cardLookups {
		if try > 0 {
			select {
			case <-ctx.Done():
				return protocol.AgentCard{}, errors.Join(err, ctx.Err())
			case <-time.After(cardLookupWait):
			}
		}
		var card protocol.AgentCard
		if card, err = d.GetCard(ctx, id); err == nil {
			return card, nil
		}
	}
	return protocol.AgentCard{}, err
}

// score ranks card for query (SPEC §4): the sum of ScoreName when a skill
// name or a capability name (LLM provider) equals the query, ScoreTag when a
// skill tag does, ScoreDescription when a word of the query is a word of the
// card's or a skill's description, and ScoreReachable when reachable. Names
// and tags compare case-insensitively; each part counts once.
func score(card protocol.AgentCard, query string, reachable bool) float64 {
	s := matchScore(card, query)
	if reachable {
		s += ScoreReachable
	}
	return s
}

// matchScore is score without reachability: zero when the card does not
// match query at all.
func matchScore(card protocol.AgentCard, query string) float64 {
	q := strings.TrimSpace(query)
	if q == "" {
		return 0
	}
	var name, tag bool
	for _, sk := range card.Skills {
		name = name || strings.EqualFold(sk.Name, q)
		for _, t := range sk.Tags {
			tag = tag || strings.EqualFold(t, q)
		}
	}
	for _, p := range card.Capabilities.Providers {
		name = name || strings.EqualFold(p, q)
	}
	desc := false
	qw := Words(q)
	if len(qw) > 0 {
		texts := []string{card.Description}
		for _, sk := range card.Skills {
			texts = append(texts, sk.Description)
		}
	search:
		for _, t := range texts {
			for w := range Words(t) {
				if qw[w] {
					desc = true
					break search
				}
			}
		}
	}
	return matchSum(name, tag, desc)
}

// matchSum is the score of a card's matches (SPEC §4 and the seed's task
// weights): ScoreName for a name, ScoreTag for a tag, ScoreDescription
// for a description word; each counts once.
func matchSum(name, tag, desc bool) float64 {
	var s float64
	if name {
		s += ScoreName
	}
	if tag {
		s += ScoreTag
	}
	if desc {
		s += ScoreDescription
	}
	return s
}

// Words returns the lower-cased words of s: runs of letters and digits.
func Words(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		out[strings.ToLower(w)] = true
	}
	return out
}
