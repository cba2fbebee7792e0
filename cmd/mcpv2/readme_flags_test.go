package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestREADMEFlagsTable: every flag and environment variable the README's
// table of `mcpv2 node` flags names is a flag (or alias) of the binary and
// one of that flag's environment twins, so that a documented setting
// cannot be missing from the binary (--task-ttl was, for a while).
func TestREADMEFlagsTable(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(src), "## Flags of `mcpv2 node`")
	table, _, _ = strings.Cut(table, "\n## ")
	if !ok {
		t.Fatal("README.md has no section \"Flags of `mcpv2 node`\"")
	}
	flags := map[string]cli.Flag{}
	for _, f := range nodeCommand().Flags {
		for _, n := range f.Names() {
			flags[n] = f
		}
	}
	envOf := func(f cli.Flag) []string {
		if e, ok := f.(interface{ GetEnvVars() []string }); ok {
			return e.GetEnvVars()
		}
		return nil
	}
	flagRe, envRe := regexp.MustCompile("`--([a-z0-9-]+)`"), regexp.MustCompile("`(MCPV2_[A-Z0-9_]+)`")
	rows := 0
	for _, line := range strings.Split(table, "\n") {
		cols := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| `--") || len(cols) < 2 {
			continue
		}
		rows++
		var named []cli.Flag
		for _, m := range flagRe.FindAllStringSubmatch(cols[0], -1) {
			f, ok := flags[m[1]]
			if !ok {
				t.Errorf("README.md documents --%s, which is not a flag of mcpv2 node", m[1])
				continue
			}
			named = append(named, f)
		}
		for _, m := range envRe.FindAllStringSubmatch(cols[1], -1) {
			if !slices.ContainsFunc(named, func(f cli.Flag) bool { return slices.Contains(envOf(f), m[1]) }) {
				t.Errorf("README.md documents %s beside %s, but it is not the environment twin of either", m[1], cols[0])
			}
		}
	}
	if rows < 20 {
		t.Fatalf("found %d rows in README.md's flag table; the parser lost it", rows)
	}
}
