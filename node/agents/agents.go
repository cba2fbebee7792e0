// Package agents is a node's registry of A2A agents outside the mesh
// (issue 23): agents known by their URL, registered by the operator
// (mcpv2 agents add) only. Each agent's card is fetched and checked when it
// is added, health-checked on a schedule (an owned goroutine, with jitter,
// a few checks at a time), and cached for a TTL; a failing agent becomes
// unhealthy with its error kept, and healthy again when it answers. The
// registry is kept in a file of the data dir (agents.json), written
// atomically, so that a restart keeps it.
//
// Agents found by the REST face's discover route (Discover) are not
// registered: they go to a separate in-memory cache, bounded by its own cap
// (WithMaxFound, least recently used out first) and the TTL; they are not
// persisted, not health-checked, not bridged, and do not count against the
// registry's cap. Their errors, and those the registry shows to callers
// other than the operator (Listing(false)), are coarse (Category): the URL
// and "unreachable", "refused by the node's outbound scope", "not an A2A
// agent (bad card)" or "timeout"; the detail is logged.
//
// The registry does not speak A2A itself: it calls a Resolver (the node's
// a2aclient.Client) to read cards and send messages.
package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/mcpv2/mcpv2/internal/netscope"
	"github.com/mcpv2/mcpv2/node/a2aclient"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// Resolver reads external agents' cards and calls their skills: the node's
// A2A client (*a2aclient.Client).
type Resolver interface {
	// Card resolves and verifies the card of the agent at url.
	Card(ctx context.Context, url string) (*a2aclient.Card, error)
	// Call sends args to skill of the agent of card and returns its result.
	Call(ctx context.Context, card *a2aclient.Card, skill string, args json.RawMessage) (json.RawMessage, error)
}

// FileName is the registry's file in the data dir.
const FileName = "agents.json"

// Defaults and bounds.
const (
	// DefaultInterval is the time between two health checks of an agent
	// (--agents-interval); each wait is drawn within ±10% of it.
	DefaultInterval = 60 * time.Second
	// DefaultTTL is how long a fetched card is used before it is fetched
	// again (--agents-ttl; the seed's MCP_A2A_DISCOVERY_CACHE_TTL_SECONDS).
	DefaultTTL = 300 * time.Second
	// DefaultTimeout bounds one card fetch (--agents-timeout).
	DefaultTimeout = 5 * time.Second
	// DefaultMaxAgents caps the registered agents.
	DefaultMaxAgents = 64
	// DefaultParallel caps the card fetches that run at once.
	DefaultParallel = 4
	// MaxURL caps an agent's URL in bytes.
	MaxURL = 2048
	// MaxFile caps the registry's file in bytes.
	MaxFile = 4 << 20
	// MaxDiscover caps the URLs of one Discover (and of one add).
	MaxDiscover = 32
	// DefaultMaxFound caps the cache of discovered agents.
	DefaultMaxFound = 64
)

// The categories of an error shown to callers other than the operator
// (Category).
const (
	CatUnreachable = "unreachable"
	CatScope       = "refused by the node's outbound scope"
	CatBadCard     = "not an A2A agent (bad card)"
	CatTimeout     = "timeout"
	CatBadURL      = "not an agent URL (want http or https, a host, no user info)"
)

// Category is the coarse class of an error of reading an agent's card, for
// callers other than the operator: it tells neither addresses, DNS answers
// nor statuses apart, so that the node is no port scanner.
func Category(err error) string {
	var (
		ue  *url.Error
		oe  *net.OpError
		de  *net.DNSError
		tmo interface{ Timeout() bool }
	)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, netscope.ErrRefused):
		return CatScope
	case errors.Is(err, ErrBadURL):
		return CatBadURL
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &tmo) && tmo.Timeout():
		return CatTimeout
	case errors.As(err, &ue), errors.As(err, &oe), errors.As(err, &de):
		return CatUnreachable
	}
	return CatBadCard
}

// publicError is what a caller other than the operator reads of err: the
// URL and its Category.
func publicError(u string, err error) string {
	return u + ": " + Category(err)
}

