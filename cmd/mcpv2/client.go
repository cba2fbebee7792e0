package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/discovery"
	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

var clientFlags = []cli.Flag{dataDirFlag, secretFlag, keyFlag, bootstrapFlag, logLevelFlag, maxMessageFlag, timeoutFlag, routableFlag, noNATFlag,
	&cli.StringSliceFlag{Name: "listen", EnvVars: []string{"MCPV2_CLIENT_LISTEN"},
		Usage: "addresses this client listens on while it runs (default none, or any port on every interface with --bootstrap, so that hole punching can reach it)"},
	&cli.DurationFlag{Name: "wait-direct", EnvVars: []string{"MCPV2_WAIT_DIRECT"}, DefaultText: "2s; send: 10s",
		Usage: "when the peer is reached through a relay, wait up to this long for hole punching to make a direct connection before the first byte (0: never wait); with --bootstrap peers across a NAT, first wait as long for this client's public address to be observed"},
}

// session is a client command's connection to the mesh: a host with the
// data dir's identity that listens nowhere unless it joins the DHT.
type session struct {
	host   host.Host
	client *node.Client
	disc   *discovery.Discovery // nil without --bootstrap
	edge   *edge.Client         // for HTTP edge addresses
	// joined is when the session joined the mesh, before waiting for hole
	// punching to be ready.
	joined time.Time
	// wait is the command's --wait-direct (0: off).
	wait time.Duration
}

// CallSkill runs skill on addr, over the mesh or through an HTTP edge.
func (s *session) CallSkill(ctx context.Context, addr protocol.Address, skill string, args json.RawMessage, provider string) (json.RawMessage, error) {
	if addr.Kind == protocol.AddrHTTP {
		return s.edge.CallSkill(ctx, addr, skill, args, provider)
	}
	return s.client.CallSkill(ctx, addr, skill, args, node.CallOptions{Provider: provider})
}

// CallMethod runs a method without arguments (tools/list, agent/card) on addr.
func (s *session) CallMethod(ctx context.Context, addr protocol.Address, method string) (json.RawMessage, error) {
	if addr.Kind == protocol.AddrHTTP {
		return s.edge.CallMethod(ctx, addr, method)
	}
	return s.client.CallMethod(ctx, addr, method, node.CallOptions{})
}

// newEdgeClient is a client command's HTTP edge client: with --key it
// presents that API key, with --secret it is a secret holder (SPEC §6),
// else it takes anonymous sessions.
func newEdgeClient(c *cli.Context) *edge.Client {
	return edge.NewClient(nil, edge.WithSecret([]byte(c.String("secret"))), edge.WithKey(c.String("key")))
}

// openSession prepares a client command for the mesh: see openSessionFor.
func openSession(c *cli.Context) (*session, error) { return openSessionFor(c, true) }

