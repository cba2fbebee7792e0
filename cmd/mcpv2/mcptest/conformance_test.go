package mcptest

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// conformancePasses are the server scenarios of the suite that an mcpv2
// node passes: every one that needs no fixture of the suite's own server.
var conformancePasses = []string{"server-initialize", "logging-set-level", "ping", "tools-list", "tools-call-simple-text",
	"tools-call-error", "server-sse-multiple-streams", "resources-list", "prompts-list", "dns-rebinding-protection"}

// TestConformance runs the server scenarios of the MCP conformance suite
// (@modelcontextprotocol/conformance, pinned) against a node's /mcp whose
// policy grants "http" every skill: once as a user points it, with only the
// URL, and once with a secret holder's session in the URL. Both must pass
// the same scenarios (conformancePasses), dns-rebinding-protection among
// them; the others are listed, each with its reason, in
// testdata/conformance-expected-failures.yaml, and the suite itself fails
// the run if one of them starts to pass.
func TestConformance(t *testing.T) {
	needNPM(t, "conformance")
	a := startNodeWithPolicy(t, grantHTTPAll, "--port", "0", "--secret", secret)
	for _, c := range []struct{ name, url string }{
		{"url-only", a.mcpURL()},
		{"secret-holder", a.mcpURL() + "?sessionId=" + secretSession(secret)},
	} {
		t.Run(c.name, func(t *testing.T) { conformance(t, c.url) })
	}
}

// conformance runs the suite's server scenarios against url and checks that
// it passed conformancePasses.
func conformance(t *testing.T, url string) {
	t.Helper()
	bin := needNPM(t, "conformance")
	expected, err := filepath.Abs(filepath.Join("testdata", "conformance-expected-failures.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "server", "--url", url, "--expected-failures", expected, "-o", t.TempDir())
	// conformance 0.1.16 imports fs.globSync, which Node 20 lacks; the
	// shim gives it a stub (only its tier-check command would call it).
	cmd.Env = append(testenv.CleanEnv(), "NODE_OPTIONS=--import "+filepath.Join(npmDir, "shim", "register.mjs"), "NO_COLOR=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	summary := out.String()
	if i := strings.Index(summary, "=== SUMMARY ==="); i >= 0 {
		summary = summary[i:]
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		t.Fatalf("conformance failed (exit %d):\n%s", ee.ExitCode(), summary)
	case err != nil:
		t.Fatalf("conformance: %v", err)
	}
	for _, s := range conformancePasses {
		if !strings.Contains(summary, "✓ "+s+":") {
			t.Errorf("scenario %s did not pass:\n%s", s, summary)
		}
	}
	t.Logf("%s", summary)
}
