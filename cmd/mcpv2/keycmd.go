package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/node/keys"
	"github.com/mcpv2/mcpv2/node/localapi"
)

// keyCommand is `mcpv2 key`: add, list and revoke the API keys of the node
// of --data-dir, in <data-dir>/keys.json: through the running node's local
// API when one runs (its edge's ring makes the change), else on the file
// (see keyService); the node reads keys.json again when it changes.
//
// The flags of the subcommands are flags of `mcpv2 key` itself:
// interspersed moves the flags that follow the positional arguments (`mcpv2
// key add ci --grant echo`) in front of them, and only for the flags of the
// command it knows, `key`; the subcommands read them through their parent's
// context, and refuse one that another subcommand takes (keySubFlags).
func keyCommand() *cli.Command {
	flags := []cli.Flag{
		dataDirFlag,
		&cli.StringSliceFlag{Name: "grant", EnvVars: []string{"MCPV2_KEY_GRANT"},
			Usage: "key add: the skills the key grants on top of the policy's (comma separated or repeated; * for every skill, but the pseudo-skills such as security_audit must be named)"},
		&cli.StringFlag{Name: "expires", EnvVars: []string{"MCPV2_KEY_EXPIRES"},
			Usage: "key add: how long the key stays valid: `30d`, 2w, 12h, 90m (default: it never expires)"},
		&cli.BoolFlag{Name: "json", EnvVars: []string{"MCPV2_KEY_JSON"},
			Usage: "key list: print the keys as a JSON array"},
	}
	return &cli.Command{
		Name:  "key",
		Usage: "add, list and revoke the node's API keys (credentials for MCP clients and A2A agents)",
		UsageText: "mcpv2 key add NAME [--grant SKILL,…] [--expires 30d]\n" +
			"mcpv2 key list [--json]\n" +
			"mcpv2 key revoke NAME\n" +
			"(each takes --data-dir DIR, the node's)",
		Description: "An API key is sent as the header Authorization: Bearer <key> to the node's HTTP edge (its MCP and\n" +
			"A2A faces too). The keys live in <data-dir>/keys.json, which keeps only each secret's SHA-256; the\n" +
			"running node reads it again when it changes, so a new key works and a revoked one is refused from\n" +
			"the next request on, without a restart. While a node runs in --data-dir, the command asks it (over\n" +
			"<data-dir>/control.sock); else it edits the file. The policy grants a key skills as \"key:NAME\".",
		Flags: flags,
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "add a key and print its secret (shown only this once)",
				UsageText: "mcpv2 key add NAME [--grant SKILL,…] [--expires 30d] [--data-dir DIR]",
				Action:    keyAdd,
			},
			{
				Name:      "list",
				Usage:     "list the keys: name, status (active, revoked, expired), grants, created, expires",
				UsageText: "mcpv2 key list [--json] [--data-dir DIR]",
				Action:    keyList,
			},
			{
				Name:      "revoke",
				Usage:     "revoke a key: a running node refuses it from its next request on",
				UsageText: "mcpv2 key revoke NAME [--data-dir DIR]",
				Action:    keyRevoke,
			},
		},
	}
}

// keySubFlags says which of `mcpv2 key`'s own flags each subcommand takes
// (beside --data-dir).
var keySubFlags = map[string][]string{
	"add":    {"grant", "expires"},
	"list":   {"json"},
	"revoke": nil,
}

// keyService is where `mcpv2 key` adds, lists and revokes keys, with the
// same answers either way: the running node of --data-dir over its local
// API (whose /v1/keys routes run localapi.Keys on the ring its edge
// verifies with, so a change holds from the edge's next request), or,
// when no node runs there, localapi.Keys on keys.json itself.
type keyService interface {
	List() (localapi.KeysResponse, error)
	Add(localapi.AddKeyRequest) (localapi.AddKeyResponse, error)
	Revoke(name string) (localapi.RevokeKeyResponse, error)
}

// nodeKeys is keyService through the running node's local API.
type nodeKeys struct {
	ctx context.Context
	cl  *localapi.Client
}

func (k nodeKeys) List() (localapi.KeysResponse, error) {
	r, err := k.cl.Keys(k.ctx)
	if err != nil {
		return localapi.KeysResponse{}, err
	}
	return *r, nil
}

func (k nodeKeys) Add(req localapi.AddKeyRequest) (localapi.AddKeyResponse, error) {
	r, err := k.cl.AddKey(k.ctx, req)
	if err != nil {
		return localapi.AddKeyResponse{}, err
	}
	return *r, nil
}

func (k nodeKeys) Revoke(name string) (localapi.RevokeKeyResponse, error) {
	r, err := k.cl.RevokeKey(k.ctx, name)
	if err != nil {
		return localapi.RevokeKeyResponse{}, err
	}
	return *r, nil
}