// openSessionFor prepares a client command: always the HTTP edge client, and
// the libp2p host (and with --bootstrap the DHT) when mesh is true.
func openSessionFor(c *cli.Context, mesh bool) (*session, error) {
	if !mesh {
		return &session{edge: newEdgeClient(c)}, nil
	}
	dir, err := dataDir(c)
	if err != nil {
		return nil, err
	}
	key, err := transport.LoadOrCreateIdentity(identityPath(dir))
	if err != nil {
		return nil, err
	}
	log, err := logger(c)
	if err != nil {
		return nil, err
	}
	if err := applyRoutable(c); err != nil {
		return nil, err
	}
	boot, err := node.ParseBootstrap(splitList(c.StringSlice("bootstrap")))
	if err != nil {
		return nil, err
	}
	listen := splitList(c.StringSlice("listen"))
	if len(listen) == 0 && len(boot) > 0 {
		listen = []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"}
	}
	addrs := make([]ma.Multiaddr, 0, len(listen))
	for _, l := range listen {
		a, err := ma.NewMultiaddr(l)
		if err != nil {
			return nil, fmt.Errorf("--listen %q: %w", l, err)
		}
		addrs = append(addrs, a)
	}
	hopts := []transport.Option{transport.WithIdentity(key), transport.WithListenAddrs(addrs...), transport.WithLogger(log)}
	if len(boot) > 0 && !c.Bool("no-nat") {
		hopts = append(hopts, transport.WithHolePunching(boot))
	}
	h, err := transport.NewHost(hopts...)
	if err != nil {
		return nil, err
	}
	wait := waitDirectOf(c)
	s := &session{host: h, wait: wait, edge: newEdgeClient(c),
		client: node.NewClient(h, node.ClientConfig{Secret: []byte(c.String("secret")), MaxMessage: c.Int("max-message"), WaitDirect: wait})}
	if len(boot) > 0 {
		d, err := discovery.New(h, discovery.WithBootstrap(boot...), discovery.WithMode(discovery.ModeClient), discovery.WithMDNS(false), discovery.WithLogger(log))
		if err != nil {
			return nil, errors.Join(err, s.Close())
		}
		s.disc = d
		s.client.SetRouter(d)
		// A peer behind NAT is often connected through a relay only, and
		// kad-dht opens its request streams with the caller's context:
		// without this, a request to such a peer (finding it, fetching its
		// card) waits for a direct connection until the context ends.
		c.Context = network.WithAllowLimitedConn(c.Context, "mcpv2 client: DHT")
		ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
		defer cancel()
		if err := d.Bootstrap(ctx); err != nil {
			return nil, errors.Join(fmt.Errorf("join the mesh: %w", err), s.Close())
		}
		s.joined = time.Now()
		if wait > 0 && acrossNAT(h, boot) {
			ctx, cancel := context.WithTimeout(c.Context, wait)
			ready := transport.WaitHolePunchReady(ctx, h)
			cancel()
			if !ready {
				log.Info("hole punching is not ready: no public address of this client observed yet; a relayed connection may stay relayed", "waited", wait)
			}
		}
	}
	return s, nil
}

// waitDirectOf is the command's --wait-direct: by default
// node.DefaultDirectWait for send (bulk data gains most from a direct
// path), node.DefaultWaitDirect for the other commands, 0 with --no-nat.
func waitDirectOf(c *cli.Context) time.Duration {
	switch {
	case c.Bool("no-nat"):
		return 0
	case c.IsSet("wait-direct"):
		return max(c.Duration("wait-direct"), 0)
	case c.Command.Name == "send":
		return node.DefaultDirectWait
	}
	return node.DefaultWaitDirect
}

// acrossNAT reports whether h reaches a bootstrap peer at a public address
// from a private one of its own: then a peer behind another NAT is reached
// through a relay first, and hole punching needs this client's public
// address, which identify with that bootstrap peer reports. Without such a
// peer (a LAN, loopback, a public client) there is nothing to wait for.
func acrossNAT(h host.Host, boot []peer.AddrInfo) bool {
	for _, ai := range boot {
		for _, conn := range h.Network().ConnsToPeer(ai.ID) {
			if manet.IsPublicAddr(conn.RemoteMultiaddr()) && !manet.IsPublicAddr(conn.LocalMultiaddr()) {
				return true
			}
		}
	}
	return false
}

func (s *session) Close() error {
	s.edge.Close()
	if s.host == nil {
		return nil
	}
	s.settle()
	s.client.Close()
	var errs []error
	if s.disc != nil {
		errs = append(errs, s.disc.Close())
	}
	return errors.Join(append(errs, s.host.Close())...)
}

// Before a client leaves (see settle).
const (
	// settleYoung is the age below which a relayed connection may still
	// have a hole punch under way.
	settleYoung = 3 * time.Second
	// settleWait bounds the wait for those punches to end: one that works
	// takes 0.2–0.5 s, more on a loaded machine (the NAT lab under -race
	// beside other tests missed 2 of 20 with 1 s). Behind symmetric NAT,
	// where no punch works, a find pays it whole.
	settleWait = 2 * time.Second
)

