package edge

import (
	"fmt"
	"os"
	"testing"
)

// requireAllEnv names the variable that CI (.ci/run) sets so that a test
// which cannot run here fails instead of skipping.
const requireAllEnv = "MCPV2_REQUIRE_ALL"

// skipEnv skips t for a reason of the environment (not root, a tool or the
// kernel missing, another OS), with msg formatted as by fmt.Sprintf. When
// MCPV2_REQUIRE_ALL is set (and not "0"), as .ci/run sets it, it fails t
// with the same message instead, so that CI cannot go green by skipping.
func skipEnv(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if v := os.Getenv(requireAllEnv); v != "" && v != "0" {
		t.Fatalf("%s (%s=%s: this test must run, not skip)", msg, requireAllEnv, v)
	}
	t.Skip(msg)
}
