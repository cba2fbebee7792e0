package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// env is what the groups of a run share: a temp dir, the child processes,
// the mcpv2 binary and the long-lived servers, each started on first use.
// It is used by one goroutine at a time (the run's).
type env struct {
	cfg   config
	log   *slog.Logger
	dir   string
	procs children

	bin  string // the mcpv2 binary, once built or given
	bare string // the lean baseline binary (bench/bare), once built

	// sendKey is the identity of `mcpv2 send`'s data dir (sendDir) and
	// adminKey the bench's own granted client; the node's policy grants
	// both every skill.
	sendDir  string
	sendKey  crypto.PrivKey
	adminKey crypto.PrivKey

	node      *nodeProc
	roleProcs map[string]*roleProc
}

// nodeProc is the running `mcpv2 node` child that the call, edge and send
// rows share.
type nodeProc struct {
	*child
	tcp, quic protocol.Address // its loopback mesh addresses
	tcpAddr   string           // the TCP one as a multiaddr with /p2p/
	edge      string           // its edge's host:port
}

// roleProc is a running role child and what its ready line said.
type roleProc struct {
	*child
	info readyInfo
}

// newEnv makes the run's temp dir and identities; nothing runs yet.
func newEnv(cfg config, log *slog.Logger) (*env, error) {
	dir, err := os.MkdirTemp("", "mcpv2-bench-")
	if err != nil {
		return nil, fmt.Errorf("make a temp dir: %w", err)
	}
	e := &env{cfg: cfg, log: log, dir: dir, bin: cfg.mcpv2, roleProcs: map[string]*roleProc{}}
	e.sendDir = filepath.Join(dir, "sender")
	if err := os.MkdirAll(e.sendDir, 0o700); err != nil {
		return nil, errors.Join(err, e.Close())
	}
	// The CLI's identity file of a data dir (cmd/mcpv2 identityPath).
	if e.sendKey, err = transport.LoadOrCreateIdentity(filepath.Join(e.sendDir, "identity.key")); err != nil {
		return nil, errors.Join(err, e.Close())
	}
	if e.adminKey, _, err = crypto.GenerateEd25519Key(rand.Reader); err != nil {
		return nil, errors.Join(err, e.Close())
	}
	return e, nil
}

// Close kills the children and removes the temp dir.
func (e *env) Close() error {
	e.procs.closeAll()
	return os.RemoveAll(e.dir)
}

// binary returns the mcpv2 binary, building it on first use from the
// module that holds the working directory.
func (e *env) binary(ctx context.Context) (string, error) {
	if e.bin != "" {
		return e.bin, nil
	}
	bin, err := e.build(ctx, "./cmd/mcpv2", "mcpv2", "run the bench inside it, or give --mcpv2 PATH")
	if err != nil {
		return "", err
	}
	e.bin = bin
	return bin, nil
}

// bareBinary returns the lean baseline binary of the memory rows
// (bench/bare), building it on first use.
func (e *env) bareBinary(ctx context.Context) (string, error) {
	if e.bare != "" {
		return e.bare, nil
	}
	bin, err := e.build(ctx, "./bench/bare", "bare", "run the bench inside it")
	if err != nil {
		return "", err
	}
	e.bare = bin
	return bin, nil
}

// build runs `go build -o <temp dir>/name pkg` in the module that holds
// the working directory; hint says what to do when there is none.
func (e *env) build(ctx context.Context, pkg, name, hint string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("find the mcpv2 module to build %s (%s): go env GOMOD: %q %v", pkg, hint, gomod, err)
	}
	bin := filepath.Join(e.dir, name)
	e.log.Info("building "+pkg, "out", bin)
	bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(bctx, "go", "build", "-o", bin, pkg)
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// startBare starts the lean baseline binary in role with args and waits
// for its READY line, whose JSON it returns in info.
func (e *env) startBare(ctx context.Context, role string, info *readyInfo, args ...string) (*child, error) {
	bin, err := e.bareBinary(ctx)
	if err != nil {
		return nil, err
	}
	return e.procs.startReady(ctx, "the bare "+role+" host", append([]string{bin, role}, args...), nil, info)
}

// binSizes names the binaries built or given so far with their sizes,
// e.g. "mcpv2 55.1 MiB, bare 32.9 MiB".
func (e *env) binSizes() string {
	var out []string
	for _, b := range []struct{ name, path string }{{"mcpv2", e.bin}, {"bare", e.bare}} {
		if b.path == "" {
			continue
		}
		if fi, err := os.Stat(b.path); err == nil {
			out = append(out, b.name+" "+fmtMiB(float64(fi.Size())))
		}
	}
	if len(out) == 0 {
		return "no binary built"
	}
	return strings.Join(out, ", ")
}

