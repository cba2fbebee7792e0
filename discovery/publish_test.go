package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	kadpb "github.com/libp2p/go-libp2p-kad-dht/pb"
	kb "github.com/libp2p/go-libp2p-kbucket"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	"github.com/libp2p/go-msgio"
	"google.golang.org/protobuf/proto"
)

// msgPublished is the message of the log record that closes a complete
// announcement (announce).
const msgPublished = "discovery: card published"

// pubRecord is one captured log record.
type pubRecord struct {
	time  time.Time
	level slog.Level
	msg   string
	attrs map[string]slog.Value
}

// int returns the integer attribute key, -1 when it is missing or not an
// integer.
func (r pubRecord) int(key string) int64 {
	v, ok := r.attrs[key]
	switch {
	case !ok:
		return -1
	case v.Kind() == slog.KindInt64:
		return v.Int64()
	case v.Kind() == slog.KindUint64:
		return int64(v.Uint64())
	}
	return -1
}

// start returns when the announcement the record closes started: its time
// less its "took".
func (r pubRecord) start() time.Time {
	v, ok := r.attrs["took"]
	if !ok || v.Kind() != slog.KindDuration {
		return r.time
	}
	return r.time.Add(-v.Duration())
}

// String shows the record as a text handler would, for failure messages.
func (r pubRecord) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %q", r.time.Format("15:04:05.000"), r.level, r.msg)
	keys := make([]string, 0, len(r.attrs))
	for k := range r.attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%v", k, r.attrs[k])
	}
	return b.String()
}

// pubLog is a slog handler that keeps every record, Debug included.
type pubLog struct {
	mu   sync.Mutex
	recs []pubRecord
}

