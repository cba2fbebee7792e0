package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/node/localapi"
	"github.com/mcpv2/mcpv2/protocol"
)

// agentsTimeout bounds an agents command: an add reads each agent's card.
const agentsTimeout = 90 * time.Second

func agentsCommand() *cli.Command {
	flags := []cli.Flag{
		dataDirFlag,
		&cli.BoolFlag{Name: "bridge", EnvVars: []string{"MCPV2_AGENTS_BRIDGE"},
			Usage: "agents add: publish the agents into the mesh through this node (their skills become this node's, its card lists them)"},
		&cli.BoolFlag{Name: "json", EnvVars: []string{"MCPV2_AGENTS_JSON"}, Usage: "agents list: print the agents as a JSON array"},
	}
	return &cli.Command{
		Name:  "agents",
		Usage: "register, list and remove A2A agents outside the mesh (by URL) on the running node",
		UsageText: "mcpv2 agents add URL… [--bridge]\n" +
			"mcpv2 agents list [--json]\n" +
			"mcpv2 agents remove URL\n" +
			"(each takes --data-dir DIR, the node's)",
		Description: "The node reads each agent's card (A2A v1.0 or v0.3), health-checks it on a schedule (--agents-interval)\n" +
			"and keeps it in <data-dir>/agents.json across restarts. With --bridge the node publishes the agent into\n" +
			"the mesh: its skills become skills of this node (a name this node already has is served as\n" +
			"<agent>.<skill>), and the node's signed card lists it, so mcpv2 find, mesh_find/mesh_call and the\n" +
			"orchestrator reach it through this node. Only the node's operator can: the command talks to the\n" +
			"running node over <data-dir>/control.sock.",
		Flags: flags,
		Subcommands: []*cli.Command{
			{Name: "add", Usage: "register agents by URL (their cards are read first)", UsageText: "mcpv2 agents add URL… [--bridge] [--data-dir DIR]", Action: agentsAdd},
			{Name: "list", Usage: "list the registered agents and their health", UsageText: "mcpv2 agents list [--json] [--data-dir DIR]", Action: agentsList},
			{Name: "remove", Usage: "forget an agent (and stop bridging it)", UsageText: "mcpv2 agents remove URL [--data-dir DIR]", Action: agentsRemove},
		},
	}
}

// dialAgents dials the running node's local API for an agents command.
func dialAgents(c *cli.Context) (context.Context, *localapi.Client, func(), error) {
	dir, err := dataDir(c)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(c.Context, agentsTimeout)
	cl, err := localapi.Dial(ctx, dir)
	if err != nil {
		cancel()
		if errors.Is(err, localapi.ErrNoNode) {
			return nil, nil, nil, fmt.Errorf("agents: %w: the agents are the running node's (it reads their cards and checks them)", err)
		}
		return nil, nil, nil, err
	}
	return ctx, cl, func() { cl.Close(); cancel() }, nil
}

func agentsAdd(c *cli.Context) error {
	if c.NArg() == 0 {
		return errors.New("agents add: usage: mcpv2 agents add URL… [--bridge]")
	}
	ctx, cl, done, err := dialAgents(c)
	if err != nil {
		return err
	}
	defer done()
	res, err := cl.AddAgents(ctx, localapi.AddAgentsRequest{URLs: c.Args().Slice(), Bridge: c.Bool("bridge")})
	if err != nil {
		return fmt.Errorf("agents add: %w", err)
	}
	var failed []string
	for _, a := range res.Agents {
		if a.LastError != "" || !a.Healthy {
			failed = append(failed, fmt.Sprintf("%s: %s", printableLine(a.URL), oneLine(a.LastError, 400)))
			continue
		}
		how := "registered"
		if a.Bridged {
			how = "bridged into the mesh by this node"
		}
		var names []string
		for _, sk := range a.Skills {
			names = append(names, sk.Name)
		}
		fmt.Fprintf(c.App.Writer, "%s  %s (A2A %s), %s; skills: %s\n", printableLine(a.URL), oneLine(a.Name, 80),
			oneLine(a.ProtocolVersion, 8), how, dash(oneLine(strings.Join(names, ","), 400)))
	}
	if len(failed) > 0 {
		return fmt.Errorf("agents add: %d of %d not added:\n  %s", len(failed), len(res.Agents), strings.Join(failed, "\n  "))
	}
	return nil
}

func agentsList(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("agents list: unexpected argument %q", c.Args().First())
	}
	ctx, cl, done, err := dialAgents(c)
	if err != nil {
		return err
	}
	defer done()
	res, err := cl.Agents(ctx)
	if err != nil {
		return fmt.Errorf("agents list: %w", err)
	}
	if c.Bool("json") {
		b, err := json.MarshalIndent(res.Agents, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.App.Writer, "%s\n", printableJSON(b))
		return err
	}
	return printAgents(c.App.Writer, res.Agents)
}

// printAgents writes agents as a table. Names, URLs and errors came from
// the agents: printed escaped.
func printAgents(w io.Writer, agents []protocol.ExternalAgent) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "URL\tNAME\tHEALTH\tBRIDGED\tCHECKED\tSKILLS")
	for _, a := range agents {
		health := "healthy"
		if !a.Healthy {
			health = "unhealthy: " + oneLine(a.LastError, 120)
		}
		if a.Discovered {
			health = "discovered (not registered), " + health
		}
		checked := "never"
		if !a.LastChecked.IsZero() {
			checked = a.LastChecked.Local().Format("15:04:05")
		}
		var names []string
		for _, sk := range a.Skills {
			names = append(names, sk.Name)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s\n", printableLine(a.URL), oneLine(a.Name, 64), health, a.Bridged, checked,
			dash(oneLine(strings.Join(names, ","), 400)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d agents\n", len(agents))
	return err
}

func agentsRemove(c *cli.Context) error {
	if c.NArg() != 1 {
		return errors.New("agents remove: usage: mcpv2 agents remove URL")
	}
	ctx, cl, done, err := dialAgents(c)
	if err != nil {
		return err
	}
	defer done()
	if _, err := cl.RemoveAgent(ctx, c.Args().First()); err != nil {
		return fmt.Errorf("agents remove: %w", err)
	}
	fmt.Fprintf(c.App.Writer, "removed %s\n", printableLine(c.Args().First()))
	return nil
}