// openKeys checks c's arguments (want of them) and flags for its
// subcommand, and returns the keys of --data-dir: through its running
// node, or in its keys file when none runs. done ends the use.
func openKeys(c *cli.Context, want int) (svc keyService, done func(), err error) {
	sub := c.Command.Name
	if c.NArg() != want {
		return nil, nil, fmt.Errorf("key %s: takes %d argument(s), got %d (%q): usage: %s", sub, want, c.NArg(), c.Args().Slice(), c.Command.UsageText)
	}
	for other, names := range keySubFlags {
		if other == sub {
			continue
		}
		for _, name := range names {
			// A flag set by its MCPV2_* twin is not an error: the
			// environment is shared by every subcommand.
			if c.IsSet(name) && os.Getenv(keyFlagEnv(name)) == "" {
				return nil, nil, fmt.Errorf("key %s: --%s is a flag of `mcpv2 key %s`", sub, name, other)
			}
		}
	}
	dir, err := dataDir(c)
	if err != nil {
		return nil, nil, fmt.Errorf("key %s: %w", sub, err)
	}
	ctx, cancel := context.WithTimeout(c.Context, localTimeout)
	cl, err := localapi.Dial(ctx, dir)
	if err == nil {
		return nodeKeys{ctx: ctx, cl: cl}, func() { cl.Close(); cancel() }, nil
	}
	cancel()
	if !errors.Is(err, localapi.ErrNoNode) {
		return nil, nil, fmt.Errorf("key %s: %w", sub, err)
	}
	ring, err := keys.Open(filepath.Join(dir, keys.FileName))
	if err != nil {
		return nil, nil, err
	}
	return localapi.NewKeys(ring, nil), func() {}, nil
}

// keyFlagEnv is the MCPV2_* twin of a subcommand flag of `mcpv2 key`.
func keyFlagEnv(name string) string { return "MCPV2_KEY_" + strings.ToUpper(name) }

// keyAdd is `mcpv2 key add NAME`: the secret alone on stdout (KEY=$(mcpv2
// key add ci) works), and how to use it on stderr.
func keyAdd(c *cli.Context) error {
	svc, done, err := openKeys(c, 1)
	if err != nil {
		return err
	}
	defer done()
	if _, err := keys.ParseExpires(c.String("expires")); err != nil {
		return fmt.Errorf("key add: --expires: %w", err)
	}
	name := c.Args().First()
	added, err := svc.Add(localapi.AddKeyRequest{Name: name, Grants: splitList(c.StringSlice("grant")), Expires: c.String("expires")})
	if err != nil {
		return err
	}
	k := added.Key
	if _, err := fmt.Fprintln(c.App.Writer, added.Secret); err != nil {
		return fmt.Errorf("key add: the key %q was added, but its secret could not be printed (revoke it): %w", name, err)
	}
	w := c.App.ErrWriter
	fmt.Fprintf(w, "mcpv2: added the API key %q to %s.\n", k.Name, added.File)
	fmt.Fprintln(w, "  It is shown this once: the node keeps only its SHA-256.")
	switch {
	case len(k.Grants) == 0:
		fmt.Fprintf(w, "  It grants no skill itself: the caller gets ping and tools/list, and what the node's policy\n"+
			"  grants \"key:%s\" and \"*\" (--grant SKILL,… or --grant '*' on add gives it more).\n", k.Name)
	case len(k.Grants) == 1 && k.Grants[0] == "*":
		fmt.Fprintln(w, "  It grants every skill (not the pseudo-skills security_audit, read_resource, discover_agents, list_agents: name those in --grant).")
	default:
		fmt.Fprintf(w, "  It grants %s, on top of what the node's policy grants \"key:%s\" and \"*\".\n",
			printableLine(strings.Join(k.Grants, ", ")), k.Name)
	}
	if k.Expires != nil {
		fmt.Fprintf(w, "  It expires at %s.\n", k.Expires.Local().Format(time.RFC3339))
	}
	fmt.Fprintln(w, "  Send it as the header  Authorization: Bearer <key>  (MCP clients, A2A agents, curl);")
	fmt.Fprintf(w, "  mcpv2 key revoke %s  ends it.\n", k.Name)
	return nil
}

// keyList is `mcpv2 key list`: a table and the number of active keys, or
// a JSON array. The file may have been edited by hand: every name and grant
// reaches the terminal escaped (printableLine, printableJSON).
func keyList(c *cli.Context) error {
	svc, done, err := openKeys(c, 0)
	if err != nil {
		return err
	}
	defer done()
	got, err := svc.List()
	if err != nil {
		return err
	}
	list := got.Keys
	if c.Bool("json") {
		return printKeysJSON(c.App.Writer, list)
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tGRANTS\tCREATED\tEXPIRES")
	active := 0
	for _, k := range list {
		st := k.Status
		if st == keys.StatusActive {
			active++
		}
		expires := "never"
		if k.Expires != nil {
			expires = k.Expires.Local().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", oneLine(k.Name, 80), oneLine(st, 20), dash(oneLine(strings.Join(k.Grants, ","), 200)),
			k.Created.Local().Format("2006-01-02 15:04"), expires)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "%d active\n", active)
	return err
}

// printKeysJSON writes list as a JSON array.
func printKeysJSON(w io.Writer, list []localapi.KeyInfo) error {
	if list == nil {
		list = []localapi.KeyInfo{}
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", printableJSON(b))
	return err
}

// keyRevoke is `mcpv2 key revoke NAME`.
func keyRevoke(c *cli.Context) error {
	svc, done, err := openKeys(c, 1)
	if err != nil {
		return err
	}
	defer done()
	name := c.Args().First()
	got, err := svc.Revoke(name)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "revoked the API key %q in %s; a running node refuses it from its next request on\n",
		name, got.File)
	return err
}
