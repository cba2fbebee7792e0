package localapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	relayclient "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/goleak"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/keys"
	"github.com/mcpv2/mcpv2/transport"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// libp2p and quic-go keep package-level workers alive for the process.
		goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		goleak.IgnoreTopFunction("github.com/libp2p/go-libp2p/p2p/transport/quicreuse.(*reuse).gc"),
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		// net/http lingers 500 ms on a connection whose request body was
		// over the cap (MaxBytesReader) before it closes it: bounded.
		goleak.IgnoreAnyFunction("net/http.(*conn).closeWriteAndWait"),
	)
}

var loopback = []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newNode starts a node on loopback in dir (a fresh one when "").
func newNode(t testing.TB, dir string, mod func(*node.Config)) *node.Node {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := node.Config{DataDir: dir, ListenAddrs: loopback}
	if mod != nil {
		mod(&cfg)
	}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatalf("node.New: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// newAPI serves n's local API on its control socket and dials it.
func newAPI(t testing.TB, n *node.Node, opts ...Option) (*API, *Client) {
	t.Helper()
	a, err := New(n, opts...)
	if err != nil {
		t.Fatalf("localapi.New: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	c, err := Dial(ctxT(t), n.DataDir())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return a, c
}

func TestStatusAndID(t *testing.T) {
	n := newNode(t, "", nil)
	a, c := newAPI(t, n, WithEdgeURLs("http://127.0.0.1:8000"), WithDashboard("127.0.0.1:0", false), WithVersion("9.9.9"))
	s, err := c.Status(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.PeerID != n.ID().String() || s.Version != "9.9.9" || s.DataDir != n.DataDir() || s.Socket != a.Socket() {
		t.Fatalf("status %+v", s)
	}
	if !slices.Equal(s.EdgeURLs, []string{"http://127.0.0.1:8000"}) || !strings.HasPrefix(s.DashboardURL, "http://127.0.0.1:") || !strings.HasPrefix(a.DashboardLink(), s.DashboardURL+"login?token=") {
		t.Fatalf("edge %v dashboard %q", s.EdgeURLs, s.DashboardURL)
	}
	if s.Mesh || s.Reachability.Source != "no-mesh" || s.Reachability.Why == "" {
		t.Fatalf("reachability %+v (mesh %v)", s.Reachability, s.Mesh)
	}
	if len(s.Listen) != 2 || s.Started.IsZero() || s.Peers.Conns != 0 {
		t.Fatalf("listen %v started %v peers %+v", s.Listen, s.Started, s.Peers)
	}
	for _, l := range s.Listen {
		if strings.HasSuffix(l, "/tcp/0") || strings.Contains(l, "/udp/0/") {
			t.Fatalf("listen address %s: the port is not resolved", l)
		}
	}
	id, err := c.ID(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if id.PeerID != n.ID().String() || !slices.Equal(id.Addrs, n.P2PAddrs()) {
		t.Fatalf("id %+v, want %v", id, n.P2PAddrs())
	}
}

// Two nodes connected directly: each one's /v1/peers shows the other as
// a direct connection, with its transport and direction.
func TestPeersDirect(t *testing.T) {
	a := newNode(t, "", nil)
	b := newNode(t, "", nil)
	_, ca := newAPI(t, a)
	_, cb := newAPI(t, b)
	tcp := ma.StringCast(a.P2PAddrs()[0])
	info, err := peer.AddrInfoFromP2pAddr(tcp)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Host().Connect(ctxT(t), *info); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c         *Client
		other     *node.Node
		direction string
	}{{ca, b, "inbound"}, {cb, a, "outbound"}} {
		p, err := tc.c.Peers(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Conns) != 1 || p.Counts.Direct != 1 || p.Counts.Relayed != 0 || p.Counts.Peers != 1 {
			t.Fatalf("peers %+v", p)
		}
		cn := p.Conns[0]
		if cn.Peer != tc.other.ID().String() || cn.Relayed || cn.Direction != tc.direction || cn.Opened.IsZero() || cn.Remote == "" {
			t.Fatalf("conn %+v", cn)
		}
		want := "tcp"
		if strings.Contains(cn.Remote, "quic") {
			want = "quic-v1"
		}
		if cn.Transport != want || p.Counts.ByTransport[want] != 1 {
			t.Fatalf("transport %q, counts %v; remote %s", cn.Transport, p.Counts.ByTransport, cn.Remote)
		}
		s, err := tc.c.Status(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if s.Peers.Direct != 1 || s.Peers.Relayed != 0 {
			t.Fatalf("status peers %+v", s.Peers)
		}
	}
}

// A peer reached through a circuit relay shows as relayed in /v1/peers.
// (The relay reservations of the status come from AutoRelay's event,
// whose addresses leave out loopback relays: the NAT lab shows them.)
func TestRelayed(t *testing.T) {
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	rh, err := transport.NewHost(transport.WithIdentity(key), transport.WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rh.Close() })
	rl, err := relayv2.New(rh)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Close() })
	relayAddr := rh.Addrs()[0].String() + "/p2p/" + rh.ID().String()

	// B listens nowhere: it is reachable only through the relay (libp2p
	// turns the relay transport off with the listen addresses: back on).
	b := newNode(t, "", func(c *node.Config) {
		c.HostOptions = append(c.HostOptions, transport.WithListenAddrs(), transport.WithLibp2pOptions(libp2p.EnableRelay()))
	})
	rinfo := peer.AddrInfo{ID: rh.ID(), Addrs: rh.Addrs()}
	if err := b.Host().Connect(ctxT(t), rinfo); err != nil {
		t.Fatal(err)
	}
	if _, err := relayclient.Reserve(ctxT(t), b.Host(), rinfo); err != nil {
		t.Fatalf("reserve: %v", err)
	}
	a := newNode(t, "", func(c *node.Config) {
		c.HostOptions = append(c.HostOptions, transport.WithLibp2pOptions(libp2p.EnableRelay()))
	})
	_, ca := newAPI(t, a)
	circuit := ma.StringCast(relayAddr + "/p2p-circuit/p2p/" + b.ID().String())
	info, err := peer.AddrInfoFromP2pAddr(circuit)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Host().Connect(ctxT(t), *info); err != nil {
		t.Fatalf("connect through the relay: %v", err)
	}
	p, err := ca.Peers(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var relayed *node.Conn
	for i, c := range p.Conns {
		if c.Peer == b.ID().String() {
			relayed = &p.Conns[i]
		}
	}
	if relayed == nil || !relayed.Relayed || relayed.Transport != "relay" || p.Counts.Relayed != 1 {
		t.Fatalf("peers %+v", p)
	}
}

// The control socket is 0600 whatever the umask, a second API on the same
// data dir does not steal a live one's socket, a dead one's socket is
// replaced, and Close removes it.
func TestSocket(t *testing.T) {
	n := newNode(t, "", nil)
	old := syscall.Umask(0)
	a, c := newAPI(t, n)
	syscall.Umask(old)
	fi, err := os.Lstat(a.Socket())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v", fi.Mode())
	}
	if _, err := New(n); !errors.Is(err, ErrNodeRunning) {
		t.Fatalf("second New on a live socket: %v", err)
	}
	if _, err := c.Status(ctxT(t)); err != nil {
		t.Fatalf("the first API after the second's attempt: %v", err)
	}
	testenv.CloseTwice(t, c)
	testenv.CloseTwice(t, a)
	if _, err := os.Lstat(a.Socket()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket after Close: %v", err)
	}
	if _, err := Dial(ctxT(t), n.DataDir()); !errors.Is(err, ErrNoNode) {
		t.Fatalf("Dial after Close: %v", err)
	}

	// A stale socket: bound, and its listener closed without removing it.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: SocketPath(n.DataDir()), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	if _, err := Dial(ctxT(t), n.DataDir()); !errors.Is(err, ErrNoNode) {
		t.Fatalf("Dial to a stale socket: %v", err)
	}
	_, c2 := newAPI(t, n)
	if _, err := c2.Status(ctxT(t)); err != nil {
		t.Fatalf("after replacing a stale socket: %v", err)
	}

	// A file that is not a socket is left alone.
	dir := t.TempDir()
	if err := os.WriteFile(SocketPath(dir), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(SocketPath(dir), nil); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen over a file: %v", err)
	}
	// A directory others may write to is refused.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(filepath.Join(dir, "x.sock"), slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "writable by others") || !strings.Contains(err.Error(), "chmod go-w "+dir) {
		t.Fatalf("Listen in a 0777 directory: %v", err)
	}
	// A sticky one (as /tmp) is not: others cannot replace what is ours.
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(filepath.Join(dir, "x.sock"), nil)
	if err != nil {
		t.Fatalf("Listen in a sticky 0777 directory: %v", err)
	}
	ln.Close()
}

// CheckPrivate, the rule for what mcpv2 trusts on disk: this user's (or
// root's), writable by no one else, a sticky directory excepted.
func TestCheckPrivate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(path string) error {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return CheckPrivate("the thing", path, fi)
	}
	for _, tc := range []struct {
		path string
		mode os.FileMode
		want string // "" accepted
	}{
		{file, 0o644, ""},
		{file, 0o600, ""},
		{file, 0o664, "the thing " + file + " is writable by others (mode 0664), who could change it: chmod go-w " + file},
		{file, 0o646, "writable by others (mode 0646)"},
		{file, 0o666 | os.ModeSticky, "writable by others"},
		{dir, 0o755, ""},
		{dir, 0o775, "the thing " + dir + " is writable by others (mode 0775)"},
		{dir, 0o777 | os.ModeSticky, ""},
	} {
		if err := os.Chmod(tc.path, tc.mode); err != nil {
			t.Fatal(err)
		}
		err := check(tc.path)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s mode %v: %v, want %q", tc.path, tc.mode, err, tc.want)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		return // only root can give a file away
	}
	if err := os.Chown(file, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	want := "the thing " + file + " belongs to uid 65534, not to this user (uid 0) or root, and its owner could change it: chown 0 " + file
	if err := check(file); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a file of nobody's: %v, want %q", err, want)
	}
}

