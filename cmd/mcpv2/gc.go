package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"
)

// A node's garbage collector trades CPU for memory: a warm call leaves a
// few KiB of short-lived garbage while the live heap stays small, so the
// GC percent sets how often the collector runs under load and how far the
// heap grows between runs. Measured on the real node (docs/benchmarks.md,
// "Memory"), 60 000 warm 1 KiB calls at 48 in flight, two runs each:
//
//	GOGC   node CPU per call   RSS after
//	100    23.8–25.5 µs        46.0 MiB
//	200    22.5–22.8 µs        49.4 MiB
//	400    21.7–22.3 µs        59.1–63.3 MiB
//
// --memory-profile picks one: small for laptops and fleets of small agents
// on one host, large for a busy relay or gateway with memory to spare,
// medium between them. The default picks by what the node serves: large
// when it serves others, an HTTP edge (--port: every request leaves about
// 10 KiB of net/http's garbage, and at 200 the edge answered 5–12% fewer
// requests than bare net/http, bench row 7) or a circuit relay
// (--relay-service); small otherwise, where a node's own calls are few and
// its memory is what a laptop or a host of many agents pays. The soft
// memory limit keeps a node with a large live heap from growing by the
// whole percent: past it the collector works harder instead.
var memoryProfiles = map[string]int{"small": 100, "medium": 200, "large": 400}

// defaultMemoryProfile is the --memory-profile value that picks by role.
const defaultMemoryProfile = "default"

// nodeMemoryLimit is the soft memory limit every profile sets.
const nodeMemoryLimit = 1 << 30

// memoryProfileNames lists memoryProfiles' names, smallest first, for help
// and errors.
func memoryProfileNames() string {
	names := make([]string, 0, len(memoryProfiles))
	for n := range memoryProfiles {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return memoryProfiles[a] - memoryProfiles[b] })
	return strings.Join(names, ", ")
}

// tuneGC applies the memory profile's GC percent and nodeMemoryLimit to
// this process, each unless the user set its environment variable (GOGC,
// GOMEMLIMIT), which the runtime has already applied, and returns the
// profile applied. defaultMemoryProfile is large when the node serves
// others (servesOthers: an HTTP edge or a circuit relay), small otherwise.
// It is for the long-running node; one-shot commands keep Go's defaults.
func tuneGC(profile string, servesOthers bool) (string, error) {
	if profile == defaultMemoryProfile {
		profile = "small"
		if servesOthers {
			profile = "large"
		}
	}
	pct, ok := memoryProfiles[profile]
	if !ok {
		return "", fmt.Errorf("--memory-profile %q: want %s or one of %s", profile, defaultMemoryProfile, memoryProfileNames())
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(pct)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(nodeMemoryLimit)
	}
	return profile, nil
}
