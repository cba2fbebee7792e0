package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestTuneGC: a node sets its GC percent and memory limit, except where
// the user set GOGC or GOMEMLIMIT, which win.
func TestTuneGC(t *testing.T) {
	pct, lim := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(pct); debug.SetMemoryLimit(lim) })

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	tuneGC()
	if got := debug.SetGCPercent(100); got != nodeGCPercent {
		t.Errorf("GC percent %d, want %d", got, nodeGCPercent)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != nodeMemoryLimit {
		t.Errorf("memory limit %d, want %d", got, nodeMemoryLimit)
	}

	t.Setenv("GOGC", "50")
	t.Setenv("GOMEMLIMIT", "100MiB")
	tuneGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, GC percent %d, want it left alone (100)", got)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set, memory limit %d, want it left alone", got)
	}
}