// Errors of the registry; each is wrapped with what was wrong.
var (
	// ErrNoAgent: no agent is registered at that URL.
	ErrNoAgent = errors.New("no such agent")
	// ErrFull: the registry holds its cap of agents.
	ErrFull = errors.New("the agent registry is full")
	// ErrUnhealthy: the agent failed its last health check.
	ErrUnhealthy = errors.New("the agent is unhealthy")
	// ErrBadURL: the URL is not an http(s) URL of an agent.
	ErrBadURL = errors.New("not an agent URL")
)

// notChecked is the error of an agent loaded from the file before its
// first check since the node started.
const notChecked = "not checked since the node started"

// Option configures New.
type Option func(*config) error

type config struct {
	file      string
	interval  time.Duration
	ttl       time.Duration
	timeout   time.Duration
	maxAgents int
	parallel  int
	maxFound  int
	log       *slog.Logger
	now       func() time.Time
	onChange  func()
}

// WithFile sets the file the registry is kept in ("" keeps it in memory
// only). A missing file is an empty registry.
func WithFile(path string) Option {
	return func(c *config) error { c.file = path; return nil }
}

// WithInterval sets the time between health checks (default
// DefaultInterval; at least a second).
func WithInterval(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Second {
			return fmt.Errorf("agents: health-check interval %v: want at least 1s", d)
		}
		c.interval = d
		return nil
	}
}

// WithTTL sets how long a fetched card is used (default DefaultTTL; at
// least a second).
func WithTTL(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Second {
			return fmt.Errorf("agents: card TTL %v: want at least 1s", d)
		}
		c.ttl = d
		return nil
	}
}

// WithTimeout bounds one card fetch (default DefaultTimeout).
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("agents: timeout %v: want more than 0", d)
		}
		c.timeout = d
		return nil
	}
}

// WithMaxAgents caps the registered agents (default DefaultMaxAgents).
func WithMaxAgents(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("agents: max agents %d: want at least 1", n)
		}
		c.maxAgents = n
		return nil
	}
}

// WithParallel caps the card fetches that run at once (default
// DefaultParallel).
func WithParallel(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("agents: parallel checks %d: want at least 1", n)
		}
		c.parallel = n
		return nil
	}
}

// WithMaxFound caps the cache of agents found by Discover (default
// DefaultMaxFound); past it the least recently used goes.
func WithMaxFound(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("agents: max discovered agents %d: want at least 1", n)
		}
		c.maxFound = n
		return nil
	}
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("agents: WithLogger(nil)")
		}
		c.log = l
		return nil
	}
}

// WithClock sets the clock (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("agents: WithClock(nil)")
		}
		c.now = now
		return nil
	}
}

// WithOnChange sets a function called (without the registry's lock held)
// after an agent was added, removed, bridged, changed its skills, or
// turned healthy or unhealthy: the node re-registers its bridged skills
// and republishes its card.
func WithOnChange(f func()) Option {
	return func(c *config) error { c.onChange = f; return nil }
}

// entry is one registered agent.
type entry struct {
	info  protocol.ExternalAgent
	card  *a2aclient.Card // nil until fetched since the start
	added time.Time
	cat   string // Category of the last check's error
}

// found is one agent of the discover cache.
type found struct {
	info protocol.ExternalAgent
	at   time.Time // when its card was read
	used time.Time // last discovered, for the LRU
}

// Registry is the registry of external agents. Its methods are safe for
// concurrent use.
type Registry struct {
	res Resolver
	cfg config

	mu     sync.Mutex
	agents map[string]*entry // by URL
	found  map[string]*found // the discover cache, by URL
	saveMu sync.Mutex        // orders the writes of the file

	ctx    context.Context
	cancel context.CancelFunc
	kick   chan struct{} // a check round now
	done   chan struct{}

	closeMu sync.Mutex
	closed  bool
	ops     sync.WaitGroup // the running Add, Discover and Call
}