func (l *pubLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *pubLog) Handle(_ context.Context, r slog.Record) error {
	rec := pubRecord{time: r.Time, level: r.Level, msg: r.Message, attrs: map[string]slog.Value{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Resolve()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, rec)
	return nil
}

// WithAttrs and WithGroup return l itself: the package logs through its
// logger as given, without With.
func (l *pubLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *pubLog) WithGroup(string) slog.Handler      { return l }

// logger returns a logger writing to l.
func (l *pubLog) logger() *slog.Logger { return slog.New(l) }

// find returns the records with message msg, oldest first.
func (l *pubLog) find(msg string) []pubRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []pubRecord
	for _, r := range l.recs {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// pubHolds reports whether d's provider store names id as a provider of c.
func pubHolds(t testing.TB, d *Discovery, c cid.Cid, id peer.ID) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	provs, err := d.DHT().ProviderStore().GetProviders(ctx, c.Hash())
	if err != nil {
		t.Fatalf("provider store of %s: %v", d.h.ID(), err)
	}
	return slices.ContainsFunc(provs, func(ai peer.AddrInfo) bool { return ai.ID == id })
}

// pubJoin builds n server nodes that bootstrap from boot, a few at a time,
// and waits for their bootstraps.
func pubJoin(t testing.TB, boot []node, n int, opts ...Option) []node {
	t.Helper()
	var ais []peer.AddrInfo
	for _, b := range boot {
		ais = append(ais, b.addrInfo())
	}
	nodes := make([]node, n)
	for i := range nodes {
		h := newHost(t)
		nodes[i] = node{h: h, d: newDisc(t, h, append([]Option{WithBootstrap(ais...)}, opts...)...)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	errs := make(chan error, n)
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			// A loaded machine fails a dial now and then: the join is not
			// what these tests test, so it is tried three times.
			var err error
			for range 3 {
				if err = nodes[i].d.Bootstrap(ctx); err == nil || ctx.Err() != nil {
					break
				}
			}
			if err != nil {
				errs <- fmt.Errorf("joining node %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return nodes
}

// waitUntil polls cond every 20 ms until it holds (true) or timeout
// passes (false).
func waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// inRT reports whether d's routing table holds id.
func inRT(d *Discovery, id peer.ID) bool { return d.DHT().RoutingTable().Find(id) != "" }

// announcedRT returns the routing-table size that the last complete
// announcement of d recorded, and the size at which growth starts the next.
func announcedRT(d *Discovery) (size, next int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.announcedRT, max(d.announcedRT+growthMin, int(float64(d.announcedRT)*growthFactor))
}

// isPending reports whether d's last announcement asked for a retry.
func isPending(d *Discovery) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pending
}

// growthNode is the node of the growth tests: it joins a two-server mesh
// and publishes a card with skill growth-skill and tag growth-tag while its
// routing table holds those two only. No timer republish comes during the
// test (one hour), nor a retry (the announcement reached both peers), so
// whatever announcement follows is one that growth started.
func growthNode(t *testing.T) (seed []node, a node, logs *pubLog, opts []Option) {
	t.Helper()
	opts = []Option{WithRepublish(time.Hour), WithRecordTTL(3 * time.Hour)}
	seed = newMesh(t, 2, opts...)
	logs = new(pubLog)
	a.h = newHost(t)
	a.d = newDisc(t, a.h, append([]Option{WithBootstrap(seed[0].addrInfo()), WithLogger(logs.logger())}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.d.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	eventuallyRT(t, a.d, 30*time.Second, "both seed servers in A's routing table", func() bool {
		return inRT(a.d, seed[0].h.ID()) && inRT(a.d, seed[1].h.ID())
	})
	if err := a.d.Publish(ctx, testCard(a.h.ID(), "early", []string{"growth-skill"}, "growth-tag")); err != nil {
		t.Fatal(err)
	}
	recs := logs.find(msgPublished)
	if len(recs) != 1 || recs[0].level != slog.LevelInfo || recs[0].int("closest") != 2 || recs[0].int("card_acks") != 2 ||
		recs[0].int("least_acks") != 2 || recs[0].int("under_replicated") != 0 {
		t.Fatalf("first announcement on a 3-node mesh: %v; want one Info record with closest=2, card_acks=2, least_acks=2, under_replicated=0", recs)
	}
	if isPending(a.d) {
		t.Fatal("an announcement that reached every peer asks for a retry")
	}
	return seed, a, logs, opts
}

// holdsAll reports whether d holds a's card and a as provider of every cid.
func holdsAll(t testing.TB, d *Discovery, a peer.ID, cids ...cid.Cid) bool {
	t.Helper()
	for _, c := range cids {
		if !pubHolds(t, d, c, a) {
			return false
		}
	}
	return storedValue(t, d, CardKey(a)) != nil
}

// TestGrowthRepublish: a node that published while the mesh had two DHT
// servers reaches the fifteen that joined after it, without any timer
// republish, because its routing table grew.
//
// Without the growth trigger the test fails: the first newcomer joins, is
// in A's routing table, and holds nothing (checked below: joining does not
// bring records, and provider records reach a peer only by the provider's
// own ADD_PROVIDER); with a one-hour republish nothing else would ever send
// A's records to the newcomers, so the final wait, for newcomers among the
// k closest peers of A's keys to hold them, would time out.
func TestGrowthRepublish(t *testing.T) {
	seed, a, logs, opts := growthNode(t)
	skill, tag := SkillCID("growth-skill"), TagCID("growth-tag")
	if size, next := announcedRT(a.d); size != 2 || next != 5 {
		t.Fatalf("announced routing table %d, next growth at %d; want 2 and 5", size, next)
	}

	// One newcomer: not enough growth; it holds nothing.
	first := pubJoin(t, seed, 1, opts...)
	eventuallyRT(t, a.d, 30*time.Second, "the first newcomer in A's routing table", func() bool { return inRT(a.d, first[0].h.ID()) })
	if pubHolds(t, first[0].d, skill, a.h.ID()) || pubHolds(t, first[0].d, tag, a.h.ID()) || storedValue(t, first[0].d, CardKey(a.h.ID())) != nil {
		t.Fatal("a newcomer holds A's records though A did not announce since it joined")
	}
	if n := len(logs.find(msgPublished)); n != 1 {
		t.Fatalf("%d announcements after one newcomer; want still 1 (growth starts at 3 more peers)", n)
	}

	// Fourteen more: A's routing table grows past the threshold.
	joinStart := time.Now()
	more := pubJoin(t, seed, 14, opts...)
	newcomers := append(first, more...)
	held := 0
	for _, n := range newcomers {
		if holdsAll(t, n.d, a.h.ID(), skill, tag) {
			held++
		}
	}
	t.Logf("15 newcomers joined in %s; %d of them held A's records right after", time.Since(joinStart).Round(time.Millisecond), held)

	// The newcomers among the k closest peers of each key (all the nodes
	// but A): some of them must hold A's records. A growth announcement
	// starts once growthMin newcomers are in A's routing table, and reaches
	// them at least; those that join while it runs may miss it (see
	// TestGrowthDuringAnnouncement), so more is not required here.
	isNew := map[peer.ID]*Discovery{}
	var others []peer.ID
	for _, n := range newcomers {
		isNew[n.h.ID()] = n.d
	}
	for _, n := range slices.Concat(seed, newcomers) {
		others = append(others, n.h.ID())
	}
	closestNew := map[cid.Cid][]*Discovery{}
	for _, c := range []cid.Cid{skill, tag} {
		closest := kb.SortClosestPeers(others, kb.ConvertKey(string(c.Hash())))
		for _, p := range closest[:min(BucketSize, len(closest))] {
			if d, ok := isNew[p]; ok {
				closestNew[c] = append(closestNew[c], d)
			}
		}
	}
	holding := func(c cid.Cid) int {
		n := 0
		for _, d := range closestNew[c] {
			if pubHolds(t, d, c, a.h.ID()) && storedValue(t, d, CardKey(a.h.ID())) != nil {
				n++
			}
		}
		return n
	}
	waitStart := time.Now()
	if !waitUntil(60*time.Second, func() bool {
		for c, ds := range closestNew {
			if holding(c) < min(len(ds), growthMin) {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("60 s after the joins: newcomers among the k closest holding A's card and skill record %d of %d, tag record %d of %d; want %d at least\nannouncements: %v",
			holding(skill), len(closestNew[skill]), holding(tag), len(closestNew[tag]), growthMin, logs.find(msgPublished))
	}
	t.Logf("%s after the joins ended, newcomers among the k closest holding A's records: skill %d of %d, tag %d of %d; A's routing table %d",
		time.Since(waitStart).Round(time.Millisecond), holding(skill), len(closestNew[skill]), holding(tag), len(closestNew[tag]), a.d.DHT().RoutingTable().Size())

	recs := logs.find(msgPublished)
	// Each growth announcement needs growthMin more peers: 15 newcomers
	// allow 5 at most.
	if len(recs) < 2 || len(recs) > 1+15/growthMin {
		t.Fatalf("%d announcements; want the first and 1 to %d started by growth:\n%v", len(recs), 15/growthMin, recs)
	}
	// From the second on: the first waits for the Publish's announcement,
	// which on a loaded machine takes seconds.
	for i := 2; i < len(recs); i++ {
		if recs[i].level != slog.LevelDebug {
			t.Errorf("growth announcement %d logged at %s; want Debug (complete, not the first)", i, recs[i].level)
		}
		if gap := recs[i].start().Sub(recs[i-1].start()); gap < growthGap-100*time.Millisecond {
			t.Errorf("announcement %d started %s after the previous one started; want at least growthGap %s", i, gap, growthGap)
		}
		t.Logf("announcement %d: %v", i, recs[i])
	}

	// A find from the node that joined last returns A.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	last := newcomers[len(newcomers)-1]
	res, st, err := last.d.FindWithStats(ctx, "growth-skill", 0)
	if err != nil || len(res) != 1 || res[0].Card.PeerID != a.h.ID().String() {
		t.Fatalf("Find(growth-skill) from the last newcomer = %+v, %v (%s)", res, err, st)
	}
}

// TestGrowthAtThreshold: a node whose routing table reaches the growth
// threshold exactly, one peer at a time, announces again.
//
// kad-dht adds a peer to its routing table only after a FIND_NODE round
// trip (peerFound → lookupCheck → validPeerFound → rtPeerLoop), well after
// identify completes with it: a growth check made on identify sees the
// table without the peer that just arrived, and when that peer is the one
// that brings the table to the threshold, no check ever sees it and the
// newcomers get nothing before the timer republish. growthLoop wakes on
// the routing table's own add callback (rtHost), so it does.
func TestGrowthAtThreshold(t *testing.T) {
	seed, a, logs, opts := growthNode(t)
	skill := SkillCID("growth-skill")
	size, next := announcedRT(a.d)
	var newcomers []node
	for i := 0; a.d.DHT().RoutingTable().Size() < next; i++ {
		if i > next-size {
			t.Fatalf("%d newcomers and A's routing table is at %d of %d", i, a.d.DHT().RoutingTable().Size(), next)
		}
		n := pubJoin(t, seed, 1, opts...)[0]
		eventuallyRT(t, a.d, 30*time.Second, "the newcomer in A's routing table", func() bool { return inRT(a.d, n.h.ID()) })
		newcomers = append(newcomers, n)
	}
	reached := time.Now()
	t.Logf("A's routing table reached %d (threshold %d) with %d newcomers", a.d.DHT().RoutingTable().Size(), next, len(newcomers))
	held := func() bool {
		for _, n := range newcomers {
			if !holdsAll(t, n.d, a.h.ID(), skill) {
				return false
			}
		}
		return true
	}
	if waitUntil(growthGap+10*time.Second, held) {
		t.Logf("newcomers held A's records %s after the threshold", time.Since(reached).Round(time.Millisecond))
		return
	}
	without := 0
	for _, n := range newcomers {
		if !holdsAll(t, n.d, a.h.ID(), skill) {
			without++
		}
	}
	t.Fatalf("A's routing table reached the growth threshold (%d) %s ago with %d newcomers, and %d announcement(s) in all: %d newcomers lack A's records",
		next, time.Since(reached).Round(time.Millisecond), len(newcomers), len(logs.find(msgPublished)), without)
}

// slowHolder is a DHT peer that stores nothing but acknowledges every put;
// once armed, it holds its answer to the first PUT_VALUE of key until
// released, holdMax at most (under replicate's putTimeout, so the put is
// acknowledged all the same).
type slowHolder struct {
	h         host.Host
	key       string
	armed     atomic.Bool
	held      chan struct{} // closed when the hold starts
	release   chan struct{} // closed to end it
	heldOnce  sync.Once
	relOnce   sync.Once
	holdMax   time.Duration
	holdCount atomic.Int64
}

// newSlowHolder starts a slow holder for key on a fresh host.
func newSlowHolder(t testing.TB, key string) *slowHolder {
	t.Helper()
	s := &slowHolder{h: newHost(t), key: key, held: make(chan struct{}), release: make(chan struct{}), holdMax: putTimeout - 2*time.Second}
	s.h.SetStreamHandler(kadProto, s.serve)
	t.Cleanup(s.let)
	return s
}

// let ends the hold.
func (s *slowHolder) let() { s.relOnce.Do(func() { close(s.release) }) }

func (s *slowHolder) serve(st network.Stream) {
	serveKad(st, func(m *kadpb.Message) (*kadpb.Message, bool) {
		resp := kadpb.NewMessage(m.GetType(), m.GetKey(), 0)
		switch m.GetType() {
		case kadpb.Message_ADD_PROVIDER:
			return nil, true
		case kadpb.Message_PUT_VALUE:
			if s.armed.Load() && string(m.GetKey()) == s.key && s.holdCount.Add(1) == 1 {
				s.heldOnce.Do(func() { close(s.held) })
				select {
				case <-s.release:
				case <-time.After(s.holdMax):
				}
			}
			resp.Record = m.GetRecord()
		}
		return resp, true
	})
}

// serveKad reads DHT requests from st until it fails and writes answer's
// reply to each: none when the reply is nil (ADD_PROVIDER has none), and a
// reset of the stream when ok is false.
func serveKad(st network.Stream, answer func(m *kadpb.Message) (reply *kadpb.Message, ok bool)) {
	r := msgio.NewVarintReaderSize(st, network.MessageSizeMax)
	w := msgio.NewVarintWriter(st)
	for {
		_ = st.SetReadDeadline(time.Now().Add(time.Minute))
		raw, err := r.ReadMsg()
		if err != nil {
			_ = st.Reset()
			return
		}
		var m kadpb.Message
		err = proto.Unmarshal(raw, &m)
		r.ReleaseMsg(raw)
		if err != nil {
			_ = st.Reset()
			return
		}
		reply, ok := answer(&m)
		if !ok {
			_ = st.Reset()
			return
		}
		if reply == nil {
			continue
		}
		out, err := proto.Marshal(reply)
		if err != nil || w.WriteMsg(out) != nil {
			_ = st.Reset()
			return
		}
	}
}

// TestGrowthDuringAnnouncement: peers that join A's routing table while a
// growth announcement runs, after its lookup, get A's card from a later
// announcement.
//
// A slow holder keeps the growth announcement in its card put until enough
// newcomers to grow A's routing table past the next threshold are in it:
// the card's lookup was over before they came, so they do not get the card. announce then records the
// routing table's size at its end, newcomers included, as announced
// (announcedRT), so the growth they brought never counts, and the
// newcomers (among the k closest peers of A's card key: the mesh is under
// k) get the card only from the timer republish.
func TestGrowthDuringAnnouncement(t *testing.T) {
	seed, a, logs, opts := growthNode(t)
	key := CardKey(a.h.ID())
	slow := newSlowHolder(t, key)
	slow.armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := a.h.Connect(ctx, peer.AddrInfo{ID: slow.h.ID(), Addrs: slow.h.Addrs()}); err != nil {
		t.Fatal(err)
	}
	eventuallyRT(t, a.d, 30*time.Second, "the slow holder in A's routing table", func() bool { return inRT(a.d, slow.h.ID()) })
	// Growth past the threshold, one newcomer at a time, each seen by
	// growthLoop through the routing table's add callback
	// (TestGrowthAtThreshold).
	_, next := announcedRT(a.d)
	for a.d.DHT().RoutingTable().Size() <= next {
		n := pubJoin(t, seed, 1, opts...)[0]
		eventuallyRT(t, a.d, 30*time.Second, "the newcomer in A's routing table", func() bool { return inRT(a.d, n.h.ID()) })
	}
	select {
	case <-slow.held:
	case <-time.After(growthGap + 30*time.Second):
		t.Fatalf("no growth announcement reached the slow holder; announcements: %v", logs.find(msgPublished))
	}
	held := time.Now()
	// Enough newcomers to reach the next growth threshold, counted from the
	// start of the announcement that is held (recorded when it ends).
	startRT := a.d.DHT().RoutingTable().Size()
	late := pubJoin(t, seed, max(startRT+growthMin, int(float64(startRT)*growthFactor))-startRT, opts...)
	eventuallyRT(t, a.d, 30*time.Second, "the late newcomers in A's routing table", func() bool {
		for _, n := range late {
			if !inRT(a.d, n.h.ID()) {
				return false
			}
		}
		return true
	})
	joined, joinedRT := time.Now(), a.d.DHT().RoutingTable().Size()
	slow.let()
	t.Logf("the late newcomers were in A's routing table %s after the hold began", joined.Sub(held).Round(time.Millisecond))
	released := time.Now()
	missing := func() int {
		n := 0
		for _, l := range late {
			if storedValue(t, l.d, key) == nil {
				n++
			}
		}
		return n
	}
	if !waitUntil(growthGap+15*time.Second, func() bool { return missing() == 0 }) {
		recs := logs.find(msgPublished)
		// The record's routing_table_after says whether the late newcomers
		// were in A's routing table when the growth announcement ended.
		if len(recs) < 2 || recs[1].int("routing_table_after") < int64(joinedRT) {
			t.Fatalf("%d late newcomers lack A's card, but the growth announcement ended before they were all in A's routing table (a loaded machine; their growth was missed as in TestGrowthAtThreshold?); announcements: %v", missing(), recs)
		}
		size, next := announcedRT(a.d)
		t.Fatalf("%d of %d newcomers that joined during the growth announcement hold no card of A %s after it was let go; "+
			"A's routing table %d, recorded as announced %d (next growth at %d)\nannouncements: %v",
			missing(), len(late), time.Since(released).Round(time.Millisecond), a.d.DHT().RoutingTable().Size(), size, next, logs.find(msgPublished))
	}
}

// blackhole is a peer that speaks the DHT protocol: it answers FIND_NODE,
// GET_VALUE and GET_PROVIDERS with nothing, resets the stream on PUT_VALUE
// (a refusal, as a full or failing server's) and reads ADD_PROVIDER and
// drops it (the protocol has no answer to it).
type blackhole struct {
	h host.Host
	// hang, when not nil, makes GET_PROVIDERS go unanswered until it is
	// closed: a peer whose answer never comes, as one that died mid-lookup.
	hang            chan struct{}
	puts, provides  atomic.Int64
	closeOnPut      bool
	closeOnce       sync.Once
	closeHostResult chan error
}

// newBlackhole starts a black hole on a fresh host; closeOnPut makes it
// close its host at the first PUT_VALUE: a peer gone between the lookup and
// the put.
func newBlackhole(t testing.TB, closeOnPut bool) *blackhole {
	t.Helper()
	b := &blackhole{h: newHost(t), closeOnPut: closeOnPut, closeHostResult: make(chan error, 1)}
	b.h.SetStreamHandler(kadProto, b.serve)
	return b
}

func (b *blackhole) serve(s network.Stream) {
	serveKad(s, func(m *kadpb.Message) (*kadpb.Message, bool) {
		switch m.GetType() {
		case kadpb.Message_PUT_VALUE:
			b.puts.Add(1)
			if b.closeOnPut {
				b.closeOnce.Do(func() {
					// Not from the handler: closing the host waits for it.
					go func() { b.closeHostResult <- b.h.Close() }()
				})
			}
			return nil, false
		case kadpb.Message_ADD_PROVIDER:
			b.provides.Add(1)
			return nil, true
		case kadpb.Message_GET_PROVIDERS:
			if b.hang != nil {
				<-b.hang
				return nil, false
			}
		}
		return kadpb.NewMessage(m.GetType(), m.GetKey(), 0), true
	})
}

// waitHoles waits until d's routing table holds every black hole, and
// says what d knows of those it does not hold when it times out.
func waitHoles(t testing.TB, d *Discovery, holes []*blackhole) {
	t.Helper()
	missing := func() []string {
		var out []string
		for i, b := range holes {
			if !inRT(d, b.h.ID()) {
				protos, _ := d.h.Peerstore().GetProtocols(b.h.ID())
				out = append(out, fmt.Sprintf("%d (%s, connected %v, protocols %v)", i, b.h.ID(), d.h.Network().Connectedness(b.h.ID()), protos))
			}
		}
		return out
	}
	if !waitUntil(30*time.Second, func() bool { return len(missing()) == 0 }) {
		t.Fatalf("black holes not in the routing table after 30 s: %v", missing())
	}
}

// announcementOf returns the first "card published" record of the card d
// published last (by its seq): the announcement of that Publish, not a
// later republish.
func announcementOf(t testing.TB, d *Discovery, logs *pubLog) pubRecord {
	t.Helper()
	card, _ := d.published()
	if card == nil {
		t.Fatal("no card published")
	}
	recs := logs.find(msgPublished)
	for _, r := range recs {
		if r.int("seq") == int64(card.Seq) {
			return r
		}
	}
	t.Fatalf("no announcement of seq %d logged: %v", card.Seq, recs)
	return pubRecord{}
}

// ackNode joins A, with a capturing logger, to mesh, and waits until its
// routing table holds want peers.
func ackNode(t *testing.T, mesh []node, want int) (node, *pubLog) {
	t.Helper()
	logs := new(pubLog)
	a := node{h: newHost(t)}
	a.d = newDisc(t, a.h, WithBootstrap(mesh[0].addrInfo()), WithLogger(logs.logger()), WithRepublish(time.Hour), WithRecordTTL(3*time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := a.d.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	eventuallyRT(t, a.d, 30*time.Second, fmt.Sprintf("%d servers in A's routing table", want), func() bool { return a.d.DHT().RoutingTable().Size() == want })
	return a, logs
}

// TestPublishAcksGone: a server gone (host closed) while A's routing table
// still holds it does not make the announcement short: the three live
// servers ack, and Publish succeeds.
func TestPublishAcksGone(t *testing.T) {
	mesh := newMesh(t, 4)
	a, logs := ackNode(t, mesh, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Every peer alive: all acked, said at Info (the first announcement).
	if err := a.d.Publish(ctx, testCard(a.h.ID(), "a", []string{"acks-one"}, "acks-tag")); err != nil {
		t.Fatal(err)
	}
	r := announcementOf(t, a.d, logs)
	if r.level != slog.LevelInfo || r.int("closest") != 4 || r.int("card_acks") != 4 || r.int("least_acks") != 4 || r.int("under_replicated") != 0 || r.int("errors") != 0 {
		t.Fatalf("announcement to 4 live servers: %v; want Info, closest=4, card_acks=4, least_acks=4, under_replicated=0", r)
	}
	if isPending(a.d) {
		t.Fatal("a complete announcement asks for a retry")
	}

	gone := mesh[3]
	if err := errors.Join(gone.d.Close(), gone.h.Close()); err != nil {
		t.Fatal(err)
	}
	if !inRT(a.d, gone.h.ID()) {
		t.Fatal("the closed server already left A's routing table; the test needs it there")
	}
	start := time.Now()
	if err := a.d.Publish(ctx, testCard(a.h.ID(), "a", []string{"acks-two"}, "acks-tag")); err != nil {
		t.Fatalf("Publish with a gone server in the routing table: %v", err)
	}
	t.Logf("publish with a gone server took %s", time.Since(start).Round(time.Millisecond))
	r = announcementOf(t, a.d, logs)
	// The lookup leaves the gone server out of the closest peers when it
	// fails to reach it, but lists it (and the put to it goes unacked)
	// when A has not yet seen its connection close: both were seen here,
	// on this tree and on the one before issue 22. Either way exactly the
	// three live servers ack, and one missing ack of four is not short.
	if c := r.int("closest"); (c != 3 && c != 4) || r.int("card_acks") != 3 || r.int("least_acks") != 3 || r.int("under_replicated") != 0 {
		t.Fatalf("announcement with one server gone: %v; want closest=3 (or 4, the gone one unacked), card_acks=3, least_acks=3, under_replicated=0", r)
	}
	if r.level != slog.LevelDebug {
		t.Errorf("a second complete announcement logged at %s; want Debug", r.level)
	}
	if isPending(a.d) {
		t.Fatal("a complete announcement asks for a retry")
	}
}

// TestPublishAcksRefused: peers that answer the lookup but take no card
// (three refuse the put, two close their host at the first put: gone
// between the lookup and the put) are among the closest but not acked.
// With fewer than half of the closest acked, the announcement says it is
// under-replicated, at Info (also when it is not the first), and asks for
// a retry; Publish succeeds all the same, and the live servers hold the
// card.
func TestPublishAcksRefused(t *testing.T) {
	mesh := newMesh(t, 3)
	a, logs := ackNode(t, mesh, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var holes []*blackhole
	for i := range 5 {
		b := newBlackhole(t, i >= 3)
		if err := a.h.Connect(ctx, peer.AddrInfo{ID: b.h.ID(), Addrs: b.h.Addrs()}); err != nil {
			t.Fatal(err)
		}
		holes = append(holes, b)
	}
	// Before the first Publish: the routing table's growth starts no
	// announcement while there is no card.
	waitHoles(t, a.d, holes)

	start := time.Now()
	if err := a.d.Publish(ctx, testCard(a.h.ID(), "a", []string{"acks-one"}, "acks-tag")); err != nil {
		t.Fatalf("Publish with black holes among the closest: %v", err)
	}
	t.Logf("publish with 5 black holes among 8 closest took %s", time.Since(start).Round(time.Millisecond))
	r := announcementOf(t, a.d, logs)
	t.Logf("announcement: %v", r)
	if got := r.int("closest"); got != 8 {
		t.Fatalf("closest=%d; want 8 (3 live servers and 5 black holes): %v\nall announcements: %v\nrouting table: %v", got, r, logs.find(msgPublished), a.d.DHT().RoutingTable().ListPeers())
	}
	if got := r.int("card_acks"); got != 3 {
		t.Fatalf("card_acks=%d; want 3, the live servers: %v", got, r)
	}
	if least := r.int("least_acks"); least < 0 || least > r.int("card_acks") {
		t.Fatalf("least_acks=%d above card_acks=%d: %v", least, r.int("card_acks"), r)
	}
	if r.int("under_replicated") < 1 || r.level != slog.LevelInfo {
		t.Fatalf("3 acks of 8 closest: %v; want under_replicated>=1 at Info", r)
	}
	if !isPending(a.d) {
		t.Fatal("an under-replicated announcement does not ask for a retry")
	}
	for i, b := range holes[:3] {
		// Two tries of replicate, each sent twice by kad-dht's message
		// sender on a reset stream: more than one try reached the peer.
		if n := b.puts.Load(); n < 3 {
			t.Errorf("black hole %d got %d PUT_VALUE; want the put retried (>= 3)", i, n)
		}
	}
	for i, b := range holes[3:] {
		if n := b.puts.Load(); n < 1 {
			t.Errorf("closing black hole %d got no PUT_VALUE", i)
		}
		select {
		case err := <-b.closeHostResult:
			if err != nil {
				t.Errorf("closing black hole %d: %v", i, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("closing black hole %d did not close", i)
		}
	}
	for i, n := range mesh {
		if storedSeq(t, n.d, CardKey(a.h.ID())) == 0 {
			t.Errorf("live server %d holds no card of A", i)
		}
	}

	// Not the first announcement: the closed hosts left the lookup, and 3
	// acks of 6 closest is half, enough: Debug, nothing under-replicated.
	if err := a.d.Publish(ctx, testCard(a.h.ID(), "a", []string{"acks-two"}, "acks-tag")); err != nil {
		t.Fatal(err)
	}
	r = announcementOf(t, a.d, logs)
	t.Logf("second announcement: %v", r)
	if r.level != slog.LevelDebug || r.int("card_acks") != 3 || r.int("closest") != 6 || r.int("under_replicated") != 0 {
		t.Fatalf("second announcement, 3 live servers and 3 refusing peers: %v; want Debug, card_acks=3, closest=6, under_replicated=0", r)
	}
}

// TestTTLOptions: New refuses a record TTL under three times the republish
// interval, and says both.
func TestTTLOptions(t *testing.T) {
	h := newHost(t)
	for _, tc := range []struct {
		ttl, republish time.Duration
		ok             bool
	}{
		{5 * time.Second, 2 * time.Second, false},
		{3*time.Second - time.Millisecond, time.Second, false},
		{time.Minute, time.Hour, false},
		// Default republish (10 min) with a TTL under 30 min.
		{25 * time.Minute, 0, false},
		{3 * time.Second, time.Second, true},
		{DefaultRecordTTL, 0, true},
	} {
		t.Run(fmt.Sprintf("ttl=%s,republish=%s", tc.ttl, tc.republish), func(t *testing.T) {
			opts := []Option{WithMDNS(false), WithLogger(testLogger()), WithRecordTTL(tc.ttl)}
			republish := DefaultRepublish
			if tc.republish > 0 {
				opts = append(opts, WithRepublish(tc.republish))
				republish = tc.republish
			}
			d, err := New(h, opts...)
			if tc.ok {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if err := d.Close(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				_ = d.Close()
				t.Fatal("New succeeded")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "discovery: new: ") || !strings.Contains(msg, tc.ttl.String()) || !strings.Contains(msg, republish.String()) {
				t.Fatalf("New: %v; want an error naming the TTL %s and the republish interval %s", err, tc.ttl, republish)
			}
		})
	}
	for _, bad := range []time.Duration{0, -time.Second} {
		d, err := New(h, WithMDNS(false), WithRecordTTL(bad))
		if err == nil {
			_ = d.Close()
			t.Fatalf("New with TTL %s succeeded", bad)
		}
		if !strings.Contains(err.Error(), "WithRecordTTL") {
			t.Fatalf("New with TTL %s: %v; want the option named", bad, err)
		}
	}
}

// TestTTLExpiry: with a 3 s TTL and a 1 s republish on every node, a
// stopped agent drops out of finds, and out of every provider store, within
// the TTL and a margin; a live one is found by every find meanwhile, across
// several TTLs, because its republish refreshes its records.
func TestTTLExpiry(t *testing.T) {
	const (
		ttl       = 3 * time.Second
		republish = time.Second
	)
	nodes := newMesh(t, 6, WithRecordTTL(ttl), WithRepublish(republish))
	finders, live, doomed := nodes[:4], nodes[4], nodes[5]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range []node{live, doomed} {
		if err := n.d.Publish(ctx, testCard(n.h.ID(), "ttl-"+n.h.ID().String()[:8], []string{"ttl-skill"})); err != nil {
			t.Fatal(err)
		}
	}
	finds := 0
	// find runs a Find from the next finder and reports which of live and
	// doomed it returned.
	find := func() (gotLive, gotDoomed bool) {
		t.Helper()
		f := finders[finds%len(finders)]
		finds++
		fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		res, err := f.d.Find(fctx, "ttl-skill", 0)
		if err != nil {
			t.Fatalf("Find: %v", err)
		}
		for _, r := range res {
			gotLive = gotLive || r.Card.PeerID == live.h.ID().String()
			gotDoomed = gotDoomed || r.Card.PeerID == doomed.h.ID().String()
		}
		return gotLive, gotDoomed
	}
	eventually(t, 20*time.Second, "both agents found", func() bool {
		l, d := find()
		return l && d
	})

	if err := doomed.d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := doomed.h.Close(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	var gone time.Duration
	skill := SkillCID("ttl-skill")
	for end := stopped.Add(3 * ttl); time.Now().Before(end) || gone == 0; {
		l, d := find()
		if !l {
			t.Fatalf("find %d, %s after the other agent stopped: the live agent is missing", finds, time.Since(stopped).Round(time.Millisecond))
		}
		switch {
		case d && gone != 0:
			t.Fatalf("the stopped agent came back %s after it stopped (gone at %s)", time.Since(stopped).Round(time.Millisecond), gone)
		case !d && gone == 0:
			gone = time.Since(stopped)
		case d && time.Since(stopped) > ttl+republish+5*time.Second:
			t.Fatalf("the stopped agent is still found %s after it stopped (TTL %s, republish %s)", time.Since(stopped).Round(time.Millisecond), ttl, republish)
		}
	}
	t.Logf("the stopped agent left finds %s after it stopped; %d finds over %s all returned the live one", gone.Round(time.Millisecond), finds, time.Since(stopped).Round(time.Millisecond))
	for i, n := range nodes[:5] {
		if pubHolds(t, n.d, skill, doomed.h.ID()) {
			t.Errorf("node %d still serves the stopped agent's provider record %s after it stopped", i, time.Since(stopped).Round(time.Millisecond))
		}
		// kad-dht's value store drops an expired record when it is read:
		// ask the node what it serves.
		asker := live.h
		if n.h.ID() == live.h.ID() {
			asker = finders[0].h
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		v, err := rawGet(rctx, asker, n.h.ID(), CardKey(doomed.h.ID()))
		cancel()
		if err != nil || v != nil {
			t.Errorf("node %d serves %d bytes of the stopped agent's card (err %v) %s after it stopped", i, len(v), err, time.Since(stopped).Round(time.Millisecond))
		}
	}
}

// TestTTLRepublishInterval: the card is announced again every republish
// interval, so that with the shortest TTL New accepts (three intervals)
// the records outlive a missed republish and never lapse while the agent
// lives.
//
// republishLoop ticks every interval (up to 30 s) and announces when the
// last announcement is at least an interval old; but lastAnnounce is set
// when an announcement ends, so at the next tick it is an interval less
// the announcement's duration old, and the announcement waits one more
// tick: every 2 intervals, which is the whole TTL here.
func TestTTLRepublishInterval(t *testing.T) {
	const (
		republish = time.Second
		ttl       = 3 * republish
	)
	mesh := newMesh(t, 3, WithRecordTTL(ttl), WithRepublish(republish))
	logs := new(pubLog)
	ah := newHost(t)
	a := newDisc(t, ah, WithBootstrap(mesh[0].addrInfo()), WithLogger(logs.logger()), WithRecordTTL(ttl), WithRepublish(republish))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := a.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	skill := SkillCID("interval-skill")
	if err := a.Publish(ctx, testCard(ah.ID(), "a", []string{"interval-skill"})); err != nil {
		t.Fatal(err)
	}
	held := func() bool {
		for _, n := range mesh {
			if pubHolds(t, n.d, skill, ah.ID()) {
				return true
			}
		}
		return false
	}
	// ADD_PROVIDER has no reply: Publish returns once the records are
	// written to the servers' streams, and a server stores one a moment
	// later. From the first time a server holds it, watch the holders: a
	// moment when none holds A's provider record is a moment when no find
	// can return A.
	eventually(t, 10*time.Second, "a server to hold A's provider record", held)
	lapses, polls := 0, 0
	eventually(t, 30*time.Second, "5 announcements", func() bool {
		polls++
		if !held() {
			lapses++
		}
		return len(logs.find(msgPublished)) >= 5
	})
	recs := logs.find(msgPublished)
	var gaps []string
	var durs []time.Duration
	// From the second on: the first waits for the Publish's announcement,
	// which on a loaded machine takes seconds.
	for i := 2; i < len(recs); i++ {
		gap := recs[i].start().Sub(recs[i-1].start())
		durs = append(durs, gap)
		gaps = append(gaps, gap.Round(time.Millisecond).String())
	}
	slices.Sort(durs)
	t.Logf("announcements every %v (republish %s, TTL %s); A's provider record on no server at %d of %d polls", gaps, republish, ttl, lapses, polls)
	// The median: one announcement slowed by a loaded machine delays the
	// next; a republish that waited a whole extra tick would show in all.
	if med := durs[len(durs)/2]; med > republish*3/2 {
		t.Errorf("announcements %v apart, median %s; want about the republish interval %s", gaps, med, republish)
	}
	if lapses > 0 {
		t.Errorf("A's provider record was on no server at %d of %d polls: a live agent dropped out of finds", lapses, polls)
	}
}

// TestFindStats: FindWithStats says how far a find got.
func TestFindStats(t *testing.T) {
	nodes := newMesh(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	owner, orphan, finder := nodes[3], nodes[4], nodes[0]
	if err := owner.d.Publish(ctx, testCard(owner.h.ID(), "owner", []string{"stats-skill"}, "stats-tag")); err != nil {
		t.Fatal(err)
	}

	res, st, err := finder.d.FindWithStats(ctx, "nobody-offers-this", 0)
	if err != nil || len(res) != 0 {
		t.Fatalf("Find of a skill nobody offers = %+v, %v", res, err)
	}
	if st.PeersAsked < 1 || st.Requests < st.PeersAsked || st.Hops < 1 || st.Providers != 0 || st.Cards != 0 || st.CardFailures != 0 || st.Matched != 0 {
		t.Fatalf("stats of a find for nothing: %+v; want peers_asked>0, requests>=peers_asked, hops>=1, no provider, card or match", st)
	}
	if !strings.Contains(st.String(), fmt.Sprintf("asked %d peers", st.PeersAsked)) {
		t.Fatalf("String() = %q", st)
	}

	res, st, err = finder.d.FindWithStats(ctx, "stats-skill", 0)
	if err != nil || len(res) != 1 || res[0].Card.PeerID != owner.h.ID().String() {
		t.Fatalf("Find(stats-skill) = %+v, %v", res, err)
	}
	if st.PeersAsked < 1 || st.Hops < 1 || st.Providers != 1 || st.Cards != 1 || st.CardFailures != 0 || st.Matched != 1 || st.TookMS < 0 {
		t.Fatalf("stats of a find for one provider: %+v; want providers=1, cards=1, matched=1, hops>=1", st)
	}

	// A provider without a card: found, but its card fails.
	if err := orphan.d.DHT().Provide(ctx, SkillCID("orphan-skill"), true); err != nil {
		t.Fatal(err)
	}
	res, st, err = finder.d.FindWithStats(ctx, "orphan-skill", 0)
	if err != nil || len(res) != 0 {
		t.Fatalf("Find(orphan-skill) = %+v, %v; want nothing", res, err)
	}
	if st.Providers != 1 || st.Cards != 0 || st.CardFailures != 1 || st.Matched != 0 {
		t.Fatalf("stats of a find for a provider without a card: %+v; want providers=1, card_failures=1", st)
	}

	// The finder's own card counts as a provider and a card.
	if err := finder.d.Publish(ctx, testCard(finder.h.ID(), "finder", []string{"stats-skill"})); err != nil {
		t.Fatal(err)
	}
	res, st, err = finder.d.FindWithStats(ctx, "stats-skill", 0)
	if err != nil || len(res) != 2 || st.Providers != 2 || st.Cards != 2 || st.Matched != 2 {
		t.Fatalf("Find(stats-skill) with the finder's own card = %d results, %v, %+v; want 2 providers, cards and matches", len(res), err, st)
	}
}

// TestFindCutAfterGrace: a find does not wait for a provider lookup to be
// exhausted once it has a provider. Peers that never answer GET_PROVIDERS
// (gone mid-lookup, as after churn) would hold the lookup until their
// message timeout; the find returns findGrace after the first provider,
// with the provider, and says that it cut the lookup.
func TestFindCutAfterGrace(t *testing.T) {
	mesh := newMesh(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	owner, finder := mesh[1], mesh[2]
	if err := owner.d.Publish(ctx, testCard(owner.h.ID(), "owner", []string{"grace-skill"})); err != nil {
		t.Fatal(err)
	}
	var holes []*blackhole
	for range 4 {
		b := newBlackhole(t, false)
		b.hang = make(chan struct{})
		t.Cleanup(func() { close(b.hang) })
		if err := finder.h.Connect(ctx, peer.AddrInfo{ID: b.h.ID(), Addrs: b.h.Addrs()}); err != nil {
			t.Fatal(err)
		}
		holes = append(holes, b)
	}
	waitHoles(t, finder.d, holes)

	res, st, err := finder.d.FindWithStats(ctx, "grace-skill", 0)
	t.Logf("find with 4 silent peers among 6: %v", st)
	if err != nil || len(res) != 1 || res[0].Card.PeerID != owner.h.ID().String() {
		t.Fatalf("Find(grace-skill) = %+v, %v; want the owner", res, err)
	}
	if !st.Cut {
		t.Fatalf("the find waited for the silent peers (stats %v); want the lookups cut %s after the first provider", st, findGrace)
	}
	if !strings.Contains(st.String(), "stopped") {
		t.Fatalf("String() = %q; want it to say the lookups were stopped", st)
	}
}

// emitReachability emits r on h's event bus with a stateful emitter, as
// the transport does when it presumes a host behind NAT private.
func emitReachability(t testing.TB, h host.Host, r network.Reachability) {
	t.Helper()
	em, err := h.EventBus().Emitter(new(event.EvtLocalReachabilityChanged), eventbus.Stateful)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = em.Close() }()
	if err := em.Emit(event.EvtLocalReachabilityChanged{Reachability: r}); err != nil {
		t.Fatal(err)
	}
}

// serves reports whether h handles the DHT protocol.
func serves(h host.Host) bool { return slices.Contains(h.Mux().Protocols(), kadProto) }

// TestAutoMode: in ModeAuto a host of unknown reachability serves the DHT;
// one whose reachability is private (said before New, as the transport
// does) is a client that its peers do not take into their routing tables,
// and it serves again once found public.
func TestAutoMode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	server := newDisc(t, newHost(t))

	unknownH := newHost(t)
	unknown := newDisc(t, unknownH, WithMode(ModeAuto))
	if got := unknown.DHT().Mode(); got != dht.ModeAutoServer {
		t.Fatalf("DHT mode %v, want dht.ModeAutoServer", got)
	}
	privH := newHost(t)
	emitReachability(t, privH, network.ReachabilityPrivate)
	priv := newDisc(t, privH, WithMode(ModeAuto), WithBootstrap(peer.AddrInfo{ID: server.h.ID(), Addrs: server.h.Addrs()}))
	eventually(t, 30*time.Second, "the private host to stop serving the DHT", func() bool { return !serves(privH) })

	for _, h := range []host.Host{unknownH, privH} {
		if err := server.h.Connect(ctx, peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
	eventuallyRT(t, server, 30*time.Second, "the host of unknown reachability in the server's routing table", func() bool { return inRT(server, unknownH.ID()) })
	if !serves(unknownH) {
		t.Fatal("the host of unknown reachability does not serve the DHT")
	}
	// Identify with the private host is complete (its protocols are known);
	// the DHT is not among them and the server did not take it.
	eventually(t, 30*time.Second, "identify with the private host", func() bool {
		protos, err := server.h.Peerstore().GetProtocols(privH.ID())
		return err == nil && len(protos) > 0
	})
	if protos, _ := server.h.Peerstore().GetProtocols(privH.ID()); slices.Contains(protos, kadProto) {
		t.Fatalf("the private host announces %s: %v", kadProto, protos)
	}
	if inRT(server, privH.ID()) {
		t.Fatal("the server took the private host (a DHT client) into its routing table")
	}
	// A client still queries: it bootstraps and finds.
	if err := priv.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	if err := server.Publish(ctx, testCard(server.h.ID(), "srv", []string{"auto-skill"})); err != nil {
		t.Fatal(err)
	}
	if res, err := priv.Find(ctx, "auto-skill", 0); err != nil || len(res) != 1 {
		t.Fatalf("Find from the private client = %+v, %v", res, err)
	}

	// Found public: it serves, and the server takes it.
	emitReachability(t, privH, network.ReachabilityPublic)
	eventually(t, 30*time.Second, "the host found public to serve the DHT", func() bool { return serves(privH) })
	eventuallyRT(t, server, 30*time.Second, "the server to take the public host", func() bool { return inRT(server, privH.ID()) })
	// The host of unknown reachability served throughout.
	if !serves(unknownH) {
		t.Fatal("the host of unknown reachability stopped serving")
	}
	if err := errors.Join(unknown.Close(), priv.Close()); err != nil {
		t.Fatal(err)
	}
}
