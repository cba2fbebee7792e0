package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/node"
)

func TestVersionString(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/mcpv2/mcpv2", Version: "v0.0.0-20261204120000-0123456789ab+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.time", Value: "2026-12-04T12:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	want := node.Version + " (module v0.0.0-20261204120000-0123456789ab+dirty, commit 0123456789abcdef 2026-12-04T12:00:00Z modified, go1.26.8)"
	if got := versionString(info, true); got != want {
		t.Errorf("versionString = %q, want %q", got, want)
	}
	if got := versionString(nil, false); got != node.Version {
		t.Errorf("versionString without build info = %q, want %q", got, node.Version)
	}
}

// TestVersionFromCheckout builds mcpv2 from this checkout as a user does
// (go build in the work tree, which stamps VCS information) and checks that
// --version names the commit HEAD points at. -buildvcs=true because a go env
// file may turn stamping off (this machine's sets GOFLAGS=-buildvcs=false).
func TestVersionFromCheckout(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		testenv.SkipEnv(t, "not a git checkout: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "mcpv2")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("mcpv2 --version: %v", err)
	}
	line := strings.TrimSpace(string(out))
	re := regexp.MustCompile(`^mcpv2 version ` + regexp.QuoteMeta(node.Version) + ` \(module [^,]+, commit ` + strings.TrimSpace(string(head)) + ` `)
	if !re.MatchString(line) {
		t.Errorf("mcpv2 --version = %q, want it to match %s", line, re)
	}
}
