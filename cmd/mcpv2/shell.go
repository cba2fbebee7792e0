package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/internal/suggest"
	"github.com/mcpv2/mcpv2/node"
)

// shellPrompt is printed before each line the shell reads.
const shellPrompt = "mcpv2> "

func shellCommand() *cli.Command {
	return &cli.Command{
		Name:  "shell",
		Usage: "the interactive prompt of the seed: start and stop peers here, connect, send prompts, files and payments, ping",
		UsageText: "mcpv2 shell [--data-dir DIR] [--secret S] [--log-dir DIR] [--default-port N]\n\n" +
			"Reads commands from standard input (a terminal or a pipe); end of input, exit or quit stops\n" +
			"the peers it started. Type help at the prompt for the commands.\n\n" +
			"On a terminal it edits lines: Up/Down history (kept in <data-dir>/shell/history, mode 0600),\n" +
			"Tab completes commands and the ports and peer IDs of started peers, Ctrl-L clears the screen.\n" +
			"From a pipe it reads plain lines, for scripts.",
		Flags: []cli.Flag{
			dataDirFlag, secretFlag, bootstrapFlag, logLevelFlag, maxMessageFlag, timeoutFlag, routableFlag, noNATFlag,
			&cli.StringFlag{Name: "log-dir", EnvVars: []string{"MCPV2_SHELL_LOG_DIR"},
				Usage: "where ReadyTo writes the log of each peer it starts (default: that peer's data dir, <data-dir>/shell/peer-*/node.log)"},
			&cli.IntFlag{Name: "default-port", EnvVars: []string{"MCPV2_SHELL_PORT"}, Value: 8000,
				Usage: "the port ReadyTo tries first when given no --port (busy ports are skipped, up to 100 of them)"},
		},
		Action: runShell,
	}
}

func runShell(c *cli.Context) error {
	log, err := logger(c)
	if err != nil {
		return err
	}
	dir, err := dataDir(c)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("shell: find the mcpv2 binary that ReadyTo runs: %w", err)
	}
	if p := c.Int("default-port"); p < 1 || p > 65535 {
		return fmt.Errorf("shell: --default-port %d is not a TCP port", p)
	}
	timeout := timeoutOr(c, callTimeout)
	sh := newShell(shellConfig{
		Out: c.App.Writer, Log: log, Exe: exe, DataDir: dir, LogDir: c.String("log-dir"),
		Secret: c.String("secret"), DefaultPort: c.Int("default-port"), Timeout: timeout,
		MaxMessage: c.Int("max-message"),
		OpenMesh:   func() (*session, error) { return openSessionFor(c, true) },
	})
	if !stdioIsTerminal() {
		err = sh.Run(c.Context, os.Stdin)
		return errors.Join(err, sh.Close())
	}
	ed, err := newLineEditor(sh, func(msg string) { log.Warn("shell: " + msg) })
	if err != nil {
		return errors.Join(err, sh.Close())
	}
	sh.completer = ed.completer
	err = sh.run(c.Context, ed)
	return errors.Join(err, ed.close(), sh.Close())
}

// shellConfig configures a shell.
type shellConfig struct {
	// Out receives everything the shell says, prompts included.
	Out io.Writer
	// Log receives the shell's own logs (not the children's).
	Log *slog.Logger
	// Exe is the mcpv2 binary that ReadyTo starts as `node`.
	Exe string
	// DataDir is the shell's data dir; the peers it starts live under
	// DataDir/shell.
	DataDir string
	// LogDir, when set, receives the peers' logs instead of their data dirs.
	LogDir string
	// Secret is the shared secret of started peers and of mesh calls; empty:
	// one is generated for this shell.
	Secret string
	// DefaultPort is the first port ReadyTo tries without --port.
	DefaultPort int
	// Timeout bounds one call.
	Timeout time.Duration
	// MaxMessage caps one message (and so an upload).
	MaxMessage int
	// OpenMesh opens the libp2p side (host, and DHT with --bootstrap); the
	// shell calls it once, at the first mesh address.
	OpenMesh func() (*session, error)
}

// shell is one interactive session. Its commands run one at a time on the
// goroutine of Run; beside it run only the goroutines of each started
// peer's supervise.Proc, which that Proc owns and its Close ends.
type shell struct {
	cfg             shellConfig
	out             io.Writer
	log             *slog.Logger
	secretGenerated bool

	edge        *edge.Client            // health checks, and edges of no peer of this shell
	edgeHTTP    *http.Client            // the transport of every edge client
	edgeClients map[string]*edge.Client // by secret, on edgeHTTP
	refused     *refusalCounter         // counts the 401s that edge clients saw

	mesh        *session                // nil until the first mesh address
	meshClients map[string]*node.Client // by secret, the mesh dialer's (closed with it)
	peers       []*shellPeer            // started and not stopped, in start order
	convs       map[string]string       // LLM-mode conversation per peer key
	completer   *shellCompleter         // the line editor's, told of the started peers; nil without one
}