// settle waits, at most settleWait, for the hole punches that this
// client's recent relayed connections started. A peer behind NAT punches
// towards us when our relayed connection arrives (a find's reachability
// dial, say); a process that leaves in the middle leaves the peer's attempt
// pending until its dial times out (5 s), and until then the peer punches
// for no other connection of this identity ("another hole punching attempt
// to this peer is active"): the next command's call stays relayed.
func (s *session) settle() {
	if s.wait <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleWait)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range s.host.Network().Peers() {
		if s.host.Network().Connectedness(p) != network.Limited || s.client.WaitedInVain(p) {
			continue // direct, or a call already waited for the punch in vain
		}
		if !slices.ContainsFunc(s.host.Network().ConnsToPeer(p), func(c network.Conn) bool { return time.Since(c.Stat().Opened) < settleYoung }) {
			continue
		}
		wg.Go(func() { transport.WaitDirect(ctx, s.host, p) })
	}
	wg.Wait()
}

// withSession parses ADDR (the first argument), opens a session and runs fn
// under the command's timeout.
func withSession(c *cli.Context, fn func(ctx context.Context, s *session, addr protocol.Address) error) error {
	if c.NArg() < 1 {
		return fmt.Errorf("%s: missing ADDR (usage: %s)", c.Command.Name, c.Command.UsageText)
	}
	addr, err := protocol.ParseAddress(c.Args().First())
	if err != nil {
		return err
	}
	s, err := openSessionFor(c, addr.Kind == protocol.AddrMesh)
	if err != nil {
		return err
	}
	defer s.Close()
	timeout := c.Duration("timeout")
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(c.Context, timeout)
	defer cancel()
	if addr.Kind == protocol.AddrMesh {
		if err := s.connect(ctx, c, addr); err != nil {
			return err
		}
	}
	return fn(ctx, s, addr)
}

// connect connects to the mesh peer at addr, waiting up to --wait-direct
// for a direct connection when the peer is reached through a relay
// (node.ClientConfig.WaitDirect), and says on stderr how the peer is
// reached when a relay was involved: direct after how long, counted from
// joining the mesh, or through the relay.
func (s *session) connect(ctx context.Context, c *cli.Context, addr protocol.Address) error {
	start := time.Now()
	if !s.joined.IsZero() {
		start = s.joined // count the wait for hole punching to be ready
	}
	pid, err := s.client.Connect(ctx, addr)
	if err != nil {
		return err
	}
	conns := s.host.Network().ConnsToPeer(pid)
	if !slices.ContainsFunc(conns, func(c network.Conn) bool { return c.Stat().Limited }) {
		return nil // direct from the start: nothing to say
	}
	if conn := transport.DirectConn(s.host, pid); conn != nil {
		fmt.Fprintf(c.App.ErrWriter, "mcpv2: direct connection to %s via %s after %.3fs\n", pid, conn.RemoteMultiaddr(), time.Since(start).Seconds())
	} else {
		fmt.Fprintf(c.App.ErrWriter, "mcpv2: no direct connection to %s after %s; going on through the relay\n", pid, s.wait)
	}
	return nil
}

func callCommand() *cli.Command {
	return &cli.Command{
		Name:      "call",
		Usage:     "run one skill on a peer and print the result JSON",
		UsageText: "mcpv2 call ADDR SKILL [ARGS_JSON|-|@FILE] [--provider P]",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "provider", EnvVars: []string{"MCPV2_PROVIDER"}, Usage: "context.provider: claude, openai, gemini or deepseek"},
		}, clientFlags...),
		Action: func(c *cli.Context) error {
			if c.NArg() < 2 || c.NArg() > 3 {
				return fmt.Errorf("call: usage: %s", c.Command.UsageText)
			}
			args := json.RawMessage("{}")
			if c.NArg() == 3 {
				b, err := readArg(c.Args().Get(2), c.Int("max-message"))
				if err != nil {
					return fmt.Errorf("call: ARGS_JSON: %w", err)
				}
				if !json.Valid(b) {
					return fmt.Errorf("call: ARGS_JSON is not valid JSON: %.80s", b)
				}
				args = b
			}
			return withSession(c, func(ctx context.Context, s *session, addr protocol.Address) error {
				res, err := s.CallSkill(ctx, addr, c.Args().Get(1), args, c.String("provider"))
				if err != nil {
					return err
				}
				return printJSON(c, res)
			})
		},
	}
}