// nodeArgs are the flags of every `mcpv2 node` of the bench: loopback only,
// no mDNS or NAT traversal, no rate limit.
func nodeArgs(dataDir string) []string {
	return []string{"node", "--data-dir", dataDir, "--no-mdns", "--no-nat",
		"--listen", "/ip4/127.0.0.1/tcp/0", "--listen", "/ip4/127.0.0.1/udp/0/quic-v1",
		"--rate-limit", "0", "--log-level", "warn"}
}

// startNode starts `mcpv2 node` with args (from nodeArgs) and waits for its
// banner.
func (e *env) startNode(ctx context.Context, name string, args []string) (*child, error) {
	bin, err := e.binary(ctx)
	if err != nil {
		return nil, err
	}
	return e.procs.start(ctx, name, append([]string{bin}, args...), nil,
		func(l string) bool { return strings.HasPrefix(l, "MCPV2_DATA_DIR=") })
}

// mcpv2Node returns the shared node, started on first use: mesh and edge,
// the send row's file limits lifted, a policy granting the bench's clients.
func (e *env) mcpv2Node(ctx context.Context) (*nodeProc, error) {
	if e.node != nil {
		return e.node, e.node.alive()
	}
	dir := filepath.Join(e.dir, "node")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	grants := map[string][]string{}
	for _, k := range []crypto.PrivKey{e.sendKey, e.adminKey} {
		id, err := peer.IDFromPrivateKey(k)
		if err != nil {
			return nil, err
		}
		grants[id.String()] = []string{"*"}
	}
	pol, err := json.Marshal(map[string]any{"grants": grants})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "policy.json"), pol, 0o600); err != nil {
		return nil, err
	}
	args := append(nodeArgs(dir), "--port", "0", "--public-ip", "127.0.0.1", "--max-inflight", "64",
		"--max-file", "1073741824", "--max-partial", "0", "--max-store", "0")
	c, err := e.startNode(ctx, "the mcpv2 node", args)
	if err != nil {
		return nil, err
	}
	n := &nodeProc{child: c}
	for _, a := range c.values("MCPV2_P2P_ADDRESS") {
		pa, err := protocol.ParseAddress(a)
		if err != nil {
			return nil, fmt.Errorf("the node's address %q: %w", a, err)
		}
		switch {
		case containsProto(a, "/tcp/"):
			n.tcp, n.tcpAddr = pa, a
		case containsProto(a, "/quic-v1"):
			n.quic = pa
		}
	}
	port := c.value("MCPV2_BOUND_PORT")
	if n.tcpAddr == "" || n.quic.PeerID == "" || port == "" {
		return nil, fmt.Errorf("%w: the node's banner lacks a TCP or QUIC address or MCPV2_BOUND_PORT: %q", errNotReady, c.lines)
	}
	n.edge = "127.0.0.1:" + port
	e.node = n
	return n, nil
}

// role returns the shared child of role (args none), started on first use.
func (e *env) role(ctx context.Context, role string, args ...string) (*roleProc, error) {
	if r := e.roleProcs[role]; r != nil {
		return r, r.alive()
	}
	r := &roleProc{}
	c, err := e.procs.startRole(ctx, role, &r.info, args...)
	if err != nil {
		return nil, err
	}
	r.child = c
	e.roleProcs[role] = r
	return r, nil
}

// meshClient is the mesh side's client: the client of a node.Dialer, whose
// host listens nowhere, as the CLI's client commands.
type meshClient struct {
	d *node.Dialer
	h host.Host
	*node.Client
}

// newMeshClient builds a mesh client with key, or a fresh identity when
// key is nil.
func newMeshClient(key crypto.PrivKey) (*meshClient, error) {
	if key == nil {
		var err error
		if key, _, err = crypto.GenerateEd25519Key(rand.Reader); err != nil {
			return nil, err
		}
	}
	d, err := node.NewDialer(context.Background(), node.WithIdentity(key), node.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	return &meshClient{d: d, h: d.Host(), Client: d.Client()}, nil
}

// Close closes the dialer: the client's streams and its host.
func (m *meshClient) Close() error { return m.d.Close() }

// containsProto reports whether the multiaddr string a has the component
// proto ("/tcp/", "/quic-v1").
func containsProto(a, proto string) bool { return strings.Contains(a, proto) }
