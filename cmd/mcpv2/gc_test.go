package main

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

// TestTuneGC: a node sets its profile's GC percent and the memory limit,
// except where the user set GOGC or GOMEMLIMIT, which win; the default
// profile is large for a node serving others and small otherwise; an
// unknown profile is refused with the names to use.
func TestTuneGC(t *testing.T) {
	pct, lim := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(pct); debug.SetMemoryLimit(lim) })

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	check := func(name string, serves bool, wantName string, want int) {
		t.Helper()
		got, err := tuneGC(name, serves)
		if err != nil {
			t.Fatal(err)
		}
		if got != wantName {
			t.Errorf("%s (serves others %v): profile %q, want %q", name, serves, got, wantName)
		}
		if pct := debug.SetGCPercent(1); pct != want {
			t.Errorf("%s (serves others %v): GC percent %d, want %d", name, serves, pct, want)
		}
		if lim := debug.SetMemoryLimit(math.MaxInt64); lim != nodeMemoryLimit {
			t.Errorf("%s: memory limit %d, want %d", name, lim, nodeMemoryLimit)
		}
	}
	for name, want := range memoryProfiles {
		check(name, true, name, want)
		check(name, false, name, want)
	}
	check(defaultMemoryProfile, false, "small", 100)
	check(defaultMemoryProfile, true, "large", 400)
	if _, err := tuneGC("tiny", false); err == nil || !strings.Contains(err.Error(), "default or one of small, medium, large") {
		t.Errorf("tuneGC(tiny) = %v, want the profiles named", err)
	}

	t.Setenv("GOGC", "50")
	t.Setenv("GOMEMLIMIT", "100MiB")
	debug.SetGCPercent(100)
	if _, err := tuneGC("large", true); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, GC percent %d, want it left alone (100)", got)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set, memory limit %d, want it left alone", got)
	}
}
