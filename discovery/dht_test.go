package discovery

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/routing"

	"github.com/mcpv2/mcpv2/protocol"
)

func TestDHTProtocolID(t *testing.T) {
	nodes := newMesh(t, 2)
	protos, err := nodes[1].h.Peerstore().GetProtocols(nodes[0].h.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(protos, kadProto) {
		t.Fatalf("node 0 speaks %v; want %s among them", protos, kadProto)
	}
	for _, p := range protos {
		if strings.HasPrefix(string(p), "/ipfs/kad") {
			t.Fatalf("node 0 speaks the public IPFS DHT protocol %s", p)
		}
	}
	if got := nodes[1].d.DHT().RoutingTable().Size(); got != 1 {
		t.Fatalf("routing table of node 1 has %d peers, want 1", got)
	}
}

func TestPublishGetCard(t *testing.T) {
	nodes := newMesh(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owner := nodes[2]
	card := testCard(owner.h.ID(), "owner", []string{"translate"}, "text")
	card.PeerID = "" // Publish fills it in
	if err := owner.d.Publish(ctx, card); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		got, err := n.d.GetCard(ctx, owner.h.ID())
		if err != nil {
			t.Fatalf("node %d: GetCard: %v", i, err)
		}
		if got.PeerID != owner.h.ID().String() || got.Name != "owner" || got.Seq == 0 || got.IssuedAt == 0 {
			t.Fatalf("node %d: GetCard = %+v", i, got)
		}
		// The record reached every server of this small mesh (k = 20).
		if seq := storedSeq(t, n.d, CardKey(owner.h.ID())); seq != got.Seq {
			t.Errorf("node %d stores seq %d, want %d", i, seq, got.Seq)
		}
	}
	if _, err := nodes[0].d.GetCard(ctx, nodes[3].h.ID()); !errors.Is(err, routing.ErrNotFound) {
		t.Fatalf("GetCard of a peer without a card: %v; want routing.ErrNotFound", err)
	}
}

func TestPublishSeq(t *testing.T) {
	nodes := newMesh(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := nodes[1]
	key := CardKey(a.h.ID())
	card := testCard(a.h.ID(), "a", []string{"ping"})
	if err := a.d.Publish(ctx, card); err != nil {
		t.Fatal(err)
	}
	first := storedSeq(t, a.d, key)
	if min := uint64(time.Now().Add(-time.Minute).UnixMilli()); first < min {
		t.Fatalf("automatic seq %d is not the Unix time in milliseconds", first)
	}

	// The same card again: nothing changes.
	if err := a.d.Publish(ctx, card); err != nil {
		t.Fatal(err)
	}
	if got := storedSeq(t, nodes[0].d, key); got != first {
		t.Fatalf("republishing the same card changed seq %d to %d", first, got)
	}

	// A changed card: a higher seq, published at once.
	card.Description = "changed"
	if err := a.d.Publish(ctx, card); err != nil {
		t.Fatal(err)
	}
	got, err := nodes[0].d.GetCard(ctx, a.h.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq <= first || got.Description != "changed" {
		t.Fatalf("after a change: seq %d (was %d), description %q", got.Seq, first, got.Description)
	}

	// An explicit seq that does not grow is refused, and nothing changes.
	card.Description = "older"
	card.Seq = first
	if err := a.d.Publish(ctx, card); err == nil || !strings.Contains(err.Error(), "does not grow") {
		t.Fatalf("Publish with a lower seq: %v; want a \"does not grow\" error", err)
	}
	if s := storedSeq(t, nodes[0].d, key); s != got.Seq {
		t.Fatalf("stored seq %d after a refused publish, want %d", s, got.Seq)
	}

	// Another peer's card is refused.
	other := testCard(nodes[0].h.ID(), "x", nil)
	if err := a.d.Publish(ctx, other); err == nil || !strings.Contains(err.Error(), "not this host's") {
		t.Fatalf("Publish of another peer's card: %v", err)
	}

	// An oversized card is refused before anything is stored.
	big := testCard(a.h.ID(), "big", []string{"ping"})
	big.Description = strings.Repeat("x", MaxCardSize)
	if err := a.d.Publish(ctx, big); err == nil || !strings.Contains(err.Error(), "over the 16384-byte limit") {
		t.Fatalf("Publish of an oversized card: %v", err)
	}
}

// TestStaleSeqRefused checks what kad-dht v0.42.2 does with a record whose
// seq is lower than the stored one. Its value store (records.ValueStore.Put)
// runs Select(new, stored) and refuses with ErrOldRecord when the stored one
// wins; handlePutValue returns that error and the stream is reset, so the
// PUT_VALUE RPC fails. The sender's PutValue, however, ignores per-peer
// failures and returns nil: the refusal is visible on the wire, and in that
// every node still stores and returns the higher seq.
func TestStaleSeqRefused(t *testing.T) {
	nodes := newMesh(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owner, holder := nodes[1], nodes[2]
	ownerKey := owner.h.Peerstore().PrivKey(owner.h.ID())
	key := CardKey(owner.h.ID())
	card := testCard(owner.h.ID(), "owner", []string{"ping"})
	card.Seq = 5
	if err := owner.d.Publish(ctx, card); err != nil {
		t.Fatal(err)
	}
	if got := storedSeq(t, holder.d, key); got != 5 {
		t.Fatalf("holder stores seq %d, want 5", got)
	}
	stale := card
	stale.Seq, stale.Description = 3, "stale"
	staleEnv := mustSeal(t, stale, ownerKey)

	// Select prefers 5 whichever order.
	for _, vals := range [][][]byte{{staleEnv, mustSeal(t, card, ownerKey)}, {mustSeal(t, card, ownerKey), staleEnv}} {
		i, err := CardValidator{}.Select(key, vals)
		if err != nil || !strings.Contains(string(vals[i]), "Test agent") {
			t.Fatalf("Select = %d, %v; want the seq-5 card", i, err)
		}
	}

	// On the wire: a PUT_VALUE of seq 3 to the holder is refused (stream
	// reset); the same RPC with the seq-5 record itself is accepted (a tie
	// selects the incoming record), so the refusal is about the seq.
	if err := rawPut(ctx, nodes[3].h, holder.h.ID(), key, staleEnv); err == nil {
		t.Fatal("holder accepted a PUT_VALUE of seq 3 over seq 5")
	}
	if got := storedSeq(t, holder.d, key); got != 5 {
		t.Fatalf("holder stores seq %d after a stale put, want 5", got)
	}
	if err := rawPut(ctx, nodes[3].h, holder.h.ID(), key, mustSeal(t, card, ownerKey)); err != nil {
		t.Fatalf("holder refused a PUT_VALUE of the seq-5 record it holds: %v", err)
	}

	// Through the library: the owner's own DHT refuses the stale record
	// locally and says so.
	if err := owner.d.DHT().PutValue(ctx, key, staleEnv); err == nil || !strings.Contains(err.Error(), "older value") {
		t.Fatalf("owner's PutValue of seq 3: %v; want kad-dht's \"can't replace a newer value with an older value\"", err)
	}

	// A client-mode node that holds no copy replays the stale record: its
	// PutValue stores it locally and returns nil, because kad-dht ignores the
	// servers' refusals; no server replaces its record, and every GetCard,
	// the replaying node's included, returns seq 5.
	// Every server holds seq 5 first: Publish returns once its replication
	// is acked, which need not be by all four, and a server with no copy
	// would rightly take the replayed 3.
	for i, n := range nodes {
		if storedSeq(t, n.d, key) != 5 && n != owner {
			if err := rawPut(ctx, owner.h, n.h.ID(), key, mustSeal(t, card, ownerKey)); err != nil {
				t.Fatalf("node %d refused the seq-5 record: %v", i, err)
			}
		}
	}
	replayer := newDisc(t, newHost(t), WithMode(ModeClient), WithBootstrap(nodes[0].addrInfo()))
	if err := replayer.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	if err := replayer.DHT().PutValue(ctx, key, staleEnv); err != nil {
		t.Fatalf("replayer's PutValue: %v (kad-dht v0.42.2 returns nil when servers refuse)", err)
	}
	for i, n := range nodes {
		if got := storedSeq(t, n.d, key); got != 5 {
			t.Errorf("node %d stores seq %d after the replay, want 5", i, got)
		}
		c, err := n.d.GetCard(ctx, owner.h.ID())
		if err != nil || c.Seq != 5 {
			t.Errorf("node %d: GetCard = seq %d, %v; want seq 5", i, c.Seq, err)
		}
	}
	if got := storedSeq(t, replayer, key); got != 3 {
		t.Errorf("replayer stores seq %d locally, want the 3 it put", got)
	}
	if c, err := replayer.GetCard(ctx, owner.h.ID()); err != nil || c.Seq != 5 {
		t.Errorf("replayer: GetCard = seq %d, %v; want seq 5", c.Seq, err)
	}
}

// TestBadRecordsRefusedOnPut sends forged and oversized records to a server
// on the wire and through kad-dht's PutValue.
func TestBadRecordsRefusedOnPut(t *testing.T) {
	nodes := newMesh(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	victim, holder, attacker := nodes[0], nodes[1], nodes[2]
	attackerKey := attacker.h.Peerstore().PrivKey(attacker.h.ID())
	victimKey := victim.h.Peerstore().PrivKey(victim.h.ID())
	key := CardKey(victim.h.ID())

	forged := mustSeal(t, testCard(victim.h.ID(), "forged", []string{"ping"}), attackerKey)
	big := testCard(victim.h.ID(), "big", []string{"ping"})
	big.Description = strings.Repeat("x", MaxCardSize)
	oversized := mustSeal(t, big, victimKey)
	good := mustSeal(t, testCard(victim.h.ID(), "good", []string{"ping"}), victimKey)

	for _, tc := range []struct {
		name  string
		value []byte
		want  error
	}{
		{"forged", forged, ErrCardSigner},
		{"oversized", oversized, ErrCardTooLarge},
		{"garbage", []byte("garbage"), ErrCardSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := rawPut(ctx, attacker.h, holder.h.ID(), key, tc.value); err == nil {
				t.Fatal("holder accepted the PUT_VALUE")
			}
			if v := storedValue(t, holder.d, key); v != nil {
				t.Fatalf("holder stored %d bytes", len(v))
			}
			// kad-dht validates even a local put.
			err := attacker.d.DHT().PutValue(ctx, key, tc.value)
			if !errors.Is(err, tc.want) {
				t.Fatalf("attacker's PutValue: %v; want %v", err, tc.want)
			}
		})
	}
	// Positive control: the genuine card is accepted by the same RPC.
	if err := rawPut(ctx, attacker.h, holder.h.ID(), key, good); err != nil {
		t.Fatalf("holder refused the genuine card: %v", err)
	}
	if storedValue(t, holder.d, key) == nil {
		t.Fatal("holder did not store the genuine card")
	}
}

// TestBadRecordsRefusedOnGet injects forged, oversized and stale records
// straight into a server's datastore, past the validator. kad-dht serves
// stored records without validating them again (it validates on put), so
// the server does hand them out; every reader validates what it receives and
// the local record too, so GetCard never returns them.
func TestBadRecordsRefusedOnGet(t *testing.T) {
	nodes := newMesh(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holder, reader := nodes[1], nodes[2]

	// The datastore location of a record is kad-dht's internal layout: check
	// it with a genuine record first, so that injection cannot miss.
	owner := nodes[3]
	ownerKey := owner.h.Peerstore().PrivKey(owner.h.ID())
	genuine := testCard(owner.h.ID(), "owner", []string{"ping"})
	genuine.Seq = 5
	if err := owner.d.Publish(ctx, genuine); err != nil {
		t.Fatal(err)
	}
	if storedSeq(t, holder.d, CardKey(owner.h.ID())) != 5 {
		t.Fatal("the genuine record is not where the test injects records")
	}

	// Victims without any genuine card: fresh identities, no host needed.
	victimKey := seedKey(t, "victim")
	victim := keyID(t, victimKey)
	attackerKey := seedKey(t, "attacker")
	big := testCard(victim, "big", []string{"ping"})
	big.Description = strings.Repeat("x", MaxCardSize)
	victim2Key := seedKey(t, "victim2")
	victim2 := keyID(t, victim2Key)

	for _, tc := range []struct {
		name  string
		id    peer.ID
		value []byte
	}{
		{"forged", victim, mustSeal(t, testCard(victim, "forged", []string{"ping"}), attackerKey)},
		{"oversized", victim2, mustSeal(t, big, victim2Key)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := CardKey(tc.id)
			inject(t, holder.d, key, tc.value)
			served, err := rawGet(ctx, reader.h, holder.h.ID(), key)
			if err != nil || len(served) != len(tc.value) {
				t.Fatalf("holder serves %d bytes, %v; the injection did not take", len(served), err)
			}
			if _, err := reader.d.GetCard(ctx, tc.id); !errors.Is(err, routing.ErrNotFound) {
				t.Fatalf("reader: GetCard: %v; want routing.ErrNotFound", err)
			}
			if _, err := holder.d.GetCard(ctx, tc.id); !errors.Is(err, routing.ErrNotFound) {
				t.Fatalf("holder itself: GetCard: %v; want routing.ErrNotFound", err)
			}
		})
	}

	t.Run("stale", func(t *testing.T) {
		key := CardKey(owner.h.ID())
		stale := genuine
		stale.Seq, stale.Description = 3, "stale"
		inject(t, holder.d, key, mustSeal(t, stale, ownerKey))
		if storedSeq(t, holder.d, key) != 3 {
			t.Fatal("the stale injection did not take")
		}
		for i, n := range nodes {
			c, err := n.d.GetCard(ctx, owner.h.ID())
			if err != nil || c.Seq != 5 {
				t.Errorf("node %d: GetCard = seq %d, %v; want seq 5", i, c.Seq, err)
			}
		}
	})
}

func TestFindSmallMesh(t *testing.T) {
	nodes := newMesh(t, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// 1: skill "translate"; 2: tag "translate" on skill "convert"; 3: both
	// and "translate" in its description; 4: unrelated; 0 finds.
	cards := map[int]protocol.AgentCard{
		1: testCard(nodes[1].h.ID(), "one", []string{"translate"}, "text"),
		2: testCard(nodes[2].h.ID(), "two", []string{"convert"}, "translate"),
		3: testCard(nodes[3].h.ID(), "three", []string{"translate"}, "translate"),
		4: testCard(nodes[4].h.ID(), "four", []string{"ocr"}, "image"),
	}
	c3 := cards[3]
	c3.Description = "I translate things"
	cards[3] = c3
	for i, c := range cards {
		if err := nodes[i].d.Publish(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	res, err := nodes[0].d.Find(ctx, "translate", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res {
		got = append(got, r.Card.Name)
		if !r.Reachable {
			t.Errorf("%s not reachable", r.Card.Name)
		}
	}
	// three: name 2 + tag 1.5 + description 0.5 + reachable 1; one: name 2
	// + description 0.5 ("Does translate") + 1; two: tag 1.5 + 1.
	want := []string{"three", "one", "two"}
	if !slices.Equal(got, want) {
		t.Fatalf("Find(translate) = %v, want %v", got, want)
	}
	if res[0].Score != 5 || res[1].Score != 3.5 || res[2].Score != 2.5 {
		t.Fatalf("scores %v %v %v; want 5 3.5 2.5", res[0].Score, res[1].Score, res[2].Score)
	}

	// The local node is included when it matches.
	res, err = nodes[4].d.Find(ctx, "ocr", 0)
	if err != nil || len(res) != 1 || res[0].Card.Name != "four" || !res[0].Reachable {
		t.Fatalf("Find(ocr) from its own provider = %+v, %v", res, err)
	}

	// The limit cuts the ranked list.
	res, err = nodes[5].d.Find(ctx, "translate", 2)
	if err != nil || len(res) != 2 || res[0].Card.Name != "three" {
		t.Fatalf("Find(translate, 2) = %+v, %v", res, err)
	}

	// A card that dropped the skill is no longer found, though its old
	// provider record lives on.
	c1 := cards[1]
	c1.Skills = []protocol.SkillDescriptor{{Name: "summarize", Description: "Shortens"}}
	if err := nodes[1].d.Publish(ctx, c1); err != nil {
		t.Fatal(err)
	}
	res, err = nodes[0].d.Find(ctx, "translate", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Card.Name == "one" {
			t.Fatalf("Find(translate) still returns the card that dropped it: %+v", r)
		}
	}
	if _, err := nodes[0].d.Find(ctx, "  ", 0); err == nil {
		t.Fatal("Find with an empty query succeeded")
	}
	if res, err := nodes[0].d.Find(ctx, "nobody-has-this", 0); err != nil || len(res) != 0 {
		t.Fatalf("Find of an unknown skill = %v, %v; want none", res, err)
	}
}

func TestFindPeer(t *testing.T) {
	nodes := newMesh(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A newcomer connected only to node 0 finds node 4's addresses.
	nc := newDisc(t, newHost(t), WithBootstrap(nodes[0].addrInfo()), WithMode(ModeClient))
	if err := nc.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	target := nodes[4].h.ID()
	ai, err := nc.FindPeer(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	if ai.ID != target || len(ai.Addrs) == 0 {
		t.Fatalf("FindPeer = %+v", ai)
	}
	unknown := keyID(t, seedKey(t, "nobody"))
	if _, err := nc.FindPeer(ctx, unknown); err == nil {
		t.Fatal("FindPeer of an unknown peer succeeded")
	}
}

func TestRepublish(t *testing.T) {
	// A lone node publishes (stored locally only), then joins a mesh: the
	// republish loop retries and the card spreads; later, a record a server
	// lost comes back on the next republish.
	mesh := newMesh(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lone := newDisc(t, newHost(t), WithRepublish(200*time.Millisecond), WithBootstrap(mesh[0].addrInfo()))
	card := testCard(lone.h.ID(), "lone", []string{"ping"})
	if err := lone.Publish(ctx, card); err != nil {
		t.Fatalf("Publish without DHT peers: %v", err)
	}
	key := CardKey(lone.h.ID())
	if storedValue(t, lone, key) == nil {
		t.Fatal("the lone node did not store its card locally")
	}
	if err := lone.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the card on every server", func() bool {
		for _, n := range mesh {
			if storedValue(t, n.d, key) == nil {
				return false
			}
		}
		return true
	})
	if err := mesh[1].d.dstore.Delete(ctx, storeKey(key)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the record republished to the server that lost it", func() bool {
		return storedValue(t, mesh[1].d, key) != nil
	})
	res, err := mesh[2].d.Find(ctx, "ping", 0)
	if err != nil || len(res) != 1 || res[0].Card.Name != "lone" {
		t.Fatalf("Find(ping) = %+v, %v", res, err)
	}
}

func TestCloseIdempotent(t *testing.T) {
	h := newHost(t)
	d, err := New(h, WithMDNS(false), WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := d.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v; want net.ErrClosed", err)
	}
	ctx := context.Background()
	if err := d.Publish(ctx, testCard(h.ID(), "x", nil)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Publish after Close: %v", err)
	}
	if _, err := d.Find(ctx, "x", 0); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Find after Close: %v", err)
	}
	if err := d.Bootstrap(ctx); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Bootstrap after Close: %v", err)
	}
	if _, err := d.GetCard(ctx, h.ID()); !errors.Is(err, net.ErrClosed) {
		t.Errorf("GetCard after Close: %v", err)
	}
	if _, err := d.FindPeer(ctx, h.ID()); !errors.Is(err, net.ErrClosed) {
		t.Errorf("FindPeer after Close: %v", err)
	}
}

func TestNewOptions(t *testing.T) {
	h := newHost(t)
	id := keyID(t, seedKey(t, "x"))
	for _, tc := range []struct {
		name string
		opt  Option
		want string
	}{
		{"bootstrap without address", WithBootstrap(peer.AddrInfo{ID: id}), "has no address"},
		{"bootstrap without ID", WithBootstrap(peer.AddrInfo{}), "WithBootstrap: peer 0"},
		{"bad mode", WithMode(Mode(9)), "unknown mode 9"},
		{"zero republish", WithRepublish(0), "must be positive"},
		{"empty peer cache path", WithPeerCache(""), "empty path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := New(h, tc.opt, WithMDNS(false))
			if err == nil {
				_ = d.Close()
				t.Fatal("New succeeded")
			}
			if !strings.HasPrefix(err.Error(), "discovery: new: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v; want %q", err, tc.want)
			}
		})
	}
	if _, err := New(nil); err == nil {
		t.Fatal("New(nil) succeeded")
	}
	// The default mode is kad-dht's auto mode: a client until the host is
	// known to be publicly reachable.
	d := newDisc(t, h, WithMode(ModeAuto))
	if got := d.DHT().Mode(); got != dht.ModeAutoServer {
		t.Fatalf("DHT mode %v, want dht.ModeAutoServer", got)
	}
	for m, want := range map[Mode]string{ModeAuto: "auto", ModeServer: "server", ModeClient: "client", Mode(7): "Mode(7)"} {
		if m.String() != want {
			t.Errorf("Mode(%d).String() = %q, want %q", int(m), m.String(), want)
		}
	}
}

func TestBootstrapUnreachable(t *testing.T) {
	dead := newHost(t)
	ai := peer.AddrInfo{ID: dead.ID(), Addrs: dead.Addrs()}
	if err := dead.Close(); err != nil {
		t.Fatal(err)
	}
	d := newDisc(t, newHost(t), WithBootstrap(ai))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := d.Bootstrap(ctx)
	if err == nil || !strings.Contains(err.Error(), "none of 1 peers reachable") {
		t.Fatalf("Bootstrap to a closed peer: %v", err)
	}
	// Without bootstrap peers, Bootstrap is not an error; Find says there was
	// nobody to ask, unless the node itself matches.
	lone := newDisc(t, newHost(t))
	if err := lone.Bootstrap(ctx); err != nil {
		t.Fatalf("Bootstrap without peers: %v", err)
	}
	if _, err := lone.Find(ctx, "ping", 0); !errors.Is(err, ErrNoPeers) {
		t.Fatalf("Find without peers: %v; want ErrNoPeers", err)
	}
	if err := lone.Publish(ctx, testCard(lone.h.ID(), "lone", []string{"ping"})); err != nil {
		t.Fatal(err)
	}
	if res, err := lone.Find(ctx, "ping", 0); err != nil || len(res) != 1 || !res[0].Reachable {
		t.Fatalf("Find of its own skill without peers = %+v, %v", res, err)
	}
}
