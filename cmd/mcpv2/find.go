package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/localapi"
	"github.com/mcpv2/mcpv2/protocol"
)

func findCommand() *cli.Command {
	return &cli.Command{
		Name:  "find",
		Usage: "find agents by skill or tag in the DHT, ranked",
		UsageText: "mcpv2 find SKILL_OR_TAG --bootstrap ADDR [--json] [--limit N] [--stats]\n" +
			"mcpv2 find --task \"free text\" [--bootstrap ADDR] [--json] [--limit N]",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "task", Usage: "rank agents for a task in plain words instead (the seed's weights: skill or capability name 2.0, tag 1.5, description word 0.5, healthy 1.0): " +
				"asks the node running in --data-dir (mesh agents and the A2A agents it registered), else finds through --bootstrap"},
			&cli.BoolFlag{Name: "json", Usage: "print the ranked results as JSON"},
			&cli.BoolFlag{Name: "stats", Usage: "print how far the find got on stderr: a line 'find-stats {JSON}'"},
			&cli.IntFlag{Name: "limit", Value: 20, Usage: "at most this many agents"},
		}, clientFlags...),
		Action: func(c *cli.Context) error {
			if c.IsSet("task") {
				return findTask(c)
			}
			if c.NArg() != 1 {
				return fmt.Errorf("find: usage: %s", c.Command.UsageText)
			}
			s, err := openSession(c)
			if err != nil {
				return err
			}
			defer s.Close()
			if s.Discovery() == nil {
				return errors.New("find: needs --bootstrap (or MCPV2_BOOTSTRAP): the multiaddr of a peer of the mesh")
			}
			ctx, cancel := context.WithTimeout(c.Context, timeoutOr(c, findTimeout))
			defer cancel()
			res, st, err := s.Discovery().FindWithStats(ctx, c.Args().First(), c.Int("limit"))
			if c.Bool("stats") {
				b, jerr := json.Marshal(st)
				if jerr != nil {
					return jerr
				}
				fmt.Fprintf(c.App.ErrWriter, "find-stats %s\n", b)
			}
			if err != nil {
				return err
			}
			if c.Bool("json") {
				b, err := json.MarshalIndent(res, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(c.App.Writer, "%s\n", printableJSON(b))
				return err
			}
			if len(res) == 0 {
				return fmt.Errorf("find: no agent offers %q: %s", c.Args().First(), st)
			}
			w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SCORE\tPEER\tNAME\tREACHABLE\tSKILLS")
			for _, r := range res {
				// Every field of a card is its peer's text (printable).
				var names []string
				for _, sk := range r.Card.Skills {
					names = append(names, sk.Name)
				}
				name := oneLine(r.Card.Name, 64)
				if b := r.Bridged; b != nil {
					// An A2A agent outside the mesh, reached through the peer.
					names = b.Skills
					name = oneLine(b.Name, 64) + " (A2A agent " + printableLine(b.URL) + ", bridged by " + oneLine(r.Card.Name, 64) + ")"
				}
				fmt.Fprintf(w, "%.1f\t%s\t%s\t%v\t%s\n", r.Score, printableLine(r.Card.PeerID), name,
					r.Reachable, oneLine(strings.Join(names, ","), 400))
			}
			return w.Flush()
		},
	}
}

// findTask is mcpv2 find --task: the running node of --data-dir ranks the
// task's agents (the mesh's and the A2A agents it registered); without
// one, this process finds through --bootstrap and ranks the mesh's.
func findTask(c *cli.Context) error {
	task := strings.TrimSpace(c.String("task"))
	if c.NArg() > 0 || task == "" {
		return fmt.Errorf("find: --task takes the task as its value and no SKILL_OR_TAG: usage: %s", c.Command.UsageText)
	}
	ctx, cancel := context.WithTimeout(c.Context, timeoutOr(c, findTimeout))
	defer cancel()
	var matches []protocol.TaskMatch
	dir, err := dataDir(c)
	if err != nil {
		return err
	}
	if cl, derr := localapi.Dial(ctx, dir); derr == nil {
		defer cl.Close()
		res, err := cl.FindTask(ctx, task, c.Int("limit"))
		if err != nil {
			return fmt.Errorf("find --task: %w", err)
		}
		matches = res.Matches
	} else {
		if !errors.Is(derr, localapi.ErrNoNode) {
			return derr
		}
		s, err := openSession(c)
		if err != nil {
			return err
		}
		defer s.Close()
		if s.Discovery() == nil {
			return errors.New("find --task: no node runs in --data-dir, so it needs --bootstrap (or MCPV2_BOOTSTRAP): the multiaddr of a peer of the mesh")
		}
		if matches, err = node.RankAgentsForTask(ctx, s.Discovery().Find, "", nil, task, c.Int("limit")); err != nil {
			return fmt.Errorf("find --task: %w", err)
		}
	}
	if len(matches) > c.Int("limit") && c.Int("limit") > 0 {
		matches = matches[:c.Int("limit")]
	}
	if c.Bool("json") {
		b, err := json.MarshalIndent(matches, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.App.Writer, "%s\n", printableJSON(b))
		return err
	}
	if len(matches) == 0 {
		return fmt.Errorf("find --task: no agent matches %q", task)
	}
	w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SCORE\tKIND\tNAME\tPEER\tURL\tHEALTHY\tSKILLS")
	for _, m := range matches {
		fmt.Fprintf(w, "%.1f\t%s\t%s\t%s\t%s\t%v\t%s\n", m.Score, m.Kind, oneLine(m.Name, 64), dash(printableLine(m.PeerID)),
			dash(printableLine(m.URL)), m.Healthy, oneLine(strings.Join(m.Skills, ","), 400))
	}
	return w.Flush()
}
