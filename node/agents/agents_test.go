package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/netscope"
	"github.com/mcpv2/mcpv2/node/a2aclient"
)

// fakeResolver stands in for the A2A client in the registry's unit tests
// (the node's tests call real agents): agents by URL, each up or down.
type fakeResolver struct {
	now func() time.Time

	mu      sync.Mutex
	down    map[string]bool
	skills  map[string][]a2aclient.Skill
	fetches map[string]int
	calls   []string

	inflight, maxInflight atomic.Int32
	// gate, when set, holds every fetch (counted in flight) until closed.
	gate chan struct{}
}

func newFake(now func() time.Time) *fakeResolver {
	return &fakeResolver{now: now, down: map[string]bool{}, skills: map[string][]a2aclient.Skill{}, fetches: map[string]int{}}
}

func (f *fakeResolver) Card(ctx context.Context, u string) (*a2aclient.Card, error) {
	return f.card(u)
}

func (f *fakeResolver) card(url string) (*a2aclient.Card, error) {
	n := f.inflight.Add(1)
	defer f.inflight.Add(-1)
	for {
		m := f.maxInflight.Load()
		if n <= m || f.maxInflight.CompareAndSwap(m, n) {
			break
		}
	}
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetches[url]++
	if f.down[url] {
		return nil, fmt.Errorf("a2a agent %s: card: %w", url, &neturl.Error{Op: "Get", URL: url, Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}})
	}
	sk, ok := f.skills[url]
	if !ok {
		sk = []a2aclient.Skill{{ID: "echo", Name: "Echo", Description: "echoes text", Tags: []string{"text"}}}
	}
	return &a2aclient.Card{URL: url, Name: "agent " + url, Description: "a test agent", ProtocolVersion: "1.0",
		Skills: sk, FetchedAt: f.now()}, nil
}

func (f *fakeResolver) Call(ctx context.Context, card *a2aclient.Card, skill string, args json.RawMessage) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, card.URL+" "+skill)
	return json.RawMessage(`{"echo":` + string(args) + `}`), nil
}

func (f *fakeResolver) set(url string, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[url] = down
}