// New loads the registry from its file (WithFile) and starts its health
// checks: a first round at once when the file named agents, then one
// every interval. A failed New leaves nothing running.
func New(res Resolver, opts ...Option) (*Registry, error) {
	if res == nil {
		return nil, errors.New("agents: no resolver")
	}
	c := config{interval: DefaultInterval, ttl: DefaultTTL, timeout: DefaultTimeout, maxAgents: DefaultMaxAgents,
		parallel: DefaultParallel, maxFound: DefaultMaxFound, log: slog.New(slog.DiscardHandler), now: time.Now}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	r := &Registry{res: res, cfg: c, agents: map[string]*entry{}, found: map[string]*found{}, kick: make(chan struct{}, 1), done: make(chan struct{})}
	if c.file != "" {
		b, err := os.ReadFile(c.file)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("agents: read %s: %w", c.file, err)
		default:
			stored, err := DecodeFile(b, c.maxAgents)
			if err != nil {
				return nil, fmt.Errorf("agents: %s: %w", c.file, err)
			}
			for _, s := range stored {
				a := s.Agent
				a.URL, a.Bridged, a.Healthy, a.LastError, a.Card = s.URL, s.Bridged, false, notChecked, nil
				r.agents[s.URL] = &entry{info: a, added: s.Added}
			}
		}
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	if len(r.agents) > 0 {
		r.kick <- struct{}{}
	}
	go r.loop()
	return r, nil
}

// Close stops the health checks, cancels the running Add, Discover and
// Call and waits for them all: none saves or reports a change after it. A
// second call returns net.ErrClosed.
func (r *Registry) Close() error {
	r.closeMu.Lock()
	if r.closed {
		r.closeMu.Unlock()
		return net.ErrClosed
	}
	r.closed = true
	r.cancel()
	r.closeMu.Unlock()
	r.ops.Wait()
	<-r.done
	return nil
}

// begin starts an operation that Close waits for: its context ends with
// ctx or at Close. end must be called when it is over. It fails with
// net.ErrClosed after Close.
func (r *Registry) begin(ctx context.Context) (context.Context, func(), error) {
	r.closeMu.Lock()
	defer r.closeMu.Unlock()
	if r.closed {
		return nil, nil, fmt.Errorf("agents: the registry is closed: %w", net.ErrClosed)
	}
	r.ops.Add(1)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.ctx, cancel)
	return ctx, func() { stop(); cancel(); r.ops.Done() }, nil
}

// closing fails with net.ErrClosed once Close began.
func (r *Registry) closing() error {
	if r.ctx.Err() != nil {
		return fmt.Errorf("agents: the registry is closed: %w", net.ErrClosed)
	}
	return nil
}

// loop runs a check round when kicked and every interval (±10%).
func (r *Registry) loop() {
	defer close(r.done)
	for {
		wait := r.cfg.interval + time.Duration((rand.Float64()*0.2-0.1)*float64(r.cfg.interval))
		t := time.NewTimer(wait)
		select {
		case <-r.ctx.Done():
			t.Stop()
			return
		case <-r.kick:
			t.Stop()
		case <-t.C:
		}
		r.CheckAll(r.ctx)
	}
}

