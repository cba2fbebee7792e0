package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	kb "github.com/libp2p/go-libp2p-kbucket"
	"github.com/libp2p/go-libp2p/core/routing"
	"github.com/libp2p/go-libp2p/core/sec"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/discovery"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
)

// verbose is --verbose (MCPV2_VERBOSE) of the client commands: a failure
// whose cause is libp2p's words prints them too, on a "cause:" line below
// the explanation.
var verbose bool

// verboseFlag is --verbose of the client commands.
var verboseFlag = &cli.BoolFlag{Name: "verbose", EnvVars: []string{"MCPV2_VERBOSE"}, Destination: &verbose,
	Usage: "when a call fails in libp2p's words (a dial, a DHT lookup), print them below the explanation"}

// printError writes what a command's failure is to w, the last thing the
// CLI prints: an error a node answered as "mcpv2: error CODE: MESSAGE",
// a libp2p failure explained (what happened, what to do) with libp2p's own
// text on an indented "cause:" line under --verbose, anything else as it
// is. Every text is escaped: an error may quote a peer or a caller.
func printError(w io.Writer, err error, verbose bool) {
	if msg := explained(err, verbose, "(--verbose prints the underlying error)"); msg != "" {
		fmt.Fprintf(w, "mcpv2: %s\n", msg)
		return
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		fmt.Fprintf(w, "mcpv2: error %d: %s\n", pe.Code, printableLine(pe.Message))
		return
	}
	fmt.Fprintf(w, "mcpv2: %s\n", printable(err.Error()))
}

// explained is explain(err) escaped for a terminal, followed by err's own
// text on an indented "cause:" line when withCause, else by hint (when not
// empty); "" when explain has nothing to say. The CLI and the shell print
// a failure so.
func explained(err error, withCause bool, hint string) string {
	msg := explain(err)
	if msg == "" {
		return ""
	}
	out := printable(msg)
	switch {
	case withCause:
		lines := strings.Split(err.Error(), "\n")
		for i := range lines {
			lines[i] = printableLine(strings.TrimSpace(lines[i]))
		}
		out += "\n  cause: " + strings.Join(lines, "\n    ")
	case hint != "":
		out += "\n  " + hint
	}
	return out
}

// explain is what happened and what to do for a failure that libp2p words
// for its own insides, or "" when err is not one: a DHT lookup on an
// empty routing table (kbucket.ErrLookupFailure, or discovery.ErrNoPeers:
// no mesh peers yet), and a dial that reached another node than the
// PeerID of the address (sec.ErrPeerIDMismatch: a stale address), and
// a call to the client's own PeerID (node.ErrSelfAddress: one data dir
// for the node and the client).
func explain(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return "" // a node's answer: it words its own errors
	}
	if expected, actual, addr, ok := peerMismatch(err); ok {
		at := ""
		if addr != "" {
			at = " " + addr
		}
		return fmt.Sprintf("the address%s belongs to another node: its PeerID is %s, not %s.\n"+
			"  The address is stale (the node you want moved to another port, or another node took this one):\n"+
			"  ask that node's live addresses with `mcpv2 id --data-dir ITS_DATA_DIR` where it runs, and dial one of them\n"+
			"  (or call %s if it is the node you meant)", at, actual, expected, actual)
	}
	if errors.Is(err, node.ErrSelfAddress) {
		return "that address is this client's own PeerID: the client runs with the identity of its --data-dir, the same\n" +
			"  as the node at that address. Give the client a data dir of its own (--data-dir ~/client, or MCPV2_DATA_DIR)"
	}
	if errors.Is(err, node.ErrNoRoute) && errors.Is(err, routing.ErrNotFound) {
		return "no peer of the mesh knows that PeerID: the DHT was asked and found no addresses for it.\n" +
			"  Is that node running, and bootstrapped into the same mesh (its --bootstrap reaches yours)? A node that\n" +
			"  just started takes a few seconds to be found; or call it by its full multiaddr (`mcpv2 id` where it runs)"
	}
	if errors.Is(err, kb.ErrLookupFailure) || errors.Is(err, discovery.ErrNoPeers) {
		return "no mesh peers yet: the DHT has nobody to ask (no --bootstrap peer was reached, or none of them serves the DHT).\n" +
			"  Pass --bootstrap ADDR (or set MCPV2_BOOTSTRAP) with the MCPV2_P2P_ADDRESS of a running node of the mesh\n" +
			"  (`mcpv2 id --data-dir ITS_DATA_DIR` prints it), or call the peer by its full multiaddr instead of its PeerID"
	}
	return ""
}

// peerMismatch finds a peer ID mismatch in err: the PeerID the address
// named, the one that answered, and the address dialled when the swarm
// recorded it.
func peerMismatch(err error) (expected, actual, addr string, ok bool) {
	var de *swarm.DialError
	if errors.As(err, &de) {
		for _, te := range de.DialErrors {
			if e, a, ok := mismatchIn(te.Cause); ok {
				return e, a, printableLine(te.Address.String()), true
			}
		}
	}
	e, a, ok := mismatchIn(err)
	return e, a, "", ok
}

// mismatchIn is the expected and actual PeerIDs of a mismatch in err.
// libp2p's security transports (noise for TCP, TLS inside QUIC) return
// sec.ErrPeerIDMismatch by value, and the swarm keeps it in the chain on
// both transports (TestErrorsPeerIDMismatchExplained dials each), so no
// text is matched; a pointer is accepted too, as the type allows both.
func mismatchIn(err error) (expected, actual string, ok bool) {
	var m sec.ErrPeerIDMismatch
	if errors.As(err, &m) {
		return m.Expected.String(), m.Actual.String(), true
	}
	var mp *sec.ErrPeerIDMismatch
	if errors.As(err, &mp) && mp != nil {
		return mp.Expected.String(), mp.Actual.String(), true
	}
	return "", "", false
}
