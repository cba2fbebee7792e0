package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/edge/mcp"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
)

// stdioCaller is who an MCP client on mcpv2 mcp's stdio is: the user who
// started the process, which holds the node's key and data dir, so a
// secret holder (every skill), audited as "local:stdio" via "mcp".
var stdioCaller = protocol.Caller{ID: "local:stdio", Via: "mcp", Remote: "stdio", Kind: protocol.CallerSecretHolder}

func mcpCommand() *cli.Command {
	flags := nodeFlags()
	for _, f := range flags {
		// Beside a `mcpv2 node` on the same machine, the default port
		// 4001 would be taken: an MCP server started by a desktop app
		// takes any free port.
		if p, ok := f.(*cli.IntFlag); ok && p.Name == "p2p-port" {
			p.Value = 0
		}
		// An MCP host keeps the server's stderr, where the banner goes,
		// in its logs: no dashboard, and no login link there, unless asked.
		if u, ok := f.(*cli.StringFlag); ok && u.Name == "ui" {
			u.Value = "off"
		}
	}
	return &cli.Command{
		Name:  "mcp",
		Usage: "an MCP server on stdio whose tools are this node's and the mesh's skills (runs a node, or fronts one with --connect)",
		Description: "Speaks only MCP on stdout; logs and the banner go to stderr. Without --connect it runs a full node " +
			"(the flags of mcpv2 node; the P2P port defaults to any free one), whose data dir must not be in use by another node. " +
			"With --connect ADDR it fronts a running node through its HTTP edge (mcpv2://host:port/mcpv2 or https://…), " +
			"with --key as that API key's caller, as a secret holder with --secret, else as an anonymous session.",
		Flags: append(flags,
			&cli.StringFlag{Name: "connect", EnvVars: []string{"MCPV2_CONNECT"},
				Usage: "front the running node at this HTTP edge address instead of running one"},
			keyFlag,
			timeoutFlag,
		),
		Action: runMCP,
	}
}

func runMCP(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("mcp: unexpected argument %q: mcpv2 mcp takes only flags (mcpv2 mcp --help)", c.Args().First())
	}
	// An MCP host that ends the session closes our pipes and may stop
	// reading stderr at once: a log line written then would kill the
	// process with SIGPIPE before the node has closed its connections, and
	// its peers would hold them, and count them against this PeerID's
	// connection limit, until they time out. Ignored, the write fails and
	// the shutdown goes on.
	signal.Ignore(syscall.SIGPIPE)
	in, out := io.NopCloser(c.App.Reader), nopWriteCloser{c.App.Writer}
	if addr := c.String("connect"); addr != "" {
		return runMCPConnect(c, addr, in, out)
	}
	// A key in the config file is for the client commands and --connect,
	// which share the file: only one given for this run is refused.
	if c.IsSet("key") && !fromConfigFile(c, "key") {
		return errors.New("--key is the credential of --connect ADDR (a running node's edge); without --connect mcpv2 mcp runs a node of its own, whose stdio client is its owner")
	}
	r, err := launchNode(c, c.App.ErrWriter, true)
	if err != nil {
		if errors.Is(err, store.ErrInUse) {
			return fmt.Errorf("%w: a node runs on this data dir already; front it with mcpv2 mcp --connect ADDR (its edge address), or give --data-dir", err)
		}
		return err
	}
	r.log.Info("serving MCP on stdio")
	serr := r.face.ServeStdio(c.Context, stdioCaller, in, out)
	r.log.Info("MCP session ended; shutting down", "err", serr)
	cerr := r.Close()
	if serr != nil && c.Context.Err() == nil {
		return errors.Join(fmt.Errorf("mcp: stdio: %w", serr), cerr)
	}
	return cerr
}

// nodeOnlyFlags run a node, which mcpv2 mcp --connect does not.
var nodeOnlyFlags = []string{"port", "p2p-port", "listen", "bootstrap", "relay-service", "name", "description", "llm-mode", "policy", "skills"}

