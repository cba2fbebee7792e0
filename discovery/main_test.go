package discovery

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	ds "github.com/ipfs/go-datastore"
	kadpb "github.com/libp2p/go-libp2p-kad-dht/pb"
	librecord "github.com/libp2p/go-libp2p-record"
	recpb "github.com/libp2p/go-libp2p-record/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testLogger discards unless MCPV2_TEST_LOG is set, then logs at Debug to
// stderr.
func testLogger() *slog.Logger {
	if os.Getenv("MCPV2_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// seedKey returns a deterministic Ed25519 libp2p key for name.
func seedKey(t testing.TB, name string) crypto.PrivKey {
	t.Helper()
	seed := sha256.Sum256([]byte("mcpv2 discovery test key " + name))
	k, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed[:]))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// keyID returns the PeerID of key.
func keyID(t testing.TB, key crypto.PrivKey) peer.ID {
	t.Helper()
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// newKeyHost builds a host with key on 127.0.0.1 (TCP only), closed when
// the test ends unless the caller closes it first.
func newKeyHost(t testing.TB, key crypto.PrivKey) host.Host {
	t.Helper()
	h, err := transport.NewHost(
		transport.WithIdentity(key),
		transport.WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")),
		// A node of the 50-node mesh connects to every other one.
		transport.WithConnManager(400, 800, time.Minute),
		transport.WithLogger(testLogger()),
	)
	if err != nil {
		t.Fatalf("NewHost: %v", err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

var hostSeq struct {
	sync.Mutex
	n int
}

// newHost builds a host with a fresh deterministic key.
func newHost(t testing.TB) host.Host {
	t.Helper()
	hostSeq.Lock()
	hostSeq.n++
	name := fmt.Sprintf("%s/host-%d", t.Name(), hostSeq.n)
	hostSeq.Unlock()
	return newKeyHost(t, seedKey(t, name))
}

// newDisc builds the Discovery of h in server mode without mDNS (unless an
// option says otherwise), closed when the test ends.
func newDisc(t testing.TB, h host.Host, opts ...Option) *Discovery {
	t.Helper()
	all := append([]Option{WithMode(ModeServer), WithMDNS(false), WithLogger(testLogger())}, opts...)
	d, err := New(h, all...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// node is a host and its Discovery.
type node struct {
	h host.Host
	d *Discovery
}

// addrInfo returns n's peer info.
func (n node) addrInfo() peer.AddrInfo { return peer.AddrInfo{ID: n.h.ID(), Addrs: n.h.Addrs()} }

// newMesh builds n server nodes; node 0 is the bootstrap peer of the others,
// which bootstrap a few at a time.
func newMesh(t testing.TB, n int, opts ...Option) []node {
	t.Helper()
	nodes := make([]node, n)
	for i := range nodes {
		h := newHost(t)
		var o []Option
		if i > 0 {
			o = append(o, WithBootstrap(nodes[0].addrInfo()))
		}
		nodes[i] = node{h: h, d: newDisc(t, h, append(o, opts...)...)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	errs := make(chan error, n)
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := nodes[i].d.Bootstrap(ctx); err != nil {
				errs <- fmt.Errorf("node %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Node 0 bootstrapped nobody; refresh it now that the others know it.
	if err := nodes[0].d.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	return nodes
}

// testCard returns a card for id with the given skills, each skill tagged
// with tags.
func testCard(id peer.ID, name string, skills []string, tags ...string) protocol.AgentCard {
	c := protocol.AgentCard{
		Name:             name,
		Description:      "Test agent " + name + " that answers questions",
		Version:          "0.0.1",
		PeerID:           id.String(),
		ProtocolVersions: []string{"mcpv2/1.0"},
		Capabilities:     protocol.Capabilities{Providers: []string{"claude"}, MaxBatch: 100},
	}
	for _, s := range skills {
		c.Skills = append(c.Skills, protocol.SkillDescriptor{
			Name:        s,
			Description: "Does " + s,
			InputSchema: json.RawMessage(`{"type":"object"}`),
			Tags:        tags,
		})
	}
	return c
}

// mustSeal seals card with key.
func mustSeal(t testing.TB, card protocol.AgentCard, key crypto.PrivKey) []byte {
	t.Helper()
	b, err := sealCard(card, key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// kadProto is the DHT protocol this package speaks.
const kadProto = ProtocolPrefix + "/kad/1.0.0"

// rawKad sends one DHT message from h to p on a fresh stream and reads the
// answer. A server that refuses the request resets the stream, which shows
// here as an error.
func rawKad(ctx context.Context, h host.Host, p peer.ID, msg *kadpb.Message) (*kadpb.Message, error) {
	s, err := h.NewStream(ctx, p, kadProto)
	if err != nil {
		return nil, err
	}
	defer func() { _ = s.Close() }()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	b, err := proto.Marshal(msg)
	if err != nil {
		return nil, err
	}
	if err := msgio.NewVarintWriter(s).WriteMsg(b); err != nil {
		return nil, err
	}
	r := msgio.NewVarintReaderSize(s, network.MessageSizeMax)
	rb, err := r.ReadMsg()
	if err != nil {
		return nil, err
	}
	resp := new(kadpb.Message)
	if err := proto.Unmarshal(rb, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// rawPut sends PUT_VALUE key=value from h to p.
func rawPut(ctx context.Context, h host.Host, p peer.ID, key string, value []byte) error {
	m := kadpb.NewMessage(kadpb.Message_PUT_VALUE, []byte(key), 0)
	m.Record = librecord.MakePutRecord(key, value)
	_, err := rawKad(ctx, h, p, m)
	return err
}

// rawGet sends GET_VALUE key from h to p and returns the record's value p
// serves, nil if none.
func rawGet(ctx context.Context, h host.Host, p peer.ID, key string) ([]byte, error) {
	resp, err := rawKad(ctx, h, p, kadpb.NewMessage(kadpb.Message_GET_VALUE, []byte(key), 0))
	if err != nil {
		return nil, err
	}
	return resp.GetRecord().GetValue(), nil
}

// storeKey is where kad-dht v0.42's value store files the record of key:
// "/<namespace>/" + base32(key) (records.valueDsKey).
func storeKey(key string) ds.Key {
	return ds.NewKey("/" + CardNamespace + "/" + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString([]byte(key)))
}

// storedValue returns the value d's datastore holds for key, nil if none.
func storedValue(t testing.TB, d *Discovery, key string) []byte {
	t.Helper()
	b, err := d.dstore.Get(context.Background(), storeKey(key))
	if err == ds.ErrNotFound {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var rec recpb.Record
	if err := proto.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if string(rec.GetKey()) != key {
		t.Fatalf("stored record key %q, want %q", rec.GetKey(), key)
	}
	return rec.GetValue()
}

// inject writes value under key straight into d's datastore, past the
// validator, as a corrupt or malicious store would hold it.
func inject(t testing.TB, d *Discovery, key string, value []byte) {
	t.Helper()
	rec := librecord.MakePutRecord(key, value)
	rec.TimeReceived = time.Now().UTC().Format(time.RFC3339Nano)
	b, err := proto.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.dstore.Put(context.Background(), storeKey(key), b); err != nil {
		t.Fatal(err)
	}
}

// storedSeq returns the seq of the card d stores for key, 0 if none.
func storedSeq(t testing.TB, d *Discovery, key string) uint64 {
	t.Helper()
	v := storedValue(t, d, key)
	if v == nil {
		return 0
	}
	c, err := openCard(key, v)
	if err != nil {
		t.Fatalf("stored card for %s does not verify: %v", key, err)
	}
	return c.Seq
}

// eventuallyRT waits until cond, a condition on d's routing table, holds,
// or fails the test once timeout passed. It looks again whenever the table
// changes (the DHT's add and remove callbacks; rtHost), not on a timer.
func eventuallyRT(t testing.TB, d *Discovery, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		changed := d.rt.wait() // before the look, so that no change is missed
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
	}
}

// eventually polls cond every 20 ms until it holds or timeout passes: for
// conditions no event announces (records stored on other nodes, logs).
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
