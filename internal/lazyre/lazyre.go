// Package lazyre compiles a regular expression on first use.
//
// A package-level regexp.MustCompile runs at init, in every process that
// links the package, whether or not it ever matches: the guard's and the
// planner's expressions cost every mcpv2 command, down to `mcpv2 --version`,
// 60 ms and 19 MB of allocations that way (docs/benchmarks.md, "Memory").
package lazyre

import (
	"regexp"
	"sync"
)

// New returns a function that compiles expr on its first call, panicking
// as regexp.MustCompile does if expr is not valid, and returns the same
// *regexp.Regexp on every call. It is safe for concurrent use.
func New(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
