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
// Every role prints one line
//
//	READY {"addrs":[full multiaddrs with /p2p/]}
//
// then serves until its stdin closes or it gets SIGTERM or SIGINT. Each
// line "stat" on stdin is answered with a line
//
//	STAT {"rt":N,"peers":M}
//
// (the DHT routing table's size and the connected peers), each line "peers"
// with
//
//	PEERS {"rt":[PeerIDs],"conns":[PeerIDs]}
//
// (the routing table's peers and the connected ones). The host is the
// bench's bareHost (bench/roles.go): libp2p's defaults with the transports
// (TCP, QUIC-v1), security (Noise, TLS) and muxer (yamux) of mcpv2's
// transport.NewHost, listening on loopback. The DHT speaks mcpv2's
// /mcpv2/kad/1.0.0 (discovery.ProtocolPrefix) in server mode, and stores
// the mesh's card records (namespace "mcpv2card") without checking their
// signatures, so that in a mesh of mcpv2 nodes it holds what an mcpv2 node
// holds and acknowledges what they put.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	libp2pquic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
)

// The wire names this program shares with mcpv2 and with the bench; it
// imports neither, so they are written here again.
const (
	// dhtPrefix is mcpv2's DHT protocol prefix (discovery.ProtocolPrefix).
	dhtPrefix = "/mcpv2"
	// cardNamespace is the namespace of mcpv2's card records
	// (discovery.CardNamespace).
	cardNamespace = "mcpv2card"
	// echoProto is the bench's echo protocol (bench/roles.go echoProto).
	echoProto = "/mcpv2-bench/echo/1.0.0"
	// maxFrame caps an echoed frame (transport.DefaultMaxMessage).
	maxFrame = 8 << 20
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
	var boot []peer.AddrInfo
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
	default:
		return fmt.Errorf("unknown role %q (idle, echo, mesh)", role)
	}

	h, err := bareHost()
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
		h.SetStreamHandler(echoProto, echoHandler)
	}
	if len(boot) > 0 {
		if err := join(ctx, h, d, boot); err != nil {
			return err
		}
	}
	return serve(ctx, h, d)
}

// bareHost is bench/roles.go's bareHost(true): libp2p's defaults with the
// same transports, security and muxer as mcpv2's transport.NewHost,
// listening on loopback TCP and QUIC-v1.
func bareHost() (host.Host, error) {
	return libp2p.New(
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Security(libp2ptls.ID, libp2ptls.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(libp2pquic.NewTransport),
	)
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

// readyInfo is the ready line's JSON (bench/roles.go readyInfo).
type readyInfo struct {
	Addrs []string `json:"addrs"`
}

// stat is the answer to a "stat" line.
type stat struct {
	// RT is the DHT routing table's size.
	RT int `json:"rt"`
	// Peers is the number of connected peers.
	Peers int `json:"peers"`
}

// peers is the answer to a "peers" line.
type peers struct {
	// RT are the PeerIDs in the DHT routing table.
	RT []peer.ID `json:"rt"`
	// Conns are the PeerIDs of the connected peers.
	Conns []peer.ID `json:"conns"`
}

// answer returns the line that answers query, or "" for a query it does
// not know.
func answer(query string, h host.Host, d *dht.IpfsDHT) (string, error) {
	var (
		v    any
		name string
	)
	switch query {
	case "stat":
		v, name = stat{RT: d.RoutingTable().Size(), Peers: len(h.Network().Peers())}, "STAT"
	case "peers":
		v, name = peers{RT: d.RoutingTable().ListPeers(), Conns: h.Network().Peers()}, "PEERS"
	default:
		return "", nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return name + " " + string(b) + "\n", nil
}

// serve prints the ready line, then answers the "stat" and "peers" lines
// on stdin until stdin closes or ctx ends.
func serve(ctx context.Context, h host.Host, d *dht.IpfsDHT) error {
	var info readyInfo
	for _, a := range h.Addrs() {
		info.Addrs = append(info.Addrs, a.Encapsulate(ma.StringCast("/p2p/"+h.ID().String())).String())
	}
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if _, err := fmt.Printf("READY %s\n", b); err != nil {
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

// echoHandler echoes every frame of a stream back on it. A frame is an
// unsigned varint length and that many bytes (mcpv2's transport framing).
func echoHandler(s network.Stream) {
	defer s.Close()
	br := bufio.NewReader(s)
	var buf []byte
	for {
		n, err := binary.ReadUvarint(br)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = s.Reset()
			}
			return
		}
		if n > maxFrame {
			_ = s.Reset()
			return
		}
		buf = binary.AppendUvarint(buf[:0], n)
		hdr := len(buf)
		buf = slices.Grow(buf, int(n))[:hdr+int(n)]
		if _, err := io.ReadFull(br, buf[hdr:]); err != nil {
			_ = s.Reset()
			return
		}
		if _, err := s.Write(buf); err != nil {
			_ = s.Reset()
			return
		}
	}
}
