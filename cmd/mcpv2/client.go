package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	manet "github.com/multiformats/go-multiaddr/net"
	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

var clientFlags = []cli.Flag{dataDirFlag, secretFlag, bootstrapFlag, logLevelFlag, maxMessageFlag, timeoutFlag}

// session is a client command's connection to the mesh: a listen-less host
// with the data dir's identity.
type session struct {
	host   host.Host
	client *node.Client
}

func openSession(c *cli.Context) (*session, error) {
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
	h, err := transport.NewHost(transport.WithIdentity(key), transport.WithListenAddrs(), transport.WithLogger(log))
	if err != nil {
		return nil, err
	}
	cl := node.NewClient(h, node.ClientConfig{Secret: []byte(c.String("secret")), MaxMessage: c.Int("max-message")})
	return &session{host: h, client: cl}, nil
}

func (s *session) Close() error {
	s.client.Close()
	return s.host.Close()
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
	if addr.Kind == protocol.AddrHTTP {
		return fmt.Errorf("%s: HTTP edge addresses are not supported by this build yet; use a mesh address (multiaddr ending in /p2p/<PeerID>)", addr)
	}
	s, err := openSession(c)
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
	return fn(ctx, s, addr)
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
				res, err := s.client.CallSkill(ctx, addr, c.Args().Get(1), args, node.CallOptions{Provider: c.String("provider")})
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
					res, err := s.client.CallSkill(ctx, addr, "ping", json.RawMessage(fmt.Sprintf(`{"payload":{"seq":%d}}`, i+1)), node.CallOptions{})
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
				res, err := s.client.CallMethod(ctx, addr, protocol.MethodToolsList, node.CallOptions{})
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
				res, err := s.client.CallMethod(ctx, addr, protocol.MethodAgentCard, node.CallOptions{})
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