// A data dir whose socket path is longer than a socket address takes
// still gets its socket (bound and dialled through /proc/self/fd).
func TestLongDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, dir, nil)
	a, c := newAPI(t, n)
	if len(a.Socket()) <= maxSunPath {
		t.Fatalf("socket path %d bytes: not long", len(a.Socket()))
	}
	if _, err := c.Status(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

func TestNoNode(t *testing.T) {
	dir := t.TempDir()
	_, err := Dial(ctxT(t), dir)
	want := "no node running in " + dir + " (start one with mcpv2 node --data-dir " + dir + ")"
	if !errors.Is(err, ErrNoNode) || err.Error() != want {
		t.Fatalf("Dial: %v, want %q", err, want)
	}
	if _, err := NewClient(dir).Status(ctxT(t)); !errors.Is(err, ErrNoNode) {
		t.Fatalf("Status: %v", err)
	}
}

// The key routes use the node's ring: a key added through the API
// verifies at once in the ring the edge holds, a revoked one is refused,
// and the ring's refusals come back as its errors.
func TestKeys(t *testing.T) {
	n := newNode(t, "", nil)
	ring, err := keys.Open(filepath.Join(n.DataDir(), keys.FileName))
	if err != nil {
		t.Fatal(err)
	}
	_, c := newAPI(t, n, WithKeys(ring))
	added, err := c.AddKey(ctxT(t), AddKeyRequest{Name: "ci", Grants: []string{"echo"}, Expires: "30d"})
	if err != nil {
		t.Fatal(err)
	}
	if added.Key.Name != "ci" || added.Key.Status != keys.StatusActive || added.Key.Expires == nil || added.File != ring.Path() {
		t.Fatalf("added %+v", added)
	}
	if name, grants, err := ring.VerifyKey(added.Secret); err != nil || name != "ci" || !slices.Equal(grants, []string{"echo"}) {
		t.Fatalf("VerifyKey: %q %v %v", name, grants, err)
	}
	if _, err := c.AddKey(ctxT(t), AddKeyRequest{Name: "ci"}); !errors.Is(err, keys.ErrNameInUse) {
		t.Fatalf("second add: %v", err)
	}
	if _, err := c.AddKey(ctxT(t), AddKeyRequest{Name: "bad name"}); err == nil || !strings.Contains(err.Error(), "key name") {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := c.AddKey(ctxT(t), AddKeyRequest{Name: "x", Expires: "soon"}); err == nil || !strings.Contains(err.Error(), "expires") {
		t.Fatalf("bad expiry: %v", err)
	}
	list, err := c.Keys(ctxT(t))
	if err != nil || len(list.Keys) != 1 || list.Keys[0].Name != "ci" {
		t.Fatalf("keys %+v %v", list, err)
	}
	if _, err := c.RevokeKey(ctxT(t), "ci"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ring.VerifyKey(added.Secret); err == nil {
		t.Fatal("a revoked key verifies")
	}
	if _, err := c.RevokeKey(ctxT(t), "ci"); !errors.Is(err, keys.ErrAlreadyRevoked) {
		t.Fatalf("second revoke: %v", err)
	}
	if _, err := c.RevokeKey(ctxT(t), "nobody"); !errors.Is(err, keys.ErrNoKey) {
		t.Fatalf("revoke of no key: %v", err)
	}
}

// Wrong methods are 405 with Allow, unknown routes 404, bodies capped,
// unknown fields named: all as JSON errors.
func TestHandlerErrors(t *testing.T) {
	n := newNode(t, "", nil)
	a, err := New(n, WithSocket(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if a.Socket() != "" {
		t.Fatalf("socket %q with WithSocket(\"\")", a.Socket())
	}
	srv := &http.Server{Handler: a.Handler()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	base := "http://" + ln.Addr().String()
	for _, tc := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"POST", "/v1/status", "", 405, "method not allowed"},
		{"DELETE", "/v1/keys", "", 405, "method not allowed"},
		{"GET", "/v2/status", "", 404, "no such route"},
		{"POST", "/v1/keys", `{"name":"a","grant":["x"]}`, 400, `unknown field "grant"`},
		{"POST", "/v1/keys", `{"name":"a"} {}`, 400, "more than one JSON value"},
		{"POST", "/v1/keys", `{}`, 400, `"name" is missing`},
		{"POST", "/v1/keys", `{"name":"` + strings.Repeat("a", maxBody) + `"}`, 400, "over 65536 bytes"},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e ErrorResponse
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.code || !strings.Contains(e.Error, tc.want) || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %+v (%v), want %d %q", tc.method, tc.path, resp.StatusCode, e, err, tc.code, tc.want)
		}
		if tc.code == 405 && resp.Header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tc.method, tc.path)
		}
	}
}

func TestOptions(t *testing.T) {
	n := newNode(t, "", nil)
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{WithKeys(nil), "WithKeys(nil)"},
		{WithKeysFile(""), "WithKeysFile"},
		{WithLogger(nil), "WithLogger(nil)"},
		{WithClock(nil), "WithClock(nil)"},
		{WithVersion(""), "WithVersion"},
	} {
		if _, err := New(n, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%s): %v", tc.want, err)
		}
	}
	if _, err := os.Lstat(SocketPath(n.DataDir())); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed New left a socket: %v", err)
	}
}

