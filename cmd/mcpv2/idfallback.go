package main

import (
	"fmt"
	"os"
)

// fileExists says whether path names something that exists.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// idFallbackNote is what `mcpv2 id` says on stderr when no node runs in dir
// and it printed dir's identity with the default listen addresses on port:
// that these are no running node's, and the usual reason no node answered,
// a node started with another data dir (issue 26: a node started with
// --data-dir ~/a, then `mcpv2 id` alone printed ~/.mcpv2's PeerID on the
// 4001 defaults, and dialling it met another node). created says the
// identity was created just now, so that no node has its PeerID yet.
func idFallbackNote(dir string, created bool, port int) string {
	whose := "its PeerID"
	if created {
		whose = "a PeerID created just now (no node has used it yet)"
	}
	return fmt.Sprintf("mcpv2: no node runs in %s: these are %s and the default listen addresses on port %d, not a running node's\n"+
		"  if your node runs with another --data-dir (or MCPV2_DATA_DIR), pass the same one here: mcpv2 id --data-dir THAT_DIR asks it for its live addresses\n",
		printableLine(dir), whose, port)
}
