// Command mcpv2 runs an mcpv2 peer and talks to others (SPEC §7).
package main

import (
	"context"
	"log"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	libp2pquic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/urfave/cli/v2"
)

// quicHolePunchTimeout is what main sets libp2pquic.HolePunchTimeout to.
const quicHolePunchTimeout = 2 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// A QUIC hole punch in which this node waits for the peer's dial
	// (DCUtR's first two attempts) gives up after this long, not libp2p's
	// 5 s. While it waits, every new relayed connection from that PeerID
	// is refused a punch ("another hole punching attempt to this peer is
	// active"); a CLI process that exits mid-punch (`mcpv2 find`, then
	// `mcpv2 call` with the same identity) left the next process relayed
	// for its whole --wait-direct (docs/natlab.md, item 13). A punch that
	// works takes 0.2–0.6 s here; two seconds still leaves room for
	// several QUIC retransmissions on a slow path, and DCUtR tries three
	// times.
	libp2pquic.HolePunchTimeout = quicHolePunchTimeout
	app := withUsageErrors(withConfig(withEnvCheck(newApp())))
	// The std log package is process-wide: its lines (library noise) go
	// through the command's structured logger at Debug.
	bridge := &stdLogBridge{fallback: os.Stderr}
	log.SetFlags(0)
	log.SetOutput(bridge)
	if app.Metadata == nil {
		app.Metadata = map[string]any{}
	}
	app.Metadata[stdLogKey] = bridge
	err := checkArgs(app, os.Args)
	if err == nil {
		err = app.RunContext(ctx, interspersed(app, os.Args))
	}
	stop()
	if err != nil {
		// An error may quote a peer or a caller (a skill's message, a
		// card's field): it reaches the terminal escaped (printError).
		printError(os.Stderr, err, verbose)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return withTimeoutDefaults(&cli.App{
		Name:    "mcpv2",
		Usage:   "a peer-to-peer network for AI agents: run a peer, find and call others",
		Version: versionString(debug.ReadBuildInfo()),
		Commands: []*cli.Command{
			nodeCommand(),
			callCommand(),
			pingCommand(),
			toolsCommand(),
			cardCommand(),
			idCommand(),
			statusCommand(),
			uiCommand(),
			findCommand(),
			sendCommand(),
			shellCommand(),
			auditCommand(),
			keyCommand(),
			agentsCommand(),
			orchestrateCommand(),
			mcpCommand(),
			configCommand(),
		},
		Writer:    os.Stdout,
		ErrWriter: os.Stderr,
	})
}