// lockedBuffer is a log sink for a test.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A process of another user is refused even when the socket's mode would
// let it connect (SO_PEERCRED), while this user's process is served; a
// directory of another user is refused. curl
// (Debian's) is the client; it runs as nobody, which needs root.
func TestPeerCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.SkipEnv(t, "running a client as another user needs root")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		testenv.SkipEnv(t, "no curl: %v", err)
	}
	n := newNode(t, "", nil)
	var logs lockedBuffer
	a, _ := newAPI(t, n, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	// Open the way to the socket for every user: only the credential
	// check is left to refuse.
	for _, d := range []string{filepath.Dir(n.DataDir()), n.DataDir()} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(a.Socket(), 0o666); err != nil {
		t.Fatal(err)
	}
	get := func(uid uint32) (string, error) {
		cmd := exec.CommandContext(ctxT(t), curl, "-sS", "--max-time", "20", "--unix-socket", a.Socket(), "http://local/v1/id")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := get(0); err != nil || !strings.Contains(out, n.ID().String()) {
		t.Fatalf("curl as root: %v\n%s", err, out)
	}
	out, err := get(65534)
	if err == nil || strings.Contains(out, n.ID().String()) {
		t.Fatalf("curl as nobody was served: %v\n%s", err, out)
	}
	if !strings.Contains(logs.String(), "refused a connection of another user") || !strings.Contains(logs.String(), "uid=65534") {
		t.Fatalf("no refusal logged:\n%s", logs.String())
	}

	// A directory of another user (not root) is refused: its owner could
	// swap the socket.
	dir := t.TempDir()
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(SocketPath(dir), nil); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Fatalf("Listen in nobody's directory: %v", err)
	}
}

