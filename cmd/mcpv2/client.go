package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/localapi"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

var clientFlags = []cli.Flag{dataDirFlag, secretFlag, keyFlag, bootstrapFlag, logLevelFlag, maxMessageFlag, timeoutFlag, routableFlag, noNATFlag, verboseFlag,
	&cli.StringSliceFlag{Name: "listen", EnvVars: []string{"MCPV2_CLIENT_LISTEN"},
		Usage: "addresses this client listens on while it runs (default none, or any port on every interface with --bootstrap, so that hole punching can reach it)"},
	&cli.DurationFlag{Name: "wait-direct", EnvVars: []string{"MCPV2_WAIT_DIRECT"}, DefaultText: "2s; send: 10s",
		Usage: "when the peer is reached through a relay, wait up to this long for hole punching to make a direct connection before the first byte (0: never wait); with --bootstrap peers across a NAT, first wait as long for this client's public address to be observed"},
}

// session is a client command's dialer (node.Dialer: the libp2p host with
// the data dir's identity, which listens nowhere unless it joins the DHT,
// its mesh client and, with --bootstrap, the DHT) and the HTTP edge client
// that the dialer calls edge addresses with. CallSkill, CallMethod and
// Connect route an address to the mesh or to the edge.
type session struct {
	*node.Dialer
	edge *edge.Client
}

// Close closes the dialer, then the edge client. It is idempotent: a
// second call returns net.ErrClosed.
func (s *session) Close() error {
	err := s.Dialer.Close()
	if errors.Is(err, net.ErrClosed) {
		return err
	}
	return errors.Join(err, s.edge.Close())
}

// newEdgeClient is a client command's HTTP edge client: with --key it
// presents that API key, with --secret it is a secret holder (SPEC §6),
// else it takes anonymous sessions.
func newEdgeClient(c *cli.Context) (*edge.Client, error) {
	return edge.NewClient(edge.WithSecret([]byte(c.String("secret"))), edge.WithKey(c.String("key")))
}

// openSession prepares a client command for the mesh: see openSessionFor.
func openSession(c *cli.Context) (*session, error) { return openSessionFor(c, true) }

// openSessionFor prepares a client command: always the HTTP edge client,
// and the libp2p host (and with --bootstrap the DHT, joined before it
// returns) when mesh is true. With --bootstrap it lets c.Context's requests
// ride relayed connections: a peer behind NAT is often connected through a
// relay only, and kad-dht opens its request streams with the caller's
// context.
func openSessionFor(c *cli.Context, mesh bool) (*session, error) {
	opts, err := dialerOptions(c, mesh)
	if err != nil {
		return nil, err
	}
	ec, err := newEdgeClient(c)
	if err != nil {
		return nil, err
	}
	d, err := node.NewDialer(c.Context, append(opts, node.WithEdge(ec))...)
	if err != nil {
		return nil, errors.Join(err, ec.Close())
	}
	if d.Discovery() != nil {
		c.Context = network.WithAllowLimitedConn(c.Context, "mcpv2 client: DHT")
	}
	return &session{Dialer: d, edge: ec}, nil
}