func printJSON(c *cli.Context, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return fmt.Errorf("the peer answered invalid JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := c.App.Writer.Write(printableJSON(buf.Bytes()))
	return err
}

func pingCommand() *cli.Command {
	return &cli.Command{
		Name:      "ping",
		Usage:     "measure round-trip times to a peer with its ping skill",
		UsageText: "mcpv2 ping ADDR [--count N]",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "count", Aliases: []string{"c"}, Value: 4, Usage: "how many pings"},
			&cli.DurationFlag{Name: "interval", Value: 500 * time.Millisecond, Usage: "pause between pings"},
		}, clientFlags...),
		Action: func(c *cli.Context) error {
			count := c.Int("count")
			if count < 1 {
				return errors.New("ping: --count must be at least 1")
			}
			return withSession(c, func(ctx context.Context, s *session, addr protocol.Address) error {
				var rtts []time.Duration
				for i := range count {
					if i > 0 {
						select {
						case <-ctx.Done():
							return ctx.Err()
						case <-time.After(c.Duration("interval")):
						}
					}
					start := time.Now()
					res, err := s.CallSkill(ctx, addr, "ping", json.RawMessage(fmt.Sprintf(`{"payload":{"seq":%d}}`, i+1)), "")
					if err != nil {
						return err
					}
					rtt := time.Since(start)
					rtts = append(rtts, rtt)
					var pr struct {
						PeerID string `json:"peer_id"`
					}
					_ = json.Unmarshal(res, &pr)
					fmt.Fprintf(c.App.Writer, "pong from %s: seq=%d time=%.2f ms\n", printableLine(pr.PeerID), i+1, ms(rtt))
				}
				lo, hi, sum := time.Duration(math.MaxInt64), time.Duration(0), time.Duration(0)
				for _, r := range rtts {
					lo, hi, sum = min(lo, r), max(hi, r), sum+r
				}
				fmt.Fprintf(c.App.Writer, "%d pings: min/avg/max = %.2f/%.2f/%.2f ms\n", len(rtts), ms(lo), ms(sum/time.Duration(len(rtts))), ms(hi))
				return nil
			})
		},
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func toolsCommand() *cli.Command {
	return &cli.Command{
		Name: "tools", Usage: "list a peer's skills with their input schemas", UsageText: "mcpv2 tools ADDR",
		Flags: clientFlags,
		Action: func(c *cli.Context) error {
			return withSession(c, func(ctx context.Context, s *session, addr protocol.Address) error {
				res, err := s.CallMethod(ctx, addr, protocol.MethodToolsList)
				if err != nil {
					return err
				}
				return printIndented(c, res)
			})
		},
	}
}

func cardCommand() *cli.Command {
	return &cli.Command{
		Name: "card", Usage: "print a peer's agent card", UsageText: "mcpv2 card ADDR",
		Flags: clientFlags,
		Action: func(c *cli.Context) error {
			return withSession(c, func(ctx context.Context, s *session, addr protocol.Address) error {
				res, err := s.CallMethod(ctx, addr, protocol.MethodAgentCard)
				if err != nil {
					return err
				}
				return printIndented(c, res)
			})
		},
	}
}

func printIndented(c *cli.Context, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return fmt.Errorf("the peer answered invalid JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := c.App.Writer.Write(printableJSON(buf.Bytes()))
	return err
}

func idCommand() *cli.Command {
	return &cli.Command{
		Name: "id", Usage: "print this node's PeerID and the addresses it listens on by default (every local interface)",
		Flags: []cli.Flag{dataDirFlag,
			&cli.IntFlag{Name: "p2p-port", EnvVars: []string{"MCPV2_P2P_PORT"}, Value: transport.DefaultPort, Usage: "port of the default listen addresses"}},
		Action: func(c *cli.Context) error {
			dir, err := dataDir(c)
			if err != nil {
				return err
			}
			key, err := transport.LoadOrCreateIdentity(identityPath(dir))
			if err != nil {
				return err
			}
			id, err := peer.IDFromPrivateKey(key)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "MCPV2_PEER_ID=%s\n", id)
			addrs, err := manet.ResolveUnspecifiedAddresses(transport.DefaultListenAddrs(c.Int("p2p-port")), nil)
			if err != nil {
				return err
			}
			for _, a := range addrs {
				fmt.Fprintf(c.App.Writer, "MCPV2_P2P_ADDRESS=%s/p2p/%s\n", a, id)
			}
			return nil
		},
	}
}