// runMCPConnect serves MCP on stdio for the node at the HTTP edge addr.
func runMCPConnect(c *cli.Context, addr string, in io.ReadCloser, out io.WriteCloser) error {
	// As for key (runMCP): the config file that the node commands share
	// may hold node settings; only one given for this run is refused.
	for _, f := range nodeOnlyFlags {
		if c.IsSet(f) && !fromConfigFile(c, f) {
			return fmt.Errorf("--%s configures a node, but --connect fronts a running one: drop one of them", f)
		}
	}
	log, err := logger(c)
	if err != nil {
		return err
	}
	a, err := protocol.ParseAddress(addr)
	if err != nil || a.Kind != protocol.AddrHTTP {
		return fmt.Errorf("--connect %q: want the HTTP edge address of a running node (mcpv2://host:port/mcpv2, or https://host:port/mcpv2), as its MCPV2_PEER_ADDRESS line says", addr)
	}
	// The one client of client commands (node.Dialer), without a mesh
	// side: --connect names an edge, and --key/--secret are read as the
	// other commands read them.
	sess, err := openSessionFor(c, false)
	if err != nil {
		return err
	}
	defer sess.Close()
	cl := sess.edge
	b := &edgeBackend{cl: cl, addr: a, log: log, timeout: c.Duration("timeout")}
	// Fail now, not at the client's first call, when the node is not there.
	ctx, cancel := context.WithTimeout(c.Context, b.wait())
	_, err = cl.Health(ctx, a)
	cancel()
	if err != nil {
		return fmt.Errorf("--connect %s: %w", addr, err)
	}
	prompts, must := promptsFile(c, "")
	if !c.IsSet("prompts") {
		dir, err := dataDir(c)
		if err != nil {
			return err
		}
		prompts, must = promptsFile(c, dir)
	}
	f, err := mcp.New(b, mcp.WithLogger(log), mcp.WithVersion(node.Version), mcp.WithPromptsFile(prompts, must))
	if err != nil {
		return err
	}
	log.Info("serving MCP on stdio", "node", a.String())
	serr := f.ServeStdio(c.Context, stdioCaller, in, out)
	cerr := f.Close()
	if serr != nil && c.Context.Err() == nil {
		return errors.Join(fmt.Errorf("mcp: stdio: %w", serr), cerr)
	}
	return cerr
}

// edgeBackend is the MCP face's Backend for a node reached through its HTTP
// edge: the node runs and audits every call; the face's own requests
// (initialize, prompts) are logged here at Debug, since that node's audit
// log is not ours to write.
type edgeBackend struct {
	cl      *edge.Client
	addr    protocol.Address
	log     *slog.Logger
	timeout time.Duration // 0: none beyond the caller's
}

func (b *edgeBackend) wait() time.Duration {
	if b.timeout > 0 {
		return b.timeout
	}
	return 30 * time.Second
}

func (b *edgeBackend) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if b.timeout > 0 {
		return context.WithTimeout(ctx, b.timeout)
	}
	return context.WithCancel(ctx)
}

// Handle sends msg to the node's POST /mcpv2. A failure to reach it
// answers every slot with the error, as a refusal of the message.
func (b *edgeBackend) Handle(ctx context.Context, _ protocol.Caller, msg []byte) ([]byte, *protocol.Error) {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	out, err := b.cl.Call(ctx, b.addr, msg)
	if err != nil {
		perr := protocol.AsError(err)
		if perr.Code == protocol.CodeInternal {
			perr = protocol.Errorf(protocol.CodeToolExecution, "the node at %s could not be reached: %v", b.addr, err)
		}
		o, _ := protocol.EncodeResponses(false, []protocol.Response{protocol.ErrorResponse(nil, perr)})
		return o, perr
	}
	if out != nil {
		if resps, err := protocol.ParseResponses(out); err == nil && len(resps) == 1 && resps[0].Error != nil && len(resps[0].ID) == 0 {
			return out, resps[0].Error // the node refused the whole message
		}
	}
	return out, nil
}

func (b *edgeBackend) Forward(ctx context.Context, _ protocol.Caller, peerID string, msg []byte) ([]byte, error) {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return b.cl.Forward(ctx, b.addr, peerID, msg)
}

func (b *edgeBackend) Find(ctx context.Context, skillOrTag string, limit int) ([]protocol.FindResult, error) {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return b.cl.Find(ctx, b.addr, skillOrTag, limit)
}

func (b *edgeBackend) Audit(_ context.Context, c protocol.Caller, method string, perr *protocol.Error, start time.Time) {
	b.log.Debug("mcp request", "method", method, "caller", c.ID, "err", perr, "ms", time.Since(start).Milliseconds())
}

// nopWriteCloser is stdout for the MCP transport: closing the session does
// not close the process's stdout.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
