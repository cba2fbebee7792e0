package main

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

// TestTuneGC: a node sets its profile's GC percent and the memory limit,
// except where the user set GOGC or GOMEMLIMIT, which win; an unknown
// profile is refused with the names to use.
func TestTuneGC(t *testing.T) {
	pct, lim := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(pct); debug.SetMemoryLimit(lim) })

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	for name, want := range memoryProfiles {
		if err := tuneGC(name); err != nil {
			t.Fatal(err)
		}
		if got := debug.SetGCPercent(1); got != want {
			t.Errorf("%s: GC percent %d, want %d", name, got, want)
		}
		if got := debug.SetMemoryLimit(math.MaxInt64); got != nodeMemoryLimit {
			t.Errorf("%s: memory limit %d, want %d", name, got, nodeMemoryLimit)
		}
	}
	if err := tuneGC("tiny"); err == nil || !strings.Contains(err.Error(), "small, default, large") {
		t.Errorf("tuneGC(tiny) = %v, want the profiles named", err)
	}

	t.Setenv("GOGC", "50")
	t.Setenv("GOMEMLIMIT", "100MiB")
	debug.SetGCPercent(100)
	if err := tuneGC("large"); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, GC percent %d, want it left alone (100)", got)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set, memory limit %d, want it left alone", got)
	}
}
