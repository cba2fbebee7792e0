package discovery

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
)

// meshSkills are the skills of the mesh test, each with its tags (no tag
// is also a skill name, so a find by skill name matches by name only).
var meshSkills = []struct {
	name string
	tags []string
}{
	{"translate", []string{"text", "language"}},
	{"summarize", []string{"text"}},
	{"ocr", []string{"image", "text-extraction"}},
	{"transcribe", []string{"audio"}},
	{"classify", []string{"ml"}},
	{"embed", []string{"ml", "vector"}},
	{"search", []string{"web"}},
	{"codegen", []string{"code"}},
	{"sql", []string{"code", "data"}},
	{"vision", []string{"image"}},
}

// meshNodeSkills returns the indexes in meshSkills of node i's skills: one
// or two, every skill held by at least one node when n >= len(meshSkills).
func meshNodeSkills(i int) []int {
	s := []int{i % len(meshSkills)}
	if i%3 == 0 {
		if j := (i + 4) % len(meshSkills); j != s[0] {
			s = append(s, j)
		}
	}
	return s
}

// pct returns the p-th percentile (nearest rank) of sorted xs.
func pct[T any](xs []T, p float64) T {
	i := int(float64(len(xs))*p/100+0.999999) - 1
	return xs[max(0, min(i, len(xs)-1))]
}

func TestDHTMesh(t *testing.T) {
	n := 50
	if testing.Short() {
		n = 12
	}
	runMesh(t, n)
}

