package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/discovery"
	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

var clientFlags = []cli.Flag{dataDirFlag, secretFlag, bootstrapFlag, logLevelFlag, maxMessageFlag, timeoutFlag, routableFlag, noNATFlag,
	&cli.StringSliceFlag{Name: "listen", EnvVars: []string{"MCPV2_CLIENT_LISTEN"},
		Usage: "addresses this client listens on while it runs (default none, or any port on every interface with --bootstrap, so that hole punching can reach it)"},
	&cli.DurationFlag{Name: "wait-direct", EnvVars: []string{"MCPV2_WAIT_DIRECT"},
		Usage: "before dialing, wait up to this long until hole punching is ready (this client's public address observed); after connecting through a relay, wait up to this long for a direct connection before calling"},
}

// session is a client command's connection to the mesh: a host with the
// data dir's identity that listens nowhere unless it joins the DHT.
type session struct {
	host   host.Host
	client *node.Client
	disc   *discovery.Discovery // nil without --bootstrap
	edge   *edge.Client         // for HTTP edge addresses
	// joined is when the session joined the mesh, before waiting for hole
	// punching to be ready (zero without --wait-direct).
	joined time.Time
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

// newEdgeClient is a client command's HTTP edge client: a secret holder
// with --secret (SPEC §6), else it takes anonymous sessions.
func newEdgeClient(c *cli.Context) *edge.Client {
	return edge.NewClient(nil, edge.WithSecret([]byte(c.String("secret"))))
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
		hopts = append(hopts, transport.WithNATTraversal(boot))
	}
	h, err := transport.NewHost(hopts...)
	if err != nil {
		return nil, err
	}
	s := &session{host: h, client: node.NewClient(h, node.ClientConfig{Secret: []byte(c.String("secret")), MaxMessage: c.Int("max-message")}),
		edge: newEdgeClient(c)}
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
		if wait := c.Duration("wait-direct"); wait > 0 && !c.Bool("no-nat") {
			s.joined = time.Now()
			if !waitHolePunchReady(c.Context, h, wait) {
				log.Info("hole punching is not ready: no public address of this client observed yet; a relayed connection may stay relayed", "waited", wait)
			}
		}
	}
	return s, nil
}

// waitHolePunchReady waits up to d until h serves DCUtR, which go-libp2p
// starts only once the host knows a public address of its own (identify
// with the bootstrap peers reports the address they see). A peer behind NAT
// starts hole punching once, when a relayed connection from us arrives:
// dialed before then, the connection stays relayed.
func waitHolePunchReady(ctx context.Context, h host.Host, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !slices.Contains(h.Mux().Protocols(), holepunch.Protocol) {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
	return true
}

func (s *session) Close() error {
	s.edge.Close()
	if s.host == nil {
		return nil
	}
	s.client.Close()
	var errs []error
	if s.disc != nil {
		errs = append(errs, s.disc.Close())
	}
	return errors.Join(append(errs, s.host.Close())...)
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
	if wait := c.Duration("wait-direct"); wait > 0 && addr.Kind == protocol.AddrMesh {
		if err := waitDirect(ctx, c, s, addr, wait); err != nil {
			return err
		}
	}
	return fn(ctx, s, addr)
}

// waitDirect connects to addr and waits up to wait for a direct (not
// relayed) connection, reporting on stderr how the peer is reached and after
// how long.
func waitDirect(ctx context.Context, c *cli.Context, s *session, addr protocol.Address, wait time.Duration) error {
	start := time.Now()
	if !s.joined.IsZero() {
		start = s.joined // count the wait for hole punching to be ready
	}
	pid, err := s.client.Connect(ctx, addr)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(wait)
	for {
		for _, conn := range s.host.Network().ConnsToPeer(pid) {
			if !conn.Stat().Limited {
				fmt.Fprintf(c.App.ErrWriter, "mcpv2: direct connection to %s via %s after %.3fs\n", pid, conn.RemoteMultiaddr(), time.Since(start).Seconds())
				return nil
			}
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(c.App.ErrWriter, "mcpv2: no direct connection to %s after %s; going on through the relay\n", pid, wait)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
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
	_, err := c.App.Writer.Write(buf.Bytes())
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
					fmt.Fprintf(c.App.Writer, "pong from %s: seq=%d time=%.2f ms\n", pr.PeerID, i+1, ms(rtt))
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
	_, err := c.App.Writer.Write(buf.Bytes())
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
