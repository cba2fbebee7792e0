package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestInitIsCheap: the packages whose tables are big (the guard's rules,
// the planner's expressions) build them on first use, not at init, which
// every mcpv2 command pays (docs/benchmarks.md, "Memory": 61 ms and 17 MB
// for the guard alone when they were package-level). GODEBUG=inittrace=1
// prints each package init's allocations.
func TestInitIsCheap(t *testing.T) {
	_, errs, code := runEnv(t, []string{"GODEBUG=inittrace=1"}, "--version")
	if code != 0 {
		t.Fatalf("mcpv2 --version: exit %d\n%s", code, errs)
	}
	line := regexp.MustCompile(`^init (\S+) @.*, (\d+) bytes, \d+ allocs$`)
	var total int
	seen := map[string]int{}
	for _, l := range strings.Split(errs, "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		total += n
		seen[m[1]] = n
	}
	if len(seen) < 100 {
		t.Fatalf("only %d init lines in GODEBUG=inittrace=1's output:\n%s", len(seen), errs)
	}
	for _, pkg := range []string{"github.com/mcpv2/mcpv2/node/guard", "github.com/mcpv2/mcpv2/node/orchestrate"} {
		if n := seen[pkg]; n > 64<<10 {
			t.Errorf("init of %s allocates %d bytes: build its tables on first use (internal/lazyre, sync.OnceValue)", pkg, n)
		}
	}
	if total > 4<<20 {
		t.Errorf("package inits allocate %d bytes in all (was 1.8 MB after issue 25): what new package builds at init?", total)
	}
}