// runMesh builds an n-node mesh where every node publishes a card, then has
// every node find every advertised skill, and logs the timings (-v).
func runMesh(t *testing.T, n int) {
	start := time.Now()
	// Without auto refresh a node refreshes its routing table when it
	// bootstraps and when the library's bootstrap logic asks, not also on
	// every early routing-table change: the same tables, less CPU.
	nodes := newMesh(t, n, withDHTOptions(dht.DisableAutoRefresh()))
	tBoot := time.Since(start)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Who provides what.
	providers := map[string][]string{} // skill -> sorted PeerIDs
	start = time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	errs := make(chan error, n)
	for i, nd := range nodes {
		card := testCard(nd.h.ID(), fmt.Sprintf("agent-%02d", i), nil)
		for _, j := range meshNodeSkills(i) {
			sk := meshSkills[j]
			providers[sk.name] = append(providers[sk.name], nd.h.ID().String())
			card.Skills = append(card.Skills, testCard(nd.h.ID(), "", []string{sk.name}, sk.tags...).Skills...)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := nd.d.Publish(ctx, card); err != nil {
				errs <- fmt.Errorf("node %d: publish: %w", i, err)
			}
		}()
	}
	wg.Wait()
	tPub := time.Since(start)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var skills []string
	for s, ids := range providers {
		sort.Strings(ids)
		skills = append(skills, s)
	}
	sort.Strings(skills)
	if len(skills) != len(meshSkills) {
		t.Fatalf("%d skills advertised, want %d", len(skills), len(meshSkills))
	}

	// Every node finds every skill: the full, exact set of providers.
	type job struct {
		finder int
		skill  string
	}
	var jobs []job
	for i := range nodes {
		for _, s := range skills {
			jobs = append(jobs, job{i, s})
		}
	}
	const parallel = 4
	var (
		mu       sync.Mutex
		failures []string
	)
	runJobs := func(jobs []job, f func(job)) {
		ch := make(chan job)
		var wg sync.WaitGroup
		for range parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range ch {
					f(j)
				}
			}()
		}
		for _, j := range jobs {
			ch <- j
		}
		close(ch)
		wg.Wait()
	}
	// stats collects latencies and lookup traces.
	type stats struct {
		lat               []time.Duration
		queried, distinct []int
		hops              map[int]int
	}
	add := func(st *stats, lat time.Duration, tr lookupTrace) {
		st.lat = append(st.lat, lat)
		st.queried = append(st.queried, tr.queried)
		st.distinct = append(st.distinct, tr.distinct)
		if st.hops == nil {
			st.hops = map[int]int{}
		}
		st.hops[tr.hops]++
	}

	// Every node finds every skill; FindWithStats traces the two provider
	// lookups of a Find (skill and tag CID) by their query events; the card
	// fetches ask the connected providers directly and emit none.
	var finds stats
	start = time.Now()
	runJobs(jobs, func(j job) {
		d := nodes[j.finder].d
		t0 := time.Now()
		res, st, err := d.FindWithStats(ctx, j.skill, n)
		lat := time.Since(t0)
		tr := lookupTrace{queried: st.Requests, distinct: st.PeersAsked, hops: st.Hops}
		var got []string
		for _, r := range res {
			got = append(got, r.Card.PeerID)
			if r.Score < ScoreName {
				err = fmt.Errorf("%s scored %v, below a name match", r.Card.PeerID, r.Score)
			}
		}
		sort.Strings(got)
		mu.Lock()
		defer mu.Unlock()
		add(&finds, lat, tr)
		if err != nil || !slices.Equal(got, providers[j.skill]) {
			failures = append(failures, fmt.Sprintf("node %d finds %s: %d of %d providers (err %v)", j.finder, j.skill, len(got), len(providers[j.skill]), err))
		}
	})
	tFind := time.Since(start)

	// One provider lookup alone, for a sample of two skills per finder.
	var sample []job
	for i, j := range jobs {
		if i%len(skills) < 2 {
			sample = append(sample, job{j.finder, skills[(j.finder+i)%len(skills)]})
		}
	}
	var looks stats
	runJobs(sample, func(j job) {
		d := nodes[j.finder].d
		c := SkillCID(j.skill)
		lctx, finish := traceLookup(ctx, d, string(c.Hash()))
		t0 := time.Now()
		found, _ := d.findProviders(lctx, c)
		lat := time.Since(t0)
		tr := finish()
		mu.Lock()
		defer mu.Unlock()
		add(&looks, lat, tr)
		if len(found) != len(providers[j.skill]) {
			failures = append(failures, fmt.Sprintf("node %d: provider lookup of %s: %d of %d providers", j.finder, j.skill, len(found), len(providers[j.skill])))
		}
	})

	for _, f := range failures {
		t.Error(f)
	}
	if len(failures) > 0 {
		t.Fatalf("%d of %d finds and lookups failed", len(failures), len(jobs)+len(sample))
	}

	rt := 0
	for _, nd := range nodes {
		rt += nd.d.DHT().RoutingTable().Size()
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	t.Logf("%d-node mesh: bootstrap %s, publish %s, %d finds in %s (%d in parallel); mean routing table %.1f peers",
		n, tBoot.Round(time.Millisecond), tPub.Round(time.Millisecond), len(jobs), tFind.Round(time.Millisecond), parallel, float64(rt)/float64(n))
	t.Logf("%-44s %6s %10s %10s %10s", "", "count", "p50", "p95", "max")
	for _, row := range []struct {
		name string
		st   stats
	}{{"Find (2 lookups, cards, rank)", finds}, {"provider lookup alone", looks}} {
		st := row.st
		slices.Sort(st.lat)
		slices.Sort(st.queried)
		slices.Sort(st.distinct)
		last := len(st.lat) - 1
		t.Logf("%-44s %6d %10s %10s %10s", row.name+": time", len(st.lat), ms(pct(st.lat, 50)), ms(pct(st.lat, 95)), ms(st.lat[last]))
		t.Logf("%-44s %6d %10d %10d %10d", row.name+": requests", len(st.queried), pct(st.queried, 50), pct(st.queried, 95), st.queried[last])
		t.Logf("%-44s %6d %10d %10d %10d", row.name+": peers asked", len(st.distinct), pct(st.distinct, 50), pct(st.distinct, 95), st.distinct[last])
		var hk []int
		for h := range st.hops {
			hk = append(hk, h)
		}
		slices.Sort(hk)
		var hl []string
		for _, h := range hk {
			hl = append(hl, fmt.Sprintf("%d hop(s): %d", h, st.hops[h]))
		}
		t.Logf("%-44s %s", row.name+": depth", strings.Join(hl, ", "))
	}
}

// BenchmarkFind measures one Find on a 12-node mesh where every node
// publishes a card, finders and skills in turn:
// go test -run '^$' -bench Find ./discovery/
func BenchmarkFind(b *testing.B) {
	const n = 12
	nodes := newMesh(b, n, withDHTOptions(dht.DisableAutoRefresh()))
	ctx := context.Background()
	for i, nd := range nodes {
		card := testCard(nd.h.ID(), fmt.Sprintf("agent-%02d", i), nil)
		for _, j := range meshNodeSkills(i) {
			sk := meshSkills[j]
			card.Skills = append(card.Skills, testCard(nd.h.ID(), "", []string{sk.name}, sk.tags...).Skills...)
		}
		if err := nd.d.Publish(ctx, card); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		i++
		res, err := nodes[i%n].d.Find(ctx, meshSkills[i%len(meshSkills)].name, 0)
		if err != nil || len(res) == 0 {
			b.Fatalf("Find: %d results, %v", len(res), err)
		}
	}
}