// CheckAll health-checks every agent now, a few at a time, and returns
// when all checks ended (or ctx did).
func (r *Registry) CheckAll(ctx context.Context) {
	r.mu.Lock()
	urls := make([]string, 0, len(r.agents))
	for u := range r.agents {
		urls = append(urls, u)
	}
	r.mu.Unlock()
	slices.Sort(urls)
	var g errgroup.Group
	g.SetLimit(r.cfg.parallel)
	changed := false
	var cmu sync.Mutex
	for _, u := range urls {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if r.check(ctx, u) {
				cmu.Lock()
				changed = true
				cmu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	if changed {
		r.changed()
	}
}

// check fetches the card of the agent at u and records the outcome; it
// reports whether what the mesh sees of the agent changed.
func (r *Registry) check(ctx context.Context, u string) bool {
	card, err := r.fetch(ctx, u)
	if ctx.Err() != nil && err != nil {
		return false // stopping: not the agent's fault
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.agents[u]
	if !ok {
		return false
	}
	before := e.info
	e.info.LastChecked = r.cfg.now()
	if err != nil {
		e.info.Healthy, e.info.LastError, e.cat = false, err.Error(), Category(err)
		if before.Healthy || before.LastError == notChecked {
			r.cfg.log.Warn("agents: an agent became unhealthy", "url", u, "err", err)
		}
	} else {
		e.card = card
		fill(&e.info, card)
		e.info.Healthy, e.info.LastError, e.cat = true, "", ""
		if !before.Healthy {
			r.cfg.log.Info("agents: an agent is healthy", "url", u, "name", card.Name)
		}
	}
	return before.Healthy != e.info.Healthy || before.Name != e.info.Name || before.Description != e.info.Description ||
		!slices.EqualFunc(before.Skills, e.info.Skills, sameSkill)
}

func sameSkill(a, b protocol.SkillDescriptor) bool {
	return a.Name == b.Name && a.Description == b.Description && slices.Equal(a.Tags, b.Tags)
}

// fetch reads the card of the agent at u within the timeout.
func (r *Registry) fetch(ctx context.Context, u string) (*a2aclient.Card, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.timeout)
	defer cancel()
	card, err := r.res.Card(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("agents: the card of %s: %w", u, err)
	}
	if card == nil {
		return nil, fmt.Errorf("agents: the card of %s: the client returned none", u)
	}
	return card, nil
}

// fill copies what the mesh sees of card into a: not the raw card, which
// the registry keeps once, in the entry's card.
func fill(a *protocol.ExternalAgent, card *a2aclient.Card) {
	a.Name, a.Description, a.Version = card.Name, card.Description, card.Version
	a.ProtocolVersion, a.Signed, a.Signature = card.ProtocolVersion, card.Signed, card.SignatureSummary()
	a.Skills = make([]protocol.SkillDescriptor, 0, len(card.Skills))
	for _, s := range card.Skills {
		name := s.ID
		if name == "" {
			name = s.Name
		}
		if name == "" {
			continue
		}
		tags := slices.Clone(s.Tags)
		if tags == nil {
			tags = []string{}
		}
		a.Skills = append(a.Skills, protocol.SkillDescriptor{Name: name, Description: s.Description, Tags: tags})
	}
}

// NormalizeURL checks that raw is an http(s) URL of an agent
// (a2aclient.CheckURL: a host, no user info; its errors redact a password)
// and returns it as the registry keys it: without a fragment or a trailing
// slash.
func NormalizeURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || len(raw) > MaxURL {
		return "", fmt.Errorf("%w: %d bytes (want 1 to %d)", ErrBadURL, len(raw), MaxURL)
	}
	u, err := a2aclient.CheckURL(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadURL, err)
	}
	u.Fragment, u.RawFragment = "", ""
	return strings.TrimRight(u.String(), "/"), nil
}

// Add registers the agent at rawURL (or, when registered, refreshes it):
// its card is fetched and verified first, and an agent whose card cannot
// be read is not registered. With bridge the node publishes it into the
// mesh (an agent once bridged stays bridged until SetBridged(false) or
// Remove).
func (r *Registry) Add(ctx context.Context, rawURL string, bridge bool) (protocol.ExternalAgent, error) {
	u, err := NormalizeURL(rawURL)
	if err != nil {
		return protocol.ExternalAgent{}, fmt.Errorf("agents: add: %w", err)
	}
	ctx, end, err := r.begin(ctx)
	if err != nil {
		return protocol.ExternalAgent{}, err
	}
	defer end()
	if err := r.room(u); err != nil {
		return protocol.ExternalAgent{}, err
	}
	card, err := r.fetch(ctx, u)
	if cerr := r.closing(); cerr != nil {
		return protocol.ExternalAgent{}, cerr
	}
	if err != nil {
		return protocol.ExternalAgent{}, fmt.Errorf("agents: add: %w", err)
	}
	a, err := r.put(u, card, bridge)
	if err != nil {
		return a, err
	}
	r.changed()
	return a, r.save()
}

// room fails with ErrFull when u is not registered and the registry is full.
func (r *Registry) room(u string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.agents[u]; !ok && len(r.agents) >= r.cfg.maxAgents {
		return fmt.Errorf("agents: add %s: %w (%d agents; remove one first)", u, ErrFull, r.cfg.maxAgents)
	}
	return nil
}