// dialerOptions translates the client flags into the dialer's options:
// WithoutMesh unless mesh; else the data dir's identity, --listen,
// --bootstrap, --no-nat, --secret, --max-message and --wait-direct.
func dialerOptions(c *cli.Context, mesh bool) ([]node.DialerOption, error) {
	if !mesh {
		return []node.DialerOption{node.WithoutMesh()}, nil
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
	addrs := make([]ma.Multiaddr, 0, len(listen))
	for _, l := range listen {
		a, err := ma.NewMultiaddr(l)
		if err != nil {
			return nil, fmt.Errorf("--listen %q: %w", l, err)
		}
		addrs = append(addrs, a)
	}
	opts := []node.DialerOption{node.WithIdentity(key), node.WithListenAddrs(addrs...), node.WithLogger(log), node.WithBootstrap(boot...),
		node.WithClientOptions(node.WithSecret([]byte(c.String("secret"))), node.WithMaxMessage(c.Int("max-message")), node.WithWaitDirect(waitDirectOf(c)))}
	if c.Bool("no-nat") {
		opts = append(opts, node.WithoutNAT())
	}
	return opts, nil
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
	ctx, cancel := context.WithTimeout(c.Context, timeoutOr(c, callTimeout))
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
// (node.Dialer.Connect), and says on stderr how the peer is reached when a
// relay was involved: direct after how long, counted from joining the
// mesh, or through the relay.
func (s *session) connect(ctx context.Context, c *cli.Context, addr protocol.Address) error {
	r, err := s.Connect(ctx, addr)
	if err != nil {
		return err
	}
	switch {
	case !r.Relayed:
		// direct from the start: nothing to say
	case r.Direct != nil:
		fmt.Fprintf(c.App.ErrWriter, "mcpv2: direct connection to %s via %s after %.3fs\n", r.Peer, r.Direct, r.Took.Seconds())
	default:
		fmt.Fprintf(c.App.ErrWriter, "mcpv2: no direct connection to %s after %s; going on through the relay\n", r.Peer, s.WaitDirect())
	}
	return nil
}

func callCommand() *cli.Command {
	return &cli.Command{
		Name:      "call",
		Usage:     "run one skill on a peer, or on an A2A agent at a URL, and print the result JSON",
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
			return withTarget(c, func(ctx context.Context, t target) error {
				var res json.RawMessage
				var err error
				if t.agent != nil {
					fmt.Fprint(c.App.ErrWriter, a2aSummary(t.agent.card))
					res, err = t.agent.client.Call(ctx, t.agent.card, c.Args().Get(1), args)
				} else {
					res, err = t.s.CallSkill(ctx, t.addr, c.Args().Get(1), args, protocol.CallOptions{Provider: c.String("provider")})
				}
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
		Usage:     "measure round-trip times to a peer with its ping skill (an A2A agent's: a fetch of its card)",
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
			return withTarget(c, func(ctx context.Context, t target) error {
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
					if t.agent != nil { // an A2A agent: one card fetch is one ping (no message: it might start work)
						card, err := t.agent.client.Card(ctx, t.agent.card.URL)
						if err != nil {
							return err
						}
						rtt := time.Since(start)
						rtts = append(rtts, rtt)
						fmt.Fprintf(c.App.Writer, "card from %s (A2A %s): seq=%d time=%.2f ms\n", printableLine(card.Name), card.ProtocolVersion, i+1, ms(rtt))
						continue
					}
					res, err := t.s.CallSkill(ctx, t.addr, "ping", json.RawMessage(fmt.Sprintf(`{"payload":{"seq":%d}}`, i+1)), protocol.CallOptions{})
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
		Name: "tools", Usage: "list a peer's skills: one line each on a terminal, the full input schemas as JSON when piped",
		UsageText: "mcpv2 tools ADDR [--brief | --json]",
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "brief", DisableDefaultText: true, Usage: "one line per skill: its name and the first line of its description (the default when stdout is a terminal)"},
			&cli.BoolFlag{Name: "json", DisableDefaultText: true, Usage: "the peer's whole tools/list answer, input schemas included, as indented JSON (the default when stdout is not a terminal)"},
		}, clientFlags...),
		Action: func(c *cli.Context) error {
			if c.Bool("brief") && c.Bool("json") {
				return errors.New("tools: --brief and --json: pick one (one line per skill, or the full schemas as JSON)")
			}
			brief := c.Bool("brief") || !c.Bool("json") && isTerminal(c.App.Writer)
			return withSession(c, func(ctx context.Context, s *session, addr protocol.Address) error {
				res, err := s.CallMethod(ctx, addr, protocol.MethodToolsList, protocol.CallOptions{})
				if err != nil {
					return err
				}
				if brief {
					return printToolsBrief(c, res)
				}
				return printIndented(c, res)
			})
		},
	}
}

// printToolsBrief prints a tools/list answer one skill a line: its name and
// the first line of its description, escaped (the peer wrote them), then
// on stderr where the schemas are.
func printToolsBrief(c *cli.Context, raw json.RawMessage) error {
	var tl struct {
		Tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &tl); err != nil {
		return fmt.Errorf("the peer answered tools/list with something else than a list of tools: %w", err)
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	for _, t := range tl.Tools {
		desc, _, _ := strings.Cut(strings.TrimSpace(t.Description), "\n")
		fmt.Fprintf(tw, "%s\t%s\n", oneLine(t.Name, 60), oneLine(desc, 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "%d skills; their input schemas: mcpv2 tools %s --json\n", len(tl.Tools), c.Args().First())
	return nil
}

func cardCommand() *cli.Command {
	return &cli.Command{
		Name: "card", Usage: "print a peer's agent card, or an A2A agent's at a URL", UsageText: "mcpv2 card ADDR",
		Flags: clientFlags,
		Action: func(c *cli.Context) error {
			return withTarget(c, func(ctx context.Context, t target) error {
				if t.agent != nil {
					fmt.Fprint(c.App.ErrWriter, a2aSummary(t.agent.card))
					return printIndented(c, t.agent.card.Raw)
				}
				res, err := t.s.CallMethod(ctx, t.addr, protocol.MethodAgentCard, protocol.CallOptions{})
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
		Name: "id", Usage: "print this node's PeerID and addresses: the running node's own, else those it listens on by default",
		Description: "With a node running in --data-dir, its live addresses (asked over <data-dir>/control.sock). Without one,\n" +
			"the default listen addresses on --p2p-port (every local interface), which a node started with other\n" +
			"--listen or --p2p-port flags would not use: stderr says so. A --data-dir that does not exist is refused\n" +
			"(a typo); an empty one gets a new identity, as a node would make it.",
		Flags: []cli.Flag{dataDirFlag,
			&cli.IntFlag{Name: "p2p-port", EnvVars: []string{"MCPV2_P2P_PORT"}, Value: transport.DefaultPort, Usage: "port of the default listen addresses (when no node runs)"}},
		Action: func(c *cli.Context) error {
			dir, err := dataDir(c)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context, localTimeout)
			defer cancel()
			if cl, err := localapi.Dial(ctx, dir); err == nil {
				defer cl.Close()
				id, err := cl.ID(ctx)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "MCPV2_PEER_ID=%s\n", printableLine(id.PeerID))
				for _, a := range id.Addrs {
					fmt.Fprintf(c.App.Writer, "MCPV2_P2P_ADDRESS=%s\n", printableLine(a))
				}
				return nil
			} else if !errors.Is(err, localapi.ErrNoNode) {
				return err
			}
			if err := existingDataDir("id", dir, "the node whose addresses you want; to make a new identity there, create the directory first"); err != nil {
				return err
			}
			created := !fileExists(identityPath(dir))
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
			fmt.Fprint(c.App.ErrWriter, idFallbackNote(dir, created, c.Int("p2p-port")))
			return nil
		},
	}
}
