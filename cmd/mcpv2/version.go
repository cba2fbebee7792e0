package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/mcpv2/mcpv2/node"
)

// versionString is what `mcpv2 --version` prints after "mcpv2 version ":
// the protocol implementation's version (node.Version), then what the Go
// toolchain stamped into the binary: the main module's version (a tag, or a
// pseudo-version made from the commit when built in a checkout; "(devel)"
// when the build had no VCS information), the commit and its time, and
// "modified" when the work tree had uncommitted changes. info is
// debug.ReadBuildInfo's answer (ok false: nothing stamped, as in tests).
func versionString(info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil {
		return node.Version
	}
	var parts []string
	if v := info.Main.Version; v != "" {
		parts = append(parts, "module "+v)
	}
	var rev, at string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev != "" {
		c := "commit " + rev
		if at != "" {
			c += " " + at
		}
		if modified {
			c += " modified"
		}
		parts = append(parts, c)
	}
	parts = append(parts, info.GoVersion)
	return fmt.Sprintf("%s (%s)", node.Version, strings.Join(parts, ", "))
}
