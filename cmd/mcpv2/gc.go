package main

import (
	"os"
	"runtime/debug"
)

// A node's garbage collector gets room: a call leaves a few KiB of
// short-lived garbage while the live heap stays small (about 5 MiB), so
// with Go's default GOGC=100 the collector ran every few hundred calls and
// took a fifth of a busy node's CPU (docs/benchmarks.md, row 4: 40 µs of
// CPU per 1 KiB call with GOGC=100, 33 µs with 400). The soft memory limit
// keeps a node with a large live heap from growing five-fold: past it the
// collector works harder instead.
const (
	nodeGCPercent   = 400
	nodeMemoryLimit = 1 << 30
)

// tuneGC applies nodeGCPercent and nodeMemoryLimit to this process, each
// unless the user set its environment variable (GOGC, GOMEMLIMIT), which
// the runtime has already applied. It is for `mcpv2 node`, a long-running
// process; one-shot commands keep Go's defaults.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(nodeGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(nodeMemoryLimit)
	}
}