func (f *fakeResolver) fetched(url string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fetches[url]
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newRegistry(t *testing.T, f *fakeResolver, opts ...Option) *Registry {
	t.Helper()
	r, err := New(f, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestAddPersistRestart(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	f := newFake(clk.now)
	file := filepath.Join(t.TempDir(), FileName)
	var changes atomic.Int32
	r := newRegistry(t, f, WithFile(file), WithClock(clk.now), WithOnChange(func() { changes.Add(1) }))

	a, err := r.Add(ctx, "http://a.example/", true)
	if err != nil {
		t.Fatal(err)
	}
	if a.URL != "http://a.example" || !a.Healthy || !a.Bridged || len(a.Skills) != 1 || a.Skills[0].Name != "echo" || a.Skills[0].Tags[0] != "text" {
		t.Fatalf("added %+v", a)
	}
	if _, err := r.Add(ctx, "http://b.example", false); err != nil {
		t.Fatal(err)
	}
	f.set("http://c.example", true)
	if _, err := r.Add(ctx, "http://c.example", false); err == nil {
		t.Fatal("an agent whose card cannot be read was added")
	}
	if _, err := r.Add(ctx, "ftp://d.example", false); !errors.Is(err, ErrBadURL) {
		t.Fatalf("ftp URL: %v, want ErrBadURL", err)
	}
	if changes.Load() != 2 {
		t.Fatalf("%d changes, want 2", changes.Load())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v, want net.ErrClosed", err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file: %v %v", fi, err)
	}

	// A restart keeps both agents, bridged as they were, unchecked until
	// the first round (which New starts at once).
	f2 := newFake(clk.now)
	f2.set("http://b.example", true)
	r2, err := New(f2, WithFile(file), WithClock(clk.now), WithInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	r2.CheckAll(ctx)
	list := r2.List()
	if len(list) != 2 || list[0].URL != "http://a.example" || list[1].URL != "http://b.example" {
		t.Fatalf("after restart: %+v", list)
	}
	if !list[0].Bridged || list[1].Bridged || len(list[0].Skills) != 1 {
		t.Fatalf("bridging or skills lost: %+v", list)
	}
	if !list[0].Healthy || list[1].Healthy || list[1].LastError == "" {
		t.Fatalf("health after the first round: %+v", list)
	}
	if err := r2.Remove("http://a.example/"); err != nil {
		t.Fatal(err)
	}
	if err := r2.Remove("http://a.example"); !errors.Is(err, ErrNoAgent) {
		t.Fatalf("second remove: %v", err)
	}
	got, err := DecodeFile(must(os.ReadFile(file)), DefaultMaxAgents)
	if err != nil || len(got) != 1 || got[0].URL != "http://b.example" {
		t.Fatalf("file after remove: %+v %v", got, err)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestHealthTransitions(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Now()}
	f := newFake(clk.now)
	var changes atomic.Int32
	r := newRegistry(t, f, WithClock(clk.now), WithInterval(time.Hour), WithOnChange(func() { changes.Add(1) }))
	const u = "https://agent.example"
	if _, err := r.Add(ctx, u, true); err != nil {
		t.Fatal(err)
	}
	if out, err := r.Call(ctx, u, "echo", json.RawMessage(`{"x":1}`)); err != nil || string(out) != `{"echo":{"x":1}}` {
		t.Fatalf("call: %s %v", out, err)
	}

	f.set(u, true)
	before := changes.Load()
	r.CheckAll(ctx)
	a, _ := r.Get(u)
	if a.Healthy || a.LastError == "" || changes.Load() != before+1 {
		t.Fatalf("after a failed check: %+v (changes %d→%d)", a, before, changes.Load())
	}
	r.CheckAll(ctx) // still down: no change to report
	if changes.Load() != before+1 {
		t.Fatalf("a second failed check reported a change")
	}
	calls := len(f.calls)
	if _, err := r.Call(ctx, u, "echo", nil); !errors.Is(err, ErrUnhealthy) {
		t.Fatalf("call of an unhealthy agent: %v, want ErrUnhealthy", err)
	}
	if len(f.calls) != calls {
		t.Fatal("an unhealthy agent was called")
	}

	f.set(u, false)
	r.CheckAll(ctx)
	if a, _ := r.Get(u); !a.Healthy || a.LastError != "" {
		t.Fatalf("after it answered again: %+v", a)
	}
	if _, err := r.Call(ctx, u, "echo", nil); err != nil {
		t.Fatal(err)
	}
}

func TestTTL(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Now()}
	f := newFake(clk.now)
	r := newRegistry(t, f, WithClock(clk.now), WithInterval(time.Hour), WithTTL(300*time.Second))
	const u = "http://a.example"
	f.set("http://down.example", true)
	res, err := r.Discover(ctx, []string{u, "http://down.example", "nope"})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Healthy || res[1].Healthy || res[1].LastError == "" || res[2].LastError == "" {
		t.Fatalf("discover: %+v", res)
	}
	if len(r.List()) != 0 {
		t.Fatalf("discover registered %d agents, want 0 (it only caches)", len(r.List()))
	}
	if _, err := r.Add(ctx, u, false); err != nil {
		t.Fatal(err)
	}
	if f.fetched(u) != 2 {
		t.Fatalf("%d fetches", f.fetched(u))
	}
	// Within the TTL: from the registry, for discover and calls alike.
	clk.add(299 * time.Second)
	if _, err := r.Discover(ctx, []string{u}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Call(ctx, u, "echo", nil); err != nil {
		t.Fatal(err)
	}
	if f.fetched(u) != 2 {
		t.Fatalf("%d fetches within the TTL, want 2", f.fetched(u))
	}
	// Past it: read again by the call; a discover answers the registered
	// agent without a fetch.
	clk.add(2 * time.Second)
	if _, err := r.Call(ctx, u, "echo", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Discover(ctx, []string{u}); err != nil {
		t.Fatal(err)
	}
	if f.fetched(u) != 3 {
		t.Fatalf("%d fetches after the TTL, want 3 (the call's refresh, then the discover from the registry)", f.fetched(u))
	}
}

func TestCaps(t *testing.T) {
	ctx := context.Background()
	f := newFake(time.Now)
	r := newRegistry(t, f, WithMaxAgents(6), WithParallel(2), WithInterval(time.Hour))
	for i := range 6 {
		if _, err := r.Add(ctx, fmt.Sprintf("http://a%d.example", i), false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Add(ctx, "http://more.example", false); !errors.Is(err, ErrFull) {
		t.Fatalf("seventh agent: %v, want ErrFull", err)
	}
	if _, err := r.Add(ctx, "http://a0.example", true); err != nil {
		t.Fatalf("re-adding a registered agent when full: %v", err)
	}
	res, _ := r.Discover(ctx, []string{"http://more.example"})
	if res[0].LastError != "" || !res[0].Discovered || len(r.List()) != 6 {
		t.Fatalf("discover past the cap (it only caches): %+v, %d agents", res, len(r.List()))
	}
	if _, err := r.Discover(ctx, make([]string, MaxDiscover+1)); err == nil {
		t.Fatal("a discover of too many URLs was taken")
	}
	// Every fetch is held: a round of 6 checks must stop at 2 in flight.
	// (Without the cap all 6 enter; the wait gives them the time to.)
	f.maxInflight.Store(0)
	f.gate = make(chan struct{})
	round := make(chan struct{})
	go func() { r.CheckAll(ctx); close(round) }()
	for f.inflight.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	m := f.maxInflight.Load()
	close(f.gate)
	<-round
	if m != 2 {
		t.Fatalf("%d checks at once, want 2 (the cap)", m)
	}
	for _, bad := range []string{"", "http://", "https://u:p@x.example", "mailto:x@y", string(make([]byte, MaxURL+1))} {
		if _, err := NormalizeURL(bad); !errors.Is(err, ErrBadURL) {
			t.Errorf("NormalizeURL(%.20q): %v, want ErrBadURL", bad, err)
		}
	}
	// The refusal of a URL with user info does not echo its password.
	if _, err := NormalizeURL("https://u:hunter2@x.example/a"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("NormalizeURL with a password: %v, want a refusal that redacts it", err)
	}
	if u, err := NormalizeURL(" https://x.example/a/#top "); err != nil || u != "https://x.example/a" {
		t.Errorf("NormalizeURL: %q, %v, want https://x.example/a (no fragment, no trailing slash)", u, err)
	}
}

func TestScheduledChecks(t *testing.T) {
	// The owned goroutine checks on its own: a down agent turns unhealthy
	// without anyone calling CheckAll.
	f := newFake(time.Now)
	changed := make(chan struct{}, 8)
	r := newRegistry(t, f, WithInterval(time.Second), WithOnChange(func() { changed <- struct{}{} }))
	const u = "http://a.example"
	if _, err := r.Add(context.Background(), u, false); err != nil {
		t.Fatal(err)
	}
	<-changed // the add
	f.set(u, true)
	<-changed // a scheduled check found it down
	if a, _ := r.Get(u); a.Healthy {
		t.Fatalf("still healthy: %+v", a)
	}
}

// TestDiscoverOnlyCaches: the discover route's agents go to a cache of
// their own (issue 23 review item 2): not registered, not persisted, not
// health-checked, not counted against the cap, LRU within its own cap,
// gone after the TTL; the listing shows them marked Discovered.
func TestDiscoverOnlyCaches(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Now()}
	f := newFake(clk.now)
	file := filepath.Join(t.TempDir(), FileName)
	var changes atomic.Int32
	r := newRegistry(t, f, WithFile(file), WithClock(clk.now), WithInterval(time.Hour), WithMaxAgents(1), WithMaxFound(2),
		WithOnChange(func() { changes.Add(1) }))
	res, err := r.Discover(ctx, []string{"http://x0.example", "http://x1.example", "http://x2.example"})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range res {
		if !a.Healthy || !a.Discovered || a.LastError != "" {
			t.Fatalf("discover %d: %+v", i, a)
		}
	}
	if len(r.List()) != 0 || changes.Load() != 0 {
		t.Fatalf("discover registered %+v (%d changes)", r.List(), changes.Load())
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("discover wrote the registry's file: %v", err)
	}
	// The operator's add still has the whole registry.
	if _, err := r.Add(ctx, "http://real.example", true); err != nil {
		t.Fatalf("the operator's add after discovers: %v", err)
	}
	// Own cap 2, LRU: x0 is gone, x1 and x2 are listed, marked.
	all := r.Listing(true)
	var urls []string
	for _, a := range all {
		urls = append(urls, fmt.Sprintf("%s %v", a.URL, a.Discovered))
	}
	if fmt.Sprint(urls) != "[http://real.example false http://x1.example true http://x2.example true]" {
		t.Fatalf("listing: %v", urls)
	}
	// Health checks leave the cache alone.
	before := f.fetched("http://x1.example")
	r.CheckAll(ctx)
	if f.fetched("http://x1.example") != before {
		t.Fatal("a health check fetched a discovered agent")
	}
	// Within the TTL a discover is answered from the cache; past it the
	// entry is gone and fetched again.
	if _, err := r.Discover(ctx, []string{"http://x1.example"}); err != nil || f.fetched("http://x1.example") != before {
		t.Fatalf("discover within the TTL fetched again: %v", err)
	}
	clk.add(DefaultTTL + time.Second)
	if l := r.Listing(true); len(l) != 1 {
		t.Fatalf("listing past the TTL: %+v", l)
	}
	if _, err := r.Discover(ctx, []string{"http://x1.example"}); err != nil || f.fetched("http://x1.example") != before+1 {
		t.Fatalf("discover past the TTL: %v, %d fetches", err, f.fetched("http://x1.example"))
	}
	for _, a := range r.Listing(true) {
		if a.Card != nil {
			t.Fatalf("a listing carries the raw card of %s", a.URL)
		}
	}
}

// TestDiscoverCoarseErrors: the discover route's errors name the URL and
// a category, never the dial error (review item 11).
func TestDiscoverCoarseErrors(t *testing.T) {
	ctx := context.Background()
	f := newFake(time.Now)
	r := newRegistry(t, f, WithInterval(time.Hour))
	f.set("http://down.example", true)
	res, err := r.Discover(ctx, []string{"http://down.example", "nope"})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].LastError != "http://down.example: unreachable" {
		t.Fatalf("down: %q", res[0].LastError)
	}
	if res[1].LastError == "" || res[1].Healthy {
		t.Fatalf("bad URL: %+v", res[1])
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{&neturl.Error{Op: "Get", URL: "http://x", Err: &netscope.Error{Addr: netip.MustParseAddr("10.1.2.3"), Class: "private"}}, CatScope},
		{fmt.Errorf("card: %w", context.DeadlineExceeded), CatTimeout},
		{&neturl.Error{Op: "Get", URL: "http://x", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, CatUnreachable},
		{errors.New("card is not a JSON object"), CatBadCard},
	} {
		if got := Category(c.err); got != c.want {
			t.Errorf("Category(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	// A registered agent's error is detailed for the operator, coarse for
	// everyone else.
	f.set("http://reg.example", false)
	if _, err := r.Add(ctx, "http://reg.example", false); err != nil {
		t.Fatal(err)
	}
	f.set("http://reg.example", true)
	r.CheckAll(ctx)
	if l := r.Listing(true); !strings.Contains(l[0].LastError, "connection refused") {
		t.Fatalf("operator's listing: %q", l[0].LastError)
	}
	if l := r.Listing(false); l[0].LastError != "http://reg.example: unreachable" {
		t.Fatalf("public listing: %q", l[0].LastError)
	}
}

// blockRes blocks each card fetch until its context ends or release
// closes.
type blockRes struct {
	*fakeResolver
	entered chan struct{}
	release chan struct{}
}

func (b *blockRes) Card(ctx context.Context, url string) (*a2aclient.Card, error) {
	b.entered <- struct{}{}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.release:
	}
	return b.fakeResolver.card(url)
}

// TestCloseStopsAdd: Close cancels a running Add and waits for it; the Add
// neither saves nor reports a change after Close (review item 29).
func TestCloseStopsAdd(t *testing.T) {
	b := &blockRes{fakeResolver: newFake(time.Now), entered: make(chan struct{}, 1), release: make(chan struct{})}
	file := filepath.Join(t.TempDir(), FileName)
	var changes atomic.Int32
	r, err := New(b, WithFile(file), WithInterval(time.Hour), WithTimeout(time.Hour), WithOnChange(func() { changes.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Add(context.Background(), "http://a.example", true)
		done <- err
	}()
	<-b.entered
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	close(b.release)
	if err := <-done; err == nil {
		t.Fatal("an Add running at Close succeeded")
	}
	if changes.Load() != 0 {
		t.Fatal("an Add reported a change after Close")
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an Add wrote the file after Close: %v", err)
	}
	if _, err := r.Add(context.Background(), "http://b.example", false); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Add after Close: %v, want net.ErrClosed", err)
	}
}