// put records a fetched card for u, registering u when new.
func (r *Registry) put(u string, card *a2aclient.Card, bridge bool) (protocol.ExternalAgent, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.agents[u]
	if !ok {
		if len(r.agents) >= r.cfg.maxAgents {
			return protocol.ExternalAgent{}, fmt.Errorf("agents: add %s: %w (%d agents; remove one first)", u, ErrFull, r.cfg.maxAgents)
		}
		e = &entry{info: protocol.ExternalAgent{URL: u}, added: r.cfg.now()}
		r.agents[u] = e
	}
	e.card = card
	fill(&e.info, card)
	e.info.Healthy, e.info.LastError, e.info.LastChecked, e.cat = true, "", r.cfg.now(), ""
	e.info.Bridged = e.info.Bridged || bridge
	delete(r.found, u) // registered now: listed once
	return clone(e.info), nil
}

// Discover reads the card of each URL (at most MaxDiscover) for the REST
// face's discover route. It registers nothing: an agent that answered goes
// to the discover cache (Discovered, for the TTL, least recently used out
// past WithMaxFound); a registered agent, or a cached one younger than the
// TTL, is answered as it is, without a fetch. Each URL has its entry, in
// order: the agent, or Healthy false and LastError the URL and a Category
// (the detail is logged).
func (r *Registry) Discover(ctx context.Context, urls []string) ([]protocol.ExternalAgent, error) {
	if len(urls) > MaxDiscover {
		return nil, fmt.Errorf("agents: discover: %d URLs, over the %d of one request", len(urls), MaxDiscover)
	}
	ctx, end, err := r.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	out := make([]protocol.ExternalAgent, len(urls))
	// The cards are fetched in parallel but kept in the cache in the
	// request's order, so that which ones a full cache drops (the least
	// recently kept) does not depend on which fetch ended first.
	fetched := make([]*a2aclient.Card, len(urls))
	norm := make([]string, len(urls))
	var g errgroup.Group
	g.SetLimit(r.cfg.parallel)
	for i, raw := range urls {
		g.Go(func() error {
			failed := func(u string, err error) protocol.ExternalAgent {
				return protocol.ExternalAgent{URL: u, LastError: publicError(u, err), LastChecked: r.cfg.now(), Skills: []protocol.SkillDescriptor{}}
			}
			u, err := NormalizeURL(raw)
			if err != nil {
				out[i] = failed(clipURL(raw), err)
				return nil
			}
			if a, ok := r.cached(u); ok {
				out[i] = a
				return nil
			}
			card, err := r.fetch(ctx, u)
			if err != nil {
				r.cfg.log.Info("agents: discover: the card cannot be read", "url", u, "err", err)
				out[i] = failed(u, err)
				return nil
			}
			fetched[i], norm[i] = card, u
			return nil
		})
	}
	_ = g.Wait()
	if err := r.closing(); err != nil {
		return nil, err
	}
	for i, card := range fetched {
		if card != nil {
			out[i] = r.keep(norm[i], card)
		}
	}
	return out, nil
}

// clipURL cuts a URL that is not one for an answer.
func clipURL(raw string) string {
	if len(raw) > 256 {
		return raw[:256]
	}
	return raw
}

// cached answers u from the registry (as a caller other than the operator
// reads it) or from the discover cache within the TTL.
func (r *Registry) cached(u string) (protocol.ExternalAgent, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.agents[u]; ok {
		return r.public(e), true
	}
	f, ok := r.found[u]
	if !ok || r.cfg.now().Sub(f.at) >= r.cfg.ttl {
		return protocol.ExternalAgent{}, false
	}
	f.used = r.cfg.now()
	return clone(f.info), true
}

