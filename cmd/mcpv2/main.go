// Command mcpv2 runs an mcpv2 peer and talks to others (SPEC §7).
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	app := withEnvCheck(newApp())
	// The std log package is process-wide: its lines (library noise) go
	// through the command's structured logger at Debug.
	bridge := &stdLogBridge{fallback: os.Stderr}
	log.SetFlags(0)
	log.SetOutput(bridge)
	if app.Metadata == nil {
		app.Metadata = map[string]any{}
	}
	app.Metadata[stdLogKey] = bridge
	err := app.RunContext(ctx, interspersed(app, os.Args))
	stop()
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			fmt.Fprintf(os.Stderr, "mcpv2: error %d: %s\n", pe.Code, pe.Message)
		} else {
			fmt.Fprintf(os.Stderr, "mcpv2: %v\n", err)
		}
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return &cli.App{
		Name:    "mcpv2",
		Usage:   "a peer-to-peer network for AI agents: run a peer, find and call others",
		Version: node.Version,
		Commands: []*cli.Command{
			nodeCommand(),
			callCommand(),
			pingCommand(),
			toolsCommand(),
			cardCommand(),
			idCommand(),
			findCommand(),
			sendCommand(),
			shellCommand(),
		},
		Writer:    os.Stdout,
		ErrWriter: os.Stderr,
	}
}
