package node

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/protocol"
)

// fakeEdge is an EdgeCaller that records what it was asked.
type fakeEdge struct {
	mu    sync.Mutex
	calls []string
	opts  []protocol.CallOptions
}

func (f *fakeEdge) record(what string, o protocol.CallOptions) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, what)
	f.opts = append(f.opts, o)
}

func (f *fakeEdge) Call(_ context.Context, addr protocol.Address, msg []byte) ([]byte, error) {
	f.record("call "+addr.URL+" "+string(msg), protocol.CallOptions{})
	return []byte(`{"jsonrpc":"2.0","id":1,"result":{"edge":true}}`), nil
}

func (f *fakeEdge) CallSkill(_ context.Context, addr protocol.Address, skill string, _ json.RawMessage, o protocol.CallOptions) (json.RawMessage, error) {
	f.record("skill "+addr.URL+" "+skill, o)
	return json.RawMessage(`{"edge":true}`), nil
}

func (f *fakeEdge) CallMethod(_ context.Context, addr protocol.Address, method string, o protocol.CallOptions) (json.RawMessage, error) {
	f.record("method "+addr.URL+" "+method, o)
	return json.RawMessage(`{"edge":true}`), nil
}

func (f *fakeEdge) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// newTestDialer returns a dialer with opts, closed when the test ends.
func newTestDialer(t testing.TB, opts ...DialerOption) *Dialer {
	t.Helper()
	d, err := NewDialer(ctxT(t), opts...)
	if err != nil {
		t.Fatalf("NewDialer: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func mustAddr(t testing.TB, s string) protocol.Address {
	t.Helper()
	a, err := protocol.ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestDialerRoutes: a mesh address goes to the mesh client (the peer
// answers), an HTTP address to the EdgeCaller, with the call's options.
func TestDialerRoutes(t *testing.T) {
	b := newTestNode(t, nil)
	fe := &fakeEdge{}
	d := newTestDialer(t, WithEdge(fe))
	mesh := addrOf(t, b)
	edgeAddr := mustAddr(t, "mcpv2://127.0.0.1:9/mcpv2")

	r, err := d.Connect(ctxT(t), mesh)
	if err != nil || r.Peer != b.ID() || r.Relayed || r.Direct == nil {
		t.Fatalf("Connect(mesh) = %+v, %v; want %s reached directly", r, err, b.ID())
	}
	res, err := d.CallSkill(ctxT(t), mesh, "ping", json.RawMessage(`{"payload":"x"}`), protocol.CallOptions{})
	if err != nil || !strings.Contains(string(res), b.ID().String()) {
		t.Fatalf("CallSkill(mesh ping) = %s, %v; want b's pong", res, err)
	}
	res, err = d.CallMethod(ctxT(t), mesh, protocol.MethodToolsList, protocol.CallOptions{})
	if err != nil || !strings.Contains(string(res), `"ping"`) {
		t.Fatalf("CallMethod(mesh tools/list) = %s, %v", res, err)
	}
	out, err := d.Call(ctxT(t), mesh, []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ping","arguments":{}}}`))
	if err != nil || !strings.Contains(string(out), `"id":7`) || !strings.Contains(string(out), b.ID().String()) {
		t.Fatalf("Call(mesh) = %s, %v", out, err)
	}
	if got := fe.seen(); len(got) != 0 {
		t.Fatalf("mesh calls reached the edge client: %q", got)
	}

	if r, err := d.Connect(ctxT(t), edgeAddr); err != nil || r.Peer != "" || r.Direct != nil || r.Relayed || r.Took != 0 {
		t.Errorf("Connect(http) = %+v, %v; want the zero route", r, err)
	}
	res, err = d.CallSkill(ctxT(t), edgeAddr, "ask", nil, protocol.CallOptions{Provider: "gemini", Session: "tok"})
	if err != nil || string(res) != `{"edge":true}` {
		t.Fatalf("CallSkill(http) = %s, %v", res, err)
	}
	if _, err := d.CallMethod(ctxT(t), edgeAddr, protocol.MethodAgentCard, protocol.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Call(ctxT(t), edgeAddr, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	want := []string{"skill " + edgeAddr.URL + " ask", "method " + edgeAddr.URL + " agent/card", "call " + edgeAddr.URL + " {}"}
	if got := fe.seen(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("edge calls %q, want %q", got, want)
	}
	if fe.opts[0] != (protocol.CallOptions{Provider: "gemini", Session: "tok"}) {
		t.Errorf("edge got options %+v", fe.opts[0])
	}
}

// TestDialerRefuses: without an edge client an HTTP address is refused
// with ErrNoEdge; WithoutMesh, a mesh address with ErrNoMesh; neither
// reaches anything.
func TestDialerRefuses(t *testing.T) {
	b := newTestNode(t, nil)
	mesh := addrOf(t, b)
	edgeAddr := mustAddr(t, "http://127.0.0.1:9")

	meshOnly := newTestDialer(t)
	if _, err := meshOnly.CallSkill(ctxT(t), edgeAddr, "ping", nil, protocol.CallOptions{}); !errors.Is(err, ErrNoEdge) || !strings.Contains(err.Error(), "127.0.0.1:9") {
		t.Errorf("http address without an edge client: %v, want ErrNoEdge naming the address", err)
	}
	if _, err := meshOnly.CallMethod(ctxT(t), edgeAddr, protocol.MethodToolsList, protocol.CallOptions{}); !errors.Is(err, ErrNoEdge) {
		t.Errorf("CallMethod: %v", err)
	}
	if _, err := meshOnly.Connect(ctxT(t), edgeAddr); !errors.Is(err, ErrNoEdge) {
		t.Errorf("Connect: %v", err)
	}

	fe := &fakeEdge{}
	edgeOnly := newTestDialer(t, WithoutMesh(), WithEdge(fe))
	if edgeOnly.Host() != nil || edgeOnly.Client() != nil || edgeOnly.Discovery() != nil || edgeOnly.WaitDirect() != 0 {
		t.Errorf("WithoutMesh built a host, client or DHT")
	}
	for name, call := range map[string]func() error{
		"CallSkill": func() error {
			_, err := edgeOnly.CallSkill(ctxT(t), mesh, "ping", nil, protocol.CallOptions{})
			return err
		},
		"CallMethod": func() error {
			_, err := edgeOnly.CallMethod(ctxT(t), mesh, "tools/list", protocol.CallOptions{})
			return err
		},
		"Call":      func() error { _, err := edgeOnly.Call(ctxT(t), mesh, []byte(`{}`)); return err },
		"Connect":   func() error { _, err := edgeOnly.Connect(ctxT(t), mesh); return err },
		"NewClient": func() error { _, err := edgeOnly.NewClient(); return err },
	} {
		if err := call(); !errors.Is(err, ErrNoMesh) {
			t.Errorf("%s(mesh) WithoutMesh: %v, want ErrNoMesh", name, err)
		}
	}
	if _, err := edgeOnly.CallSkill(ctxT(t), edgeAddr, "ping", nil, protocol.CallOptions{}); err != nil {
		t.Errorf("WithoutMesh, http: %v", err)
	}
	if _, err := edgeOnly.CallSkill(ctxT(t), protocol.Address{}, "ping", nil, protocol.CallOptions{}); !errors.Is(err, protocol.ErrBadAddress) {
		t.Errorf("zero address: %v, want ErrBadAddress", err)
	}
	if got := fe.seen(); len(got) != 1 {
		t.Errorf("edge calls %q, want the one http call", got)
	}
}

// TestDialerCloseTwice: Close closes the host, the clients it made, and
// returns net.ErrClosed on repeat; calls after it fail with net.ErrClosed.
func TestDialerCloseTwice(t *testing.T) {
	b := newTestNode(t, nil)
	mesh := addrOf(t, b)
	for _, opts := range [][]DialerOption{nil, {WithoutMesh(), WithEdge(&fakeEdge{})}} {
		d, err := NewDialer(ctxT(t), opts...)
		if err != nil {
			t.Fatal(err)
		}
		var extra *Client
		if d.Host() != nil {
			if _, err := d.CallSkill(ctxT(t), mesh, "ping", nil, protocol.CallOptions{}); err != nil {
				t.Fatal(err)
			}
			if extra, err = d.NewClient(WithSecret([]byte("other"))); err != nil {
				t.Fatal(err)
			}
		}
		testenv.CloseTwice(t, d)
		if _, err := d.CallSkill(ctxT(t), mesh, "ping", nil, protocol.CallOptions{}); !errors.Is(err, net.ErrClosed) {
			t.Errorf("call after Close: %v, want net.ErrClosed", err)
		}
		if extra != nil {
			if err := extra.Close(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("the dialer's Close left its extra client open: %v", err)
			}
			if len(d.Host().Network().Peers()) != 0 {
				t.Errorf("the host still has peers after Close")
			}
		}
	}
}

// TestDialerOptionErrors: an option error fails NewDialer before anything
// starts; a failure after the host started (the join of an unreachable
// mesh) leaves nothing running: the port it listened on is free again.
func TestDialerOptionErrors(t *testing.T) {
	for name, opts := range map[string][]DialerOption{
		"nil key":             {WithIdentity(nil)},
		"nil logger":          {WithLogger(nil)},
		"nil edge":            {WithEdge(nil)},
		"zero join timeout":   {WithJoinTimeout(0)},
		"nil client clock":    {WithClientOptions(WithClock(nil))},
		"empty listen":        {WithListenAddrs(nil)},
		"no mesh, bootstrap":  {WithoutMesh(), WithBootstrap(peer.AddrInfo{ID: "x"})},
		"client option error": {WithClientOptions(func(*clientConfig) error { return errors.New("bad option") })},
	} {
		d, err := NewDialer(ctxT(t), opts...)
		if err == nil || d != nil || !strings.HasPrefix(err.Error(), "node: new dialer: ") {
			t.Errorf("%s: NewDialer = %v, %v; want an error", name, d, err)
		}
	}

	// A mesh that cannot be joined: the bootstrap peer's port is closed.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	boot := peer.AddrInfo{ID: pid, Addrs: []ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1/tcp/" + strconv.Itoa(deadPort))}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	d, err := NewDialer(ctxT(t), WithBootstrap(boot), WithoutNAT(), WithJoinTimeout(3*time.Second),
		WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/"+strconv.Itoa(port))))
	if err == nil || d != nil || !strings.Contains(err.Error(), "join the mesh") {
		t.Fatalf("NewDialer with an unreachable mesh = %v, %v; want a join error", d, err)
	}
	again, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("the failed dialer still holds its port: %v", err)
	}
	again.Close()
}

// TestDialerNewClient: a client made by NewClient calls with its own
// secret, on the dialer's host.
func TestDialerNewClient(t *testing.T) {
	b := newTestNode(t, func(c *Config) { c.Secret = []byte("b-secret") })
	d := newTestDialer(t, WithClientOptions(WithWaitDirect(time.Second)))
	cl, err := d.NewClient(WithSecret([]byte("b-secret")))
	if err != nil {
		t.Fatal(err)
	}
	if cl.waitDirect != time.Second || cl.host != d.Host() {
		t.Errorf("the new client does not share the dialer's host and wait")
	}
	// list_files needs a grant or the secret: only the secret holder runs it.
	if _, err := cl.CallSkill(ctxT(t), addrOf(t, b), "list_files", nil, protocol.CallOptions{}); err != nil {
		t.Errorf("with b's secret: %v", err)
	}
	if _, err := d.CallSkill(ctxT(t), addrOf(t, b), "list_files", nil, protocol.CallOptions{}); codeOf(err) != protocol.CodeNotPermitted {
		t.Errorf("without a secret: %v, want not permitted", err)
	}
}

// TestClientOptionsAndClose: NewClient refuses a nil host and an option
// error; Close is idempotent (net.ErrClosed on repeat) and a call, a
// Connect or a file transfer after it fails with net.ErrClosed.
func TestClientOptionsAndClose(t *testing.T) {
	b := newTestNode(t, nil)
	d := newTestDialer(t)
	if c, err := NewClient(nil); err == nil || c != nil {
		t.Errorf("NewClient(nil host) = %v, %v; want an error", c, err)
	}
	if c, err := NewClient(d.Host(), WithClock(nil)); err == nil || c != nil || !strings.Contains(err.Error(), "WithClock") {
		t.Errorf("NewClient(WithClock(nil)) = %v, %v; want an error", c, err)
	}
	c, err := NewClient(d.Host(), WithMaxMessage(-1), WithWaitDirect(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if c.maxMsg != protocol.DefaultMaxMessage || c.waitDirect != 0 {
		t.Errorf("maxMsg %d, waitDirect %v: want the defaults", c.maxMsg, c.waitDirect)
	}
	if _, err := c.CallSkill(ctxT(t), addrOf(t, b), "ping", nil, protocol.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.CloseTwice(t, c)
	if _, err := c.CallSkill(ctxT(t), addrOf(t, b), "ping", nil, protocol.CallOptions{}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("CallSkill after Close: %v, want net.ErrClosed", err)
	}
	if _, err := c.Send(ctxT(t), b.ID(), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), true); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Send after Close: %v, want net.ErrClosed", err)
	}
	if _, err := c.Connect(ctxT(t), addrOf(t, b)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Connect after Close: %v, want net.ErrClosed", err)
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendFile(ctxT(t), addrOf(t, b), path, SendOptions{}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("SendFile after Close: %v, want net.ErrClosed", err)
	}
}

// TestPoolAgesOnClientClock: an idle stream is reused while the client's
// clock says it is younger than idleKeep, and not after.
func TestPoolAgesOnClientClock(t *testing.T) {
	b := newTestNode(t, nil)
	var mu sync.Mutex
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	d := newTestDialer(t, WithClientOptions(WithClock(clock)))
	cl := d.Client()
	if _, err := cl.CallSkill(ctxT(t), addrOf(t, b), "ping", nil, protocol.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	s, reused, err := cl.pool.get(ctxT(t), b.ID(), cl.maxMsg)
	if err != nil || !reused {
		t.Fatalf("get right after a call: reused %v, %v; want the idle stream", reused, err)
	}
	cl.pool.put(b.ID(), s)
	mu.Lock()
	now = now.Add(idleKeep)
	mu.Unlock()
	s, reused, err = cl.pool.get(ctxT(t), b.ID(), cl.maxMsg)
	if err != nil || reused {
		t.Fatalf("get idleKeep later on the client's clock: reused %v, %v; want a new stream", reused, err)
	}
	cl.pool.discard(b.ID(), s, false)
}