func newShell(cfg shellConfig) *shell {
	sh := &shell{cfg: cfg, out: cfg.Out, log: cfg.Log, meshClients: map[string]*node.Client{}, convs: map[string]string{}}
	if sh.log == nil {
		sh.log = slog.New(slog.DiscardHandler)
	}
	if sh.cfg.Secret == "" {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		sh.cfg.Secret, sh.secretGenerated = hex.EncodeToString(b), true
	}
	sh.edgeHTTP, sh.refused = newShellHTTPClient()
	sh.edgeClients = map[string]*edge.Client{}
	sh.edge = sh.edgeClientFor("")
	return sh
}

// errQuit is returned by exit and quit.
var errQuit = errors.New("quit")

// Run reads commands from in, plain lines, until end of input, exit or
// quit, or until ctx ends (SIGINT, SIGTERM), and then stops the peers it
// started. A line's command runs to its end before the next line is read.
// When Run returns because ctx ended, the goroutine that reads in may stay
// blocked in a read (a terminal read cannot be interrupted), which ends
// with the process.
func (sh *shell) Run(ctx context.Context, in io.Reader) error {
	return sh.run(ctx, newPlainLines(in))
}

// run is Run on any line source: plain lines, or the line editor on a
// terminal.
func (sh *shell) run(ctx context.Context, src lineSource) error {
	fmt.Fprintln(sh.out, "mcpv2 shell "+node.Version+": type help for the commands, exit to leave.")
	if sh.secretGenerated {
		fmt.Fprintln(sh.out, "The peers you start here share a secret generated for this shell (--secret sets one).")
	}
	type result struct {
		line string
		err  error
	}
	want := make(chan struct{})
	got := make(chan result)
	stop := make(chan struct{})
	defer close(stop)
	// The reader reads a line only when asked, so that the line editor's
	// prompt comes after a command's output, not in the middle of it.
	go func() {
		for {
			select {
			case <-want:
			case <-stop:
				return
			}
			line, err := src.next()
			select {
			case got <- result{line, err}:
			case <-stop:
				return
			}
		}
	}()
	for {
		if sh.completer != nil {
			sh.completer.update(sh.peers)
		}
		if ctx.Err() == nil { // else a signal ended the last command: no new prompt
			if !src.ownPrompt() {
				fmt.Fprint(sh.out, shellPrompt)
			}
			want <- struct{}{}
		}
		select {
		case <-ctx.Done():
			_ = src.close() // the terminal back to its mode before the output
			fmt.Fprintln(sh.out, "\nInterrupted.")
			sh.stopAll()
			return nil
		case r := <-got:
			switch {
			case errors.Is(r.err, errLeave):
				fmt.Fprintln(sh.out, "Interrupted.")
				sh.stopAll()
				return nil
			case errors.Is(r.err, io.EOF):
				if !src.ownPrompt() {
					fmt.Fprintln(sh.out)
				}
				sh.stopAll()
				return nil
			case r.err != nil:
				sh.stopAll()
				return fmt.Errorf("shell: read the input: %w", r.err)
			}
			if sh.exec(ctx, r.line) {
				sh.stopAll()
				return nil
			}
		}
	}
}

// exec runs one line and reports whether the shell should end.
func (sh *shell) exec(ctx context.Context, line string) (quit bool) {
	words, err := splitWords(line)
	if err != nil {
		fmt.Fprintf(sh.out, "cannot read that line: %v\n", err)
		return false
	}
	if len(words) == 0 || strings.HasPrefix(words[0], "#") {
		return false
	}
	cmd := lookupShellCmd(words[0])
	if cmd == nil {
		if hint := suggest.Hint(words[0], shellCmdNames()); hint != "" {
			fmt.Fprintf(sh.out, "unknown command %q%s\n", words[0], hint)
		} else {
			fmt.Fprintf(sh.out, "unknown command %q: type help for the list\n", words[0])
		}
		return false
	}
	args, err := parseOpts(cmd.names[0], words[1:], cmd.opts)
	if err == nil {
		err = cmd.run(sh, ctx, args)
	}
	switch {
	case errors.Is(err, errQuit):
		return true
	case err != nil:
		// A failed call's message may quote the peer (printable); a
		// failure in libp2p's words is explained as the CLI explains it,
		// its own words below (the prompt has no --verbose).
		msg := explained(err, true, "")
		if msg == "" {
			msg = printable(err.Error())
		}
		fmt.Fprintln(sh.out, msg)
	}
	return false
}

// shellCmd is one command of the prompt.
type shellCmd struct {
	names []string // the first is the canonical spelling; any case is accepted
	usage string
	help  string
	opts  shellOpts
	run   func(sh *shell, ctx context.Context, a shellArgs) error
}