// keep puts a discovered agent into the discover cache, the least recently
// used going when it is full.
func (r *Registry) keep(u string, card *a2aclient.Card) protocol.ExternalAgent {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.cfg.now()
	f := &found{info: protocol.ExternalAgent{URL: u, Healthy: true, LastChecked: now, Discovered: true}, at: now, used: now}
	fill(&f.info, card)
	if _, ok := r.found[u]; !ok {
		r.expire(now)
		for len(r.found) >= r.cfg.maxFound {
			var lru string
			for k, v := range r.found {
				if lru == "" || v.used.Before(r.found[lru].used) || v.used.Equal(r.found[lru].used) && k < lru {
					lru = k
				}
			}
			delete(r.found, lru)
		}
	}
	r.found[u] = f
	return clone(f.info)
}

// expire drops the discover cache's entries older than the TTL (r.mu held).
func (r *Registry) expire(now time.Time) {
	for k, v := range r.found {
		if now.Sub(v.at) >= r.cfg.ttl {
			delete(r.found, k)
		}
	}
}

// public is e as a caller other than the operator sees it: its error as
// its URL and Category (r.mu held).
func (r *Registry) public(e *entry) protocol.ExternalAgent {
	a := clone(e.info)
	if a.LastError != "" && a.LastError != notChecked {
		cat := e.cat
		if cat == "" {
			cat = CatUnreachable
		}
		a.LastError = a.URL + ": " + cat
	}
	return a
}

// Remove forgets the agent at rawURL (and stops bridging it).
func (r *Registry) Remove(rawURL string) error {
	u, err := NormalizeURL(rawURL)
	if err != nil {
		return fmt.Errorf("agents: remove: %w", err)
	}
	r.mu.Lock()
	_, ok := r.agents[u]
	delete(r.agents, u)
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("agents: remove %s: %w", u, ErrNoAgent)
	}
	r.changed()
	return r.save()
}

// Listing returns the registered agents, then the discovered ones of the
// cache (Discovered), each group by URL. With detail the errors are as
// they were (the operator's); without, each is its URL and a Category.
func (r *Registry) Listing(detail bool) []protocol.ExternalAgent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]protocol.ExternalAgent, 0, len(r.agents)+len(r.found))
	for _, e := range r.agents {
		if detail {
			out = append(out, clone(e.info))
		} else {
			out = append(out, r.public(e))
		}
	}
	byURL := func(a, b protocol.ExternalAgent) int { return strings.Compare(a.URL, b.URL) }
	slices.SortFunc(out, byURL)
	r.expire(r.cfg.now())
	n := len(out)
	for _, f := range r.found {
		out = append(out, clone(f.info))
	}
	slices.SortFunc(out[n:], byURL)
	return out
}

// PublicError is the last error of the registered agent at u as a caller
// other than the operator reads it: its URL and a Category ("" when it is
// healthy or not registered).
func (r *Registry) PublicError(u string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.agents[u]
	if !ok || e.info.LastError == notChecked {
		return ""
	}
	return r.public(e).LastError
}

// List returns every registered agent, by URL (not the discovered ones).
func (r *Registry) List() []protocol.ExternalAgent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]protocol.ExternalAgent, 0, len(r.agents))
	for _, e := range r.agents {
		out = append(out, clone(e.info))
	}
	slices.SortFunc(out, func(a, b protocol.ExternalAgent) int { return strings.Compare(a.URL, b.URL) })
	return out
}

