package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/node/localapi"
)

// localTimeout bounds one call to the local API.
const localTimeout = 10 * time.Second

// statusCommand is `mcpv2 status`: what the running node of --data-dir
// says about itself, over its control socket.
func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the running node of --data-dir: PeerID, addresses, reachability, peers, relays, edge, uptime",
		UsageText: "mcpv2 status [--data-dir DIR] [--json]\n" +
			"(asks the node over <data-dir>/control.sock; exit 1 when no node runs there)",
		Flags: []cli.Flag{dataDirFlag,
			&cli.BoolFlag{Name: "json", EnvVars: []string{"MCPV2_STATUS_JSON"}, Usage: "print the status as JSON (the local API's /v1/status)"}},
		Action: runStatus,
	}
}

// dialRunning dials the local API of the node running in --data-dir for
// command cmd, which takes only flags; done ends the call's time (at most
// localTimeout) and the client.
func dialRunning(c *cli.Context, cmd string) (ctx context.Context, cl *localapi.Client, done func(), err error) {
	if c.NArg() > 0 {
		return nil, nil, nil, fmt.Errorf("%s: unexpected argument %q: it takes only flags (mcpv2 %s --help)", cmd, c.Args().First(), cmd)
	}
	dir, err := dataDir(c)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(c.Context, localTimeout)
	if cl, err = localapi.Dial(ctx, dir); err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, cl, func() { cl.Close(); cancel() }, nil
}

func runStatus(c *cli.Context) error {
	ctx, cl, done, err := dialRunning(c, "status")
	if err != nil {
		return err
	}
	defer done()
	s, err := cl.Status(ctx)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.App.Writer, "%s\n", printableJSON(b))
		return err
	}
	return printStatus(c.App.Writer, s)
}

// printStatus writes s for a person. Every address and name came from the
// node, some from its peers: each is printed through printableLine.
func printStatus(w io.Writer, s *localapi.StatusResponse) error {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	list := func(label string, items []string) {
		if len(items) == 0 {
			p("%-14s none\n", label)
			return
		}
		for i, it := range items {
			if i == 0 {
				p("%-14s %s\n", label, printableLine(it))
			} else {
				p("%-14s %s\n", "", printableLine(it))
			}
		}
	}
	p("%-14s %s\n", "PeerID", printableLine(s.PeerID))
	p("%-14s %s (up %s, since %s)\n", "Version", printableLine(s.Version),
		time.Duration(s.Uptime)*time.Second, s.Started.Local().Format(time.RFC3339))
	p("%-14s %s\n", "Data dir", printableLine(s.DataDir))
	list("Listening", s.Listen)
	list("Advertised", s.Addrs)
	list("Observed", s.Observed)
	r := s.Reachability
	p("%-14s %s (%s): %s\n", "Reachability", printableLine(r.State), printableLine(r.Source), printableLine(r.Why))
	if len(r.Reachable) > 0 {
		list("  reachable", r.Reachable)
	}
	if len(r.Unreachable) > 0 {
		list("  unreachable", r.Unreachable)
	}
	if len(s.NAT) == 0 {
		p("%-14s unknown\n", "NAT type")
	} else {
		var nat []string
		for _, t := range s.NAT {
			nat = append(nat, t.Transport+": "+t.Type)
		}
		p("%-14s %s\n", "NAT type", printableLine(strings.Join(nat, ", ")))
	}
	var by []string
	for _, t := range slices.Sorted(maps.Keys(s.Peers.ByTransport)) {
		by = append(by, fmt.Sprintf("%s %d", printableLine(t), s.Peers.ByTransport[t]))
	}
	p("%-14s %d (%d connections: %d direct, %d relayed", "Peers", s.Peers.Peers, s.Peers.Conns, s.Peers.Direct, s.Peers.Relayed)
	if len(by) > 0 {
		p("; %s", strings.Join(by, ", "))
	}
	p(")\n")
	var relays []string
	for _, rv := range s.Relays {
		relays = append(relays, rv.Relay)
	}
	list("Relay slots", relays)
	list("Edge", s.EdgeURLs)
	if s.DashboardURL != "" {
		p("%-14s %s\n", "Dashboard", printableLine(s.DashboardURL))
	}
	_, err := fmt.Fprintf(w, "%-14s %s\n", "Control", printableLine(s.Socket))
	return err
}
