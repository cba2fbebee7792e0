package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/edge/mcp"
	"github.com/mcpv2/mcpv2/node/localapi"
	"github.com/mcpv2/mcpv2/protocol"
)

// uiFlags serve the dashboard (`mcpv2 node --ui ADDR`): new flags on each
// call, since mcpv2 mcp changes the default of its own.
func uiFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "ui", EnvVars: []string{"MCPV2_UI"}, Value: "127.0.0.1:0",
			Usage: "serve the dashboard at http://ADDR/ (host:port or http://host:port/, port 0: any free one; a loopback host unless --ui-public), logged in with the link the banner prints (MCPV2_UI=…, also from mcpv2 ui); \"off\": no dashboard (the default of mcpv2 mcp)"},
		&cli.BoolFlag{Name: "ui-public", EnvVars: []string{"MCPV2_UI_PUBLIC"},
			Usage: "let --ui listen on an address other than loopback (plain HTTP: the login link and cookie are only as safe as the network, and they carry the node owner's rights)"},
	}
}

// uiOptions are the local API's options of the --ui flags: none with
// --ui off.
func uiOptions(c *cli.Context) ([]localapi.Option, error) {
	addr := strings.TrimSpace(c.String("ui"))
	if u, err := url.Parse(addr); err == nil && u.Scheme != "" && u.Host != "" {
		switch {
		case u.Query().Has("token"):
			return nil, fmt.Errorf("--ui %q is a login link (the MCPV2_UI= line of a node's banner, exported into this shell?), not an address: unset MCPV2_UI or give --ui 127.0.0.1:0", protocol.Clip(u.Scheme+"://"+u.Host+u.Path, 80))
		case u.Scheme != "http":
			return nil, fmt.Errorf("--ui %q: the dashboard serves plain HTTP on loopback; give host:port or http://host:port/", protocol.Clip(addr, 80))
		}
		addr = u.Host
	}
	if addr == "off" || addr == "" {
		if c.Bool("ui-public") {
			return nil, errors.New("--ui-public needs --ui ADDR (it is off)")
		}
		return nil, nil
	}
	if err := localapi.CheckDashboardAddr(addr, c.Bool("ui-public")); err != nil {
		return nil, fmt.Errorf("--ui %w", err)
	}
	return []localapi.Option{localapi.WithDashboard(addr, c.Bool("ui-public"))}, nil
}

// uiCommand prints a login link of the running node's dashboard.
func uiCommand() *cli.Command {
	return &cli.Command{
		Name:  "ui",
		Usage: "print a login link of the running node's dashboard (the one it printed, or a new one after a logout)",
		UsageText: "mcpv2 ui [--data-dir DIR]\n" +
			"(asks the node over <data-dir>/control.sock; the link carries the node owner's rights: do not share it)",
		Flags: []cli.Flag{dataDirFlag},
		Action: func(c *cli.Context) error {
			ctx, cl, done, err := dialRunning(c, "ui")
			if err != nil {
				return err
			}
			defer done()
			l, err := cl.Link(ctx)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.App.Writer, "MCPV2_UI=%s\n", l.Login)
			return err
		},
	}
}

// mcpSessions is the MCP face's sessions as the dashboard lists them.
type mcpSessions struct{ f *mcp.Face }

func (m mcpSessions) Sessions() []localapi.Session {
	out := []localapi.Session{}
	for _, s := range m.f.Sessions() {
		out = append(out, localapi.Session{ID: s.ID, Owner: s.Owner, Privileged: s.Privileged, Started: s.Started, LastUsed: s.LastUsed, InFlight: s.InFlight})
	}
	return out
}

func (m mcpSessions) CloseSession(id string) error { return m.f.CloseSession(id) }
