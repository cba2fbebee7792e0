package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/node/keys"
)

// keyCommand is `mcpv2 key`: add, list and revoke the API keys of the node
// of --data-dir, in <data-dir>/keys.json. It works while the node runs: the
// node holds state.db, not keys.json, and reads keys.json again when it
// changes.
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
			Usage: "key add: the skills the key grants on top of the policy's (comma separated or repeated; * for every skill)"},
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
			"the next request on, without a restart. The policy grants a key skills as \"key:NAME\".",
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

// keyRing checks c's arguments (want of them) and flags for its
// subcommand, and opens the key ring of --data-dir.
func keyRing(c *cli.Context, want int) (*keys.Ring, error) {
	sub := c.Command.Name
	if c.NArg() != want {
		return nil, fmt.Errorf("key %s: takes %d argument(s), got %d (%q): usage: %s", sub, want, c.NArg(), c.Args().Slice(), c.Command.UsageText)
	}
	for other, names := range keySubFlags {
		if other == sub {
			continue
		}
		for _, name := range names {
			// A flag set by its MCPV2_* twin is not an error: the
			// environment is shared by every subcommand.
			if c.IsSet(name) && os.Getenv(keyFlagEnv(name)) == "" {
				return nil, fmt.Errorf("key %s: --%s is a flag of `mcpv2 key %s`", sub, name, other)
			}
		}
	}
	dir, err := dataDir(c)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", sub, err)
	}
	return keys.Open(filepath.Join(dir, keys.FileName))
}

// keyFlagEnv is the MCPV2_* twin of a subcommand flag of `mcpv2 key`.
func keyFlagEnv(name string) string { return "MCPV2_KEY_" + strings.ToUpper(name) }

// keyAdd is `mcpv2 key add NAME`: the secret alone on stdout (KEY=$(mcpv2
// key add ci) works), and how to use it on stderr.
func keyAdd(c *cli.Context) error {
	ring, err := keyRing(c, 1)
	if err != nil {
		return err
	}
	expires, err := keys.ParseExpires(c.String("expires"))
	if err != nil {
		return fmt.Errorf("key add: --expires: %w", err)
	}
	name := c.Args().First()
	secret, k, err := ring.Add(name, splitList(c.StringSlice("grant")), expires)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(c.App.Writer, secret); err != nil {
		return fmt.Errorf("key add: the key %q was added, but its secret could not be printed (revoke it): %w", name, err)
	}
	w := c.App.ErrWriter
	fmt.Fprintf(w, "mcpv2: added the API key %q to %s.\n", k.Name, ring.Path())
	fmt.Fprintln(w, "  It is shown this once: the node keeps only its SHA-256.")
	switch {
	case len(k.Grants) == 0:
		fmt.Fprintf(w, "  It grants no skill itself: the caller gets ping and tools/list, and what the node's policy\n"+
			"  grants \"key:%s\" and \"*\" (--grant SKILL,… or --grant '*' on add gives it more).\n", k.Name)
	case len(k.Grants) == 1 && k.Grants[0] == "*":
		fmt.Fprintln(w, "  It grants every skill.")
	default:
		fmt.Fprintf(w, "  It grants %s, on top of what the node's policy grants \"key:%s\" and \"*\".\n",
			printableLine(strings.Join(k.Grants, ", ")), k.Name)
	}
	if !k.Expires.IsZero() {
		fmt.Fprintf(w, "  It expires at %s.\n", k.Expires.Local().Format(time.RFC3339))
	}
	fmt.Fprintln(w, "  Send it as the header  Authorization: Bearer <key>  (MCP clients, A2A agents, curl);")
	fmt.Fprintf(w, "  mcpv2 key revoke %s  ends it.\n", k.Name)
	return nil
}

// keyJSON is one key as `mcpv2 key list --json` prints it.
type keyJSON struct {
	Name    string     `json:"name"`
	Status  string     `json:"status"`
	Grants  []string   `json:"grants"`
	Created time.Time  `json:"created"`
	Expires *time.Time `json:"expires,omitempty"`
	Revoked *time.Time `json:"revoked,omitempty"`
}

// keyList is `mcpv2 key list`: a table and the number of active keys, or
// a JSON array. The file may have been edited by hand: every name and grant
// reaches the terminal escaped (printableLine, printableJSON).
func keyList(c *cli.Context) error {
	ring, err := keyRing(c, 0)
	if err != nil {
		return err
	}
	list, err := ring.List()
	if err != nil {
		return err
	}
	now := time.Now()
	if c.Bool("json") {
		return printKeysJSON(c.App.Writer, list, now)
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tGRANTS\tCREATED\tEXPIRES")
	active := 0
	for _, k := range list {
		st := k.Status(now)
		if st == keys.StatusActive {
			active++
		}
		expires := "never"
		if !k.Expires.IsZero() {
			expires = k.Expires.Local().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", oneLine(k.Name, 80), st, dash(oneLine(strings.Join(k.Grants, ","), 200)),
			k.Created.Local().Format("2006-01-02 15:04"), expires)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "%d active\n", active)
	return err
}

// printKeysJSON writes list as a JSON array, with its statuses at now.
func printKeysJSON(w io.Writer, list []keys.Key, now time.Time) error {
	out := make([]keyJSON, 0, len(list))
	for _, k := range list {
		kj := keyJSON{Name: k.Name, Status: k.Status(now), Grants: k.Grants, Created: k.Created}
		if kj.Grants == nil {
			kj.Grants = []string{}
		}
		if !k.Expires.IsZero() {
			kj.Expires = &k.Expires
		}
		if !k.Revoked.IsZero() {
			kj.Revoked = &k.Revoked
		}
		out = append(out, kj)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", printableJSON(b))
	return err
}

// keyRevoke is `mcpv2 key revoke NAME`.
func keyRevoke(c *cli.Context) error {
	ring, err := keyRing(c, 1)
	if err != nil {
		return err
	}
	name := c.Args().First()
	if err := ring.Revoke(name); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "revoked the API key %q in %s; a running node refuses it from its next request on\n",
		name, ring.Path())
	return err
}
