package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/transport"
)

// Flags shared by several commands. Every flag has an MCPV2_* twin.
var (
	dataDirFlag = &cli.StringFlag{Name: "data-dir", EnvVars: []string{"MCPV2_HOME", "MCPV2_DATA_DIR"},
		Usage: "where identity, state, audit log and files live (default ~/.mcpv2)"}
	secretFlag = &cli.StringFlag{Name: "secret", EnvVars: []string{"MCPV2_SECRET"},
		Usage: "shared mesh secret: calls carry a mesh session minted with it, and a node grants every skill to callers presenting one"}
	keyFlag = &cli.StringFlag{Name: "key", EnvVars: []string{"MCPV2_KEY"},
		Usage: "an API key of the node (mcpv2 key add there): HTTP edge calls present it instead of a session"}
	bootstrapFlag = &cli.StringSliceFlag{Name: "bootstrap", EnvVars: []string{"MCPV2_BOOTSTRAP"},
		Usage: "multiaddrs of bootstrap peers (comma separated or repeated)"}
	logLevelFlag = &cli.StringFlag{Name: "log-level", EnvVars: []string{"MCPV2_LOG_LEVEL"}, Value: "info",
		Usage: "debug, info, warn or error (logs go to stderr)"}
	maxMessageFlag = &cli.IntFlag{Name: "max-message", EnvVars: []string{"MCPV2_MAX_MESSAGE"}, Value: 8 << 20,
		Usage: "largest message (frame or HTTP body) in bytes"}
	routableFlag = &cli.StringSliceFlag{Name: "routable-cidr", EnvVars: []string{"MCPV2_ROUTABLE_CIDR"},
		Usage: "treat this private IPv4 range as routable (overlays spanning VPCs, labs); repeatable"}
	noNATFlag = &cli.BoolFlag{Name: "no-nat", EnvVars: []string{"MCPV2_NO_NAT"},
		Usage: "turn off AutoNAT, port mapping, AutoRelay and hole punching"}
	timeoutFlag = &cli.DurationFlag{Name: "timeout", EnvVars: []string{"MCPV2_TIMEOUT"}, Value: 0, DefaultText: shortDuration(callTimeout),
		Usage: "give up a client call after this long"}
)

// What --timeout's 0 (its value unless given) means, per command: the
// commands apply these, and the help says them (timeoutDefaults).
const (
	callTimeout        = 2 * time.Minute  // call, ping, tools, card, shell
	findTimeout        = time.Minute      // find
	orchestrateTimeout = 5 * time.Minute  // orchestrate
	sendEdgeTimeout    = 10 * time.Minute // send through an HTTP edge (none over the mesh)
)

// timeoutOr is c's --timeout, or def when it is not set (0).
func timeoutOr(c *cli.Context, def time.Duration) time.Duration {
	if d := c.Duration("timeout"); d > 0 {
		return d
	}
	return def
}

// timeoutDefaults is the help's default of --timeout for the commands
// where it is not callTimeout.
var timeoutDefaults = map[string]string{
	"find":        shortDuration(findTimeout),
	"orchestrate": shortDuration(orchestrateTimeout),
	"send":        "none over the mesh, " + shortDuration(sendEdgeTimeout) + " through an HTTP edge",
	"mcp":         "none: each MCP request's own",
}

// withTimeoutDefaults gives the commands of timeoutDefaults a --timeout of
// their own that says their default.
func withTimeoutDefaults(app *cli.App) *cli.App {
	for _, cmd := range app.Commands {
		text, ok := timeoutDefaults[cmd.Name]
		if !ok {
			continue
		}
		cmd.Flags = slices.Clone(cmd.Flags)
		for i, f := range cmd.Flags {
			if f == timeoutFlag {
				own := *timeoutFlag
				own.DefaultText = text
				cmd.Flags[i] = &own
			}
		}
	}
	return app
}

// dataDir resolves --data-dir: the flag, $MCPV2_HOME, or ~/.mcpv2.
func dataDir(c *cli.Context) (string, error) {
	if d := c.String("data-dir"); d != "" {
		return filepath.Abs(d)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no --data-dir and no home directory: %w", err)
	}
	return filepath.Join(home, ".mcpv2"), nil
}

// existingDataDir refuses a data dir that does not exist, for a command
// that reads what a node left there (cmd names it): a typo of --data-dir
// is said to be one rather than read as an empty node (or, for mcpv2 id,
// given a new identity nobody runs). wanted says whose dir to pass.
func existingDataDir(cmd, dir, wanted string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: no data dir %s: no node has run there yet (start one with mcpv2 node, or pass the --data-dir of %s)", cmd, printableLine(dir), wanted)
	} else if err != nil {
		return fmt.Errorf("%s: data dir: %w", cmd, err)
	}
	return nil
}

// logger builds the stderr logger of --log-level.
func logger(c *cli.Context) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(seedLogLevel(c.String("log-level")))); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.String("log-level"))
	}
	l := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	if b, ok := c.App.Metadata[stdLogKey].(*stdLogBridge); ok {
		b.logger.Store(l)
	}
	return l, nil
}

// stdLogKey is the cli.App.Metadata key of the stdLogBridge that main
// installs.
const stdLogKey = "mcpv2/stdlog"

// stdLogBridge is the output of the std log package, which some libraries
// write to (the mDNS library's "[zeroconf] no suitable IPv4 interface"):
// each line goes to the command's logger at Debug, so that it shows with
// --log-level debug only. Until the command has built its logger the lines
// go to fallback as they are. Safe for concurrent use.
type stdLogBridge struct {
	logger   atomic.Pointer[slog.Logger]
	fallback io.Writer
}

// Write logs one line of the log package (it writes each message with a
// single Write).
func (b *stdLogBridge) Write(p []byte) (int, error) {
	l := b.logger.Load()
	if l == nil {
		return b.fallback.Write(p)
	}
	l.Debug(strings.TrimRight(string(p), "\n"), "from", "go log")
	return len(p), nil
}

// applyRoutable makes --routable-cidr ranges public for go-libp2p; it must
// run before any host exists.
func applyRoutable(c *cli.Context) error {
	return transport.AllowRoutable(splitList(c.StringSlice("routable-cidr")))
}

// splitList flattens repeated and comma-separated values.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
