package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
)

func findCommand() *cli.Command {
	return &cli.Command{
		Name:      "find",
		Usage:     "find agents by skill or tag in the DHT, ranked",
		UsageText: "mcpv2 find SKILL_OR_TAG --bootstrap ADDR [--json] [--limit N] [--stats]",
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the ranked results as JSON"},
			&cli.BoolFlag{Name: "stats", Usage: "print how far the find got on stderr: a line 'find-stats {JSON}'"},
			&cli.IntFlag{Name: "limit", Value: 20, Usage: "at most this many agents"},
		}, clientFlags...),
		Action: func(c *cli.Context) error {
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
				fmt.Fprintf(w, "%.1f\t%s\t%s\t%v\t%s\n", r.Score, printableLine(r.Card.PeerID), oneLine(r.Card.Name, 64),
					r.Reachable, oneLine(strings.Join(names, ","), 400))
			}
			return w.Flush()
		},
	}
}