// Get returns the agent at rawURL.
func (r *Registry) Get(rawURL string) (protocol.ExternalAgent, bool) {
	u, err := NormalizeURL(rawURL)
	if err != nil {
		return protocol.ExternalAgent{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.agents[u]
	if !ok {
		return protocol.ExternalAgent{}, false
	}
	return clone(e.info), true
}

// Call sends args to skill of the agent at u. An unhealthy agent fails at
// once with ErrUnhealthy and its last error; a card older than the TTL (or
// none read since the start) is read again first.
func (r *Registry) Call(ctx context.Context, u, skill string, args json.RawMessage) (json.RawMessage, error) {
	ctx, end, err := r.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	r.mu.Lock()
	e, ok := r.agents[u]
	var (
		card    *a2aclient.Card
		healthy bool
		lastErr string
	)
	if ok {
		card, healthy, lastErr = e.card, e.info.Healthy, e.info.LastError
	}
	r.mu.Unlock()
	switch {
	case !ok:
		return nil, fmt.Errorf("agents: call %s of %s: %w", skill, u, ErrNoAgent)
	case !healthy && lastErr != notChecked:
		return nil, fmt.Errorf("agents: call %s of %s: %w (last check: %s)", skill, u, ErrUnhealthy, lastErr)
	}
	if card == nil || r.cfg.now().Sub(card.FetchedAt) >= r.cfg.ttl {
		if r.check(ctx, u) {
			r.changed()
		}
		r.mu.Lock()
		if e, ok = r.agents[u]; ok {
			card, healthy, lastErr = e.card, e.info.Healthy, e.info.LastError
		}
		r.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("agents: call %s of %s: %w", skill, u, ErrNoAgent)
		}
		if !healthy || card == nil {
			return nil, fmt.Errorf("agents: call %s of %s: %w (last check: %s)", skill, u, ErrUnhealthy, lastErr)
		}
	}
	return r.res.Call(ctx, card, skill, args)
}

// changed calls the OnChange function.
func (r *Registry) changed() {
	if r.cfg.onChange != nil {
		r.cfg.onChange()
	}
}

// clone copies a so that the caller may keep it.
func clone(a protocol.ExternalAgent) protocol.ExternalAgent {
	a.Skills = slices.Clone(a.Skills)
	a.Card = nil
	if a.Skills == nil {
		a.Skills = []protocol.SkillDescriptor{}
	}
	return a
}

// Stored is one agent as the registry's file keeps it.
type Stored struct {
	URL     string    `json:"url"`
	Bridged bool      `json:"bridged,omitempty"`
	Added   time.Time `json:"added"`
	// Agent is what was last read of the agent (its card's name,
	// description and skills), so that a restarted node bridges it before
	// its first check; it starts unhealthy until that check.
	Agent protocol.ExternalAgent `json:"agent"`
}

// fileDoc is the registry's file.
type fileDoc struct {
	Version int      `json:"version"`
	Agents  []Stored `json:"agents"`
}

// DecodeFile parses the registry's file: at most MaxFile bytes, version 1,
// at most maxAgents agents, each with a valid URL, none twice.
func DecodeFile(b []byte, maxAgents int) ([]Stored, error) {
	if len(b) > MaxFile {
		return nil, fmt.Errorf("the file is %d bytes, over %d", len(b), MaxFile)
	}
	var d fileDoc
	if err := protocol.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("not an agents file: %w", err)
	}
	if d.Version != 1 {
		return nil, fmt.Errorf("version %d: want 1", d.Version)
	}
	if len(d.Agents) > maxAgents {
		return nil, fmt.Errorf("%d agents, over the cap of %d", len(d.Agents), maxAgents)
	}
	seen := map[string]bool{}
	for i, s := range d.Agents {
		u, err := NormalizeURL(s.URL)
		if err != nil {
			return nil, fmt.Errorf("agent %d: %w", i, err)
		}
		if seen[u] {
			return nil, fmt.Errorf("agent %d: %s is listed twice", i, u)
		}
		seen[u] = true
		d.Agents[i].URL = u
		d.Agents[i].Agent.Card = nil
	}
	return d.Agents, nil
}

// save writes the registry's file atomically (when it has one).
func (r *Registry) save() error {
	if r.cfg.file == "" {
		return nil
	}
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	r.mu.Lock()
	d := fileDoc{Version: 1, Agents: make([]Stored, 0, len(r.agents))}
	for u, e := range r.agents {
		a := clone(e.info)
		a.Card, a.Healthy, a.LastError, a.Bridged, a.BridgedBy = nil, false, "", false, ""
		d.Agents = append(d.Agents, Stored{URL: u, Bridged: e.info.Bridged, Added: e.added, Agent: a})
	}
	r.mu.Unlock()
	slices.SortFunc(d.Agents, func(a, b Stored) int { return strings.Compare(a.URL, b.URL) })
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("agents: save: %w", err)
	}
	if err := transport.WriteFile(r.cfg.file, append(b, '\n')); err != nil {
		return fmt.Errorf("agents: save %s: %w", r.cfg.file, err)
	}
	return nil
}
