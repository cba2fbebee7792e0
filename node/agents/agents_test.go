package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
}

func newFake(now func() time.Time) *fakeResolver {
	return &fakeResolver{now: now, down: map[string]bool{}, skills: map[string][]a2aclient.Skill{}, fetches: map[string]int{}}
}

func (f *fakeResolver) Card(ctx context.Context, url string) (*a2aclient.Card, error) {
	n := f.inflight.Add(1)
	defer f.inflight.Add(-1)
	for {
		m := f.maxInflight.Load()
		if n <= m || f.maxInflight.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(time.Millisecond) // lets checks overlap, so that a missing cap shows
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetches[url]++
	if f.down[url] {
		return nil, fmt.Errorf("dial %s: connection refused", url)
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
	if len(r.List()) != 1 {
		t.Fatalf("discover registered %d agents, want 1 (the ones that answered)", len(r.List()))
	}
	if f.fetched(u) != 1 {
		t.Fatalf("%d fetches", f.fetched(u))
	}
	// Within the TTL: from the cache, for discover and calls alike.
	clk.add(299 * time.Second)
	if _, err := r.Discover(ctx, []string{u}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Call(ctx, u, "echo", nil); err != nil {
		t.Fatal(err)
	}
	if f.fetched(u) != 1 {
		t.Fatalf("%d fetches within the TTL, want 1", f.fetched(u))
	}
	// Past it: read again.
	clk.add(2 * time.Second)
	if _, err := r.Call(ctx, u, "echo", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Discover(ctx, []string{u}); err != nil {
		t.Fatal(err)
	}
	if f.fetched(u) != 2 {
		t.Fatalf("%d fetches after the TTL, want 2 (the call's refresh, then the discover from the cache)", f.fetched(u))
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
	if res[0].LastError == "" || len(r.List()) != 6 {
		t.Fatalf("discover past the cap: %+v, %d agents", res, len(r.List()))
	}
	if _, err := r.Discover(ctx, make([]string, MaxDiscover+1)); err == nil {
		t.Fatal("a discover of too many URLs was taken")
	}
	f.maxInflight.Store(0)
	r.CheckAll(ctx)
	if m := f.maxInflight.Load(); m > 2 || m < 1 {
		t.Fatalf("%d checks at once, want at most 2", m)
	}
	for _, bad := range []string{"", "http://", "https://u:p@x.example", "mailto:x@y", string(make([]byte, MaxURL+1))} {
		if _, err := NormalizeURL(bad); !errors.Is(err, ErrBadURL) {
			t.Errorf("NormalizeURL(%.20q): %v, want ErrBadURL", bad, err)
		}
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
