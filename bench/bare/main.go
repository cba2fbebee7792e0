// Command bare is the lean baseline of the bench's memory rows (issue 25):
// a go-libp2p host with kad-dht, built from go-libp2p, kad-dht,
// go-multiaddr and the standard library only, so that its resident memory
// is what a host and a DHT cost and not what a larger binary's pages add.
// The bench (`go run ./bench`) builds it with `go build ./bench/bare` into
// its temp dir and runs it as a child; it is not meant to be run by hand.
//
//	bare idle                  a host with a kad-dht server, no bootstrap peers
//	bare echo                  the same, also echoing every frame of /mcpv2-bench/echo/1.0.0
//	bare mesh ADDR [ADDR…]     the same as idle, joined to the mesh through the bootstrap peers ADDR
//
// Every role prints the ready line of bench/internal/lean
//
//	READY {"addrs":[full multiaddrs with /p2p/]}
//
// then serves until its stdin closes or it gets SIGTERM or SIGINT. Each
// line "stat TAG" on stdin is answered with a line
//
//	STAT TAG {"rt":N,"peers":M}
//
// (the DHT routing table's size and the connected peers), each line
// "peers TAG" with
//
//	PEERS TAG {"rt":[PeerIDs],"conns":[PeerIDs]}
//
// (the routing table's peers and the connected ones); other lines are
// ignored. The host is lean.NewHost, the bench's own baselines' host:
// libp2p's defaults with the transports (TCP, QUIC-v1), security (Noise,
// TLS) and muxer (yamux) of mcpv2's transport.NewHost, listening on
// loopback; in the mesh role it also has an mcpv2 node's connection
// manager (lean.MeshOptions), so that in a large mesh it holds and trims
// connections as the nodes beside it do. The DHT speaks mcpv2's
// /mcpv2/kad/1.0.0 (discovery.ProtocolPrefix) in server mode, and stores
// the mesh's card records (namespace "mcpv2card") without checking their
// signatures, so that in a mesh of mcpv2 nodes it holds what an mcpv2 node
// holds and acknowledges what they put.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/mcpv2/mcpv2/bench/internal/lean"
)

// The wire names this program shares with mcpv2; it imports no package of
// mcpv2, so they are written here again (the bench's TestLeanAgrees checks
// them).
const (
	// dhtPrefix is mcpv2's DHT protocol prefix (discovery.ProtocolPrefix).
	dhtPrefix = "/mcpv2"
	// cardNamespace is the namespace of mcpv2's card records
	// (discovery.CardNamespace).
	cardNamespace = "mcpv2card"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bare idle|echo|mesh [BOOTSTRAP-ADDR…] (a child of go run ./bench)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1], os.Args[2:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bare %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// run runs role with args until stdin closes or ctx ends.
func run(ctx context.Context, role string, args []string) error {
	var (
		boot  []peer.AddrInfo
		hopts []libp2p.Option
	)
	switch role {
	case "idle", "echo":
		if len(args) > 0 {
			return fmt.Errorf("unexpected argument %q", args[0])
		}
	case "mesh":
		if len(args) == 0 {
			return errors.New("usage: bare mesh BOOTSTRAP-ADDR…")
		}
		for _, a := range args {
			ai, err := peer.AddrInfoFromString(a)
			if err != nil {
				return fmt.Errorf("bootstrap address %q: %w", a, err)
			}
			boot = append(boot, *ai)
		}
		var err error
		if hopts, err = lean.MeshOptions(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown role %q (idle, echo, mesh)", role)
	}

	h, err := lean.NewHost(true, hopts...)
	if err != nil {
		return err
	}
	defer h.Close()
	opts := []dht.Option{
		dht.Mode(dht.ModeServer),
		dht.ProtocolPrefix(dhtPrefix),
		dht.NamespacedValidator(cardNamespace, anyRecord{}),
	}
	if len(boot) > 0 {
		// The DHT dials them again by itself whenever its routing table
		// empties, as mcpv2's discovery does.
		opts = append(opts, dht.BootstrapPeers(boot...))
	}
	d, err := dht.New(h, opts...)
	if err != nil {
		return fmt.Errorf("dht: %w", err)
	}
	defer d.Close()
	if role == "echo" {
		h.SetStreamHandler(lean.EchoProto, lean.EchoHandler)
	}
	if len(boot) > 0 {
		if err := join(ctx, h, d, boot); err != nil {
			return err
		}
	}
	return serve(ctx, h, d)
}

// join connects to the bootstrap peers (it fails when none answers) and
// starts the DHT's bootstrap: a refresh of the routing table through them,
// which runs on after join returns.
func join(ctx context.Context, h host.Host, d *dht.IpfsDHT, boot []peer.AddrInfo) error {
	var errs []error
	for _, ai := range boot {
		if err := h.Connect(ctx, ai); err != nil {
			errs = append(errs, fmt.Errorf("connect to bootstrap peer %s: %w", ai.ID, err))
		}
	}
	if len(errs) == len(boot) {
		return errors.Join(errs...)
	}
	return d.Bootstrap(ctx)
}

// anyRecord is the DHT validator of mcpv2's card namespace for a bare
// host: it keeps whatever is put (mcpv2 nodes check the card's signature;
// a bare host has no card code) and, of several values, the first.
type anyRecord struct{}

// Validate accepts every record.
func (anyRecord) Validate(string, []byte) error { return nil }

// Select picks the first value.
func (anyRecord) Select(string, [][]byte) (int, error) { return 0, nil }

// answer returns the line that answers the question line q, or "" for a
// line it does not know.
func answer(q string, h host.Host, d *dht.IpfsDHT) (string, error) {
	word, tag, ok := lean.Question(q)
	if !ok {
		return "", nil
	}
	switch word {
	case lean.AskStat:
		return lean.AnswerLine(lean.NameStat, tag, lean.Stat{RT: d.RoutingTable().Size(), Peers: len(h.Network().Peers())})
	case lean.AskPeers:
		return lean.AnswerLine(lean.NamePeers, tag, lean.PeerLists{RT: d.RoutingTable().ListPeers(), Conns: h.Network().Peers()})
	default:
		return "", nil
	}
}

// serve prints the ready line, then answers the question lines on stdin
// until stdin closes or ctx ends.
func serve(ctx context.Context, h host.Host, d *dht.IpfsDHT) error {
	if err := lean.PrintReady(os.Stdout, lean.HostInfo(h)); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			a, err := answer(sc.Text(), h, d)
			if err == nil && a != "" {
				_, err = os.Stdout.WriteString(a)
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- sc.Err()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return nil
	}
}