// The status follows the host's events: reachability (with since), the
// NAT type and AutoRelay's relay addresses (grouped by relay), as libp2p
// emits them. (AutoRelay itself emits no address of a loopback relay, so
// the events are emitted here on the node's bus.)
func TestStatusEvents(t *testing.T) {
	n := newNode(t, "", func(c *node.Config) { c.Mesh = &node.MeshConfig{NoMDNS: true, NoNAT: true, Mode: "client"} })
	_, c := newAPI(t, n)
	bus := n.Host().EventBus()
	relay := "12D3KooWGRYZDHBembyGJQqQ6WgLqJWYNjnECGUz7ZNnsGsQPAVi"
	emit := func(evt any) {
		em, err := bus.Emitter(evt, eventbus.Stateful)
		if err != nil {
			t.Fatal(err)
		}
		defer em.Close()
		var e any
		switch evt.(type) {
		case *event.EvtLocalReachabilityChanged:
			e = event.EvtLocalReachabilityChanged{Reachability: network.ReachabilityPrivate}
		case *event.EvtNATDeviceTypeChanged:
			e = event.EvtNATDeviceTypeChanged{TransportProtocol: network.NATTransportUDP, NatDeviceType: network.NATDeviceTypeEndpointDependent}
		case *event.EvtAutoRelayAddrsUpdated:
			e = event.EvtAutoRelayAddrsUpdated{RelayAddrs: []ma.Multiaddr{
				ma.StringCast("/ip4/1.2.3.4/tcp/4001/p2p/" + relay + "/p2p-circuit"),
				ma.StringCast("/ip4/1.2.3.4/udp/4001/quic-v1/p2p/" + relay + "/p2p-circuit"),
			}}
		}
		if err := em.Emit(e); err != nil {
			t.Fatal(err)
		}
	}
	emit(new(event.EvtLocalReachabilityChanged))
	emit(new(event.EvtNATDeviceTypeChanged))
	emit(new(event.EvtAutoRelayAddrsUpdated))
	wait := ctxT(t)
	for {
		s, err := c.Status(wait)
		if err != nil {
			t.Fatal(err)
		}
		if s.Reachability.State == "private" && len(s.NAT) == 1 && len(s.Relays) == 1 {
			if s.Reachability.Source != "no-nat" || s.Reachability.Since.IsZero() ||
				s.NAT[0] != (node.NATType{Transport: "udp", Type: "endpoint-dependent"}) ||
				s.Relays[0].Relay != relay || len(s.Relays[0].Addrs) != 2 {
				t.Fatalf("status %+v", s)
			}
			return
		}
		select {
		case <-wait.Done():
			t.Fatalf("the events did not reach the status: %+v", s)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// rogueServer is a Node.js HTTP server on the unix socket argv[1] that
// answers every request as the node's /v1/id would, with a PeerID of its
// own; it prints "ready" once it listens.
const rogueServer = `
const http = require('http');
http.createServer((req, res) => {
	res.setHeader('Content-Type', 'application/json');
	res.end(JSON.stringify({peer_id: 'rogue', addrs: []}));
}).listen(process.argv[1], () => console.log('ready'));
`

// A control socket that another user serves is not trusted: the client
// refuses it before it reads an answer, when the socket file is that
// user's, and when it is root's but that user's process listens on it
// (SO_PEERCRED). The data dir's owner is trusted (root's mcpv2 status of
// a systemd DynamicUser's node). The rogue server is Node.js (Debian's),
// run as nobody, which needs root.
func TestUntrustedSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.SkipEnv(t, "running a server as another user needs root")
	}
	nodejs, err := exec.LookPath("node")
	if err != nil {
		testenv.SkipEnv(t, "no node (Node.js): %v", err)
	}
	// root's data dir, sticky and open to all (as /tmp), where nobody can
	// make the socket before the node does.
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	sock := SocketPath(dir)
	cmd := exec.Command(nodejs, "-e", rogueServer, sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stderr := &testenv.Buffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("node as nobody: %q %v\n%s", line, err, stderr.String())
	}
	fi, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if uid, _ := owner(fi); uid != 65534 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("the rogue socket: uid %d, %v", uid, fi.Mode())
	}
	// It answers as a node would (to a client that checks nothing).
	raw := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dialSocket(ctx, sock) }}}
	defer raw.CloseIdleConnections()
	resp, err := raw.Get("http://local/v1/id")
	if err != nil {
		t.Fatalf("the rogue server does not answer: %v", err)
	}
	var id IDResponse
	err = json.NewDecoder(resp.Body).Decode(&id)
	resp.Body.Close()
	if err != nil || id.PeerID != "rogue" {
		t.Fatalf("the rogue server's answer: %+v %v", id, err)
	}

	refused := func(what, want string) {
		t.Helper()
		if _, err := Dial(ctxT(t), dir); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Dial = %v, want ErrUntrusted and %q", what, err, want)
		}
		c := NewClient(dir)
		defer c.Close()
		got, err := c.ID(ctxT(t))
		if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "local API "+sock+": ") {
			t.Errorf("%s: ID = %+v, %v; want ErrUntrusted and %q", what, got, err, want)
		}
	}
	refused("nobody's socket", "the control socket is another user's: it belongs to uid 65534, not to this user (uid 0) or root")
	// root's socket file, nobody's server behind it.
	if err := os.Lchown(sock, 0, 0); err != nil {
		t.Fatal(err)
	}
	refused("root's socket, nobody's server", "the control socket is another user's: a process of uid 65534 serves it, not one of this user (uid 0) or root")

	// The data dir is nobody's, and only nobody's to write: its node is
	// nobody's, which root may ask.
	if err := os.Lchown(sock, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c, err := Dial(ctxT(t), dir)
	if err != nil {
		t.Fatalf("Dial to the node of the data dir's owner: %v", err)
	}
	defer c.Close()
	if got, err := c.ID(ctxT(t)); err != nil || got.PeerID != "rogue" {
		t.Fatalf("ID of the node of the data dir's owner: %+v, %v", got, err)
	}
	// Not when others may write there too.
	if err := os.Chmod(dir, 0o770); err != nil {
		t.Fatal(err)
	}
	refused("nobody's group-writable data dir", "it belongs to uid 65534, not to this user (uid 0) or root")
}