func shellCmds() []shellCmd {
	return []shellCmd{
		{names: []string{"ReadyTo"}, usage: "ReadyTo [--port N] [--secret S] [--public-ip IP] [--llm-mode]",
			help: "start a peer (an mcpv2 node process with an HTTP edge) and print its addresses;\n" +
				"without --port the first free port from --default-port (8000) on; with --port exactly that one",
			opts: shellOpts{"port": true, "secret": true, "public-ip": true, "llm-mode": false},
			run:  (*shell).readyTo},
		{names: []string{"StopTo", "StopPeer"}, usage: "StopTo <port|address>",
			help: "stop a peer this shell started, and check that its port is free again",
			run:  (*shell).stopTo},
		{names: []string{"ConnectTo"}, usage: "ConnectTo <port|address>",
			help: "check that a peer answers: reachable, then an authenticated ping",
			run:  (*shell).connectTo},
		{names: []string{"SentTo", "SendTo"}, usage: "SentTo \"prompt\" <port|address> [--provider P] [--new] | SentTo FILE <port|address>",
			help: "ask a peer (its ask skill; in LLM mode the conversation goes on until --new),\n" +
				"or upload FILE when that names a file here",
			opts: shellOpts{"provider": true, "new": false},
			run:  (*shell).sentTo},
		{names: []string{"PayTo"}, usage: "PayTo <amount> <port|address> [--currency C] [--memo M]",
			help: "send a payment request (the pay skill: a stub, nothing moves)",
			opts: shellOpts{"currency": true, "memo": true},
			run:  (*shell).payTo},
		{names: []string{"PingTo"}, usage: "PingTo <port|address>",
			help: "ping a peer and print the round-trip time",
			run:  (*shell).pingTo},
		{names: []string{"Peers"}, usage: "Peers",
			help: "list the peers this shell started",
			run:  (*shell).listPeers},
		{names: []string{"help", "?"}, usage: "help",
			help: "this list",
			run:  (*shell).help},
		{names: []string{"exit", "quit"}, usage: "exit",
			help: "stop the peers this shell started, and leave (so does end of input, or Ctrl-C)",
			run:  func(*shell, context.Context, shellArgs) error { return errQuit }},
	}
}

// lookupShellCmd finds a command by any of its names, in any case.
func lookupShellCmd(name string) *shellCmd {
	for _, c := range shellCmds() {
		for _, n := range c.names {
			if strings.EqualFold(n, name) {
				return &c
			}
		}
	}
	return nil
}

// shellCmdNames are the names a command line may begin with, canonical
// ones first, for the did-you-mean and Tab completion ("?" is left out).
func shellCmdNames() []string {
	var names []string
	cmds := shellCmds()
	for _, c := range cmds {
		names = append(names, c.names[0])
	}
	for _, c := range cmds {
		for _, n := range c.names[1:] {
			if n != "?" {
				names = append(names, n)
			}
		}
	}
	return names
}

func (sh *shell) help(context.Context, shellArgs) error {
	var b strings.Builder
	b.WriteString("Commands (any case; quote words with spaces as in a shell):\n")
	for _, c := range shellCmds() {
		fmt.Fprintf(&b, "  %s\n", c.usage)
		if len(c.names) > 1 && c.names[1] != "?" {
			fmt.Fprintf(&b, "      (also %s)\n", strings.Join(c.names[1:], ", "))
		}
		for _, l := range strings.Split(c.help, "\n") {
			fmt.Fprintf(&b, "      %s\n", l)
		}
	}
	b.WriteString("Addresses, the same for every command: a port (this machine's edge on it, as ReadyTo prints\n" +
		"it), mcpv2://host:port/mcpv2[?sessionId=…], http://host:port, a multiaddr ending in /p2p/<PeerID>,\n" +
		"mcpv2://<PeerID> or a PeerID (the peers started here, or found with --bootstrap).\n" +
		"Started peers inherit the MCPV2_* environment (MCPV2_LLM, MCPV2_LISTEN, MCPV2_NO_MDNS, …).\n")
	fmt.Fprintf(&b, "On a terminal: Up and Down recall earlier lines (Ctrl-R searches them), kept in\n"+
		"  %s\n"+
		"(mode 0600), but for the lines the shell refused and the lines with a credential (an option\n"+
		"such as --secret or --key, an mcpv2_ API key, a Bearer token, an address with a sessionId):\n"+
		"Up recalls those only until the shell ends. Tab completes a command, or the\n"+
		"port or peer ID of a peer started here. Ctrl-L clears the screen. Ctrl-C drops the line, and on\n"+
		"an empty line leaves; so does Ctrl-D.\n",
		shellHistoryPath(sh.cfg.DataDir))
	_, err := io.WriteString(sh.out, b.String())
	return err
}

func noArgs(cmd string, a shellArgs) error {
	if len(a.pos) > 0 {
		return fmt.Errorf("%s takes no arguments, got %s", cmd, quoteWords(a.pos))
	}
	return nil
}

func quoteWords(ws []string) string {
	q := make([]string, len(ws))
	for i, w := range ws {
		q[i] = quoteWord(w)
	}
	return strings.Join(q, " ")
}

// Close stops what is still running (the peers, when Run did not, each
// waited for) and releases the clients.
func (sh *shell) Close() error {
	sh.stopAll()
	sh.edge.Close()
	var errs []error
	if sh.mesh != nil { // closes the mesh clients too (Dialer.NewClient)
		errs = append(errs, sh.mesh.Close())
		sh.mesh = nil
	}
	return errors.Join(errs...)
}
