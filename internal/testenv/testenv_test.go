package testenv

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// recTB is a testing.TB that records whether SkipEnv failed or skipped.
type recTB struct {
	testing.TB
	failed, skipped string
}

func (r *recTB) Helper() {}
func (r *recTB) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recTB) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}

// run calls SkipEnv on a recTB in its own goroutine (it ends it as
// t.Fatalf and t.Skip end a test).
func run(t *testing.T) *recTB {
	r := &recTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		SkipEnv(r, "curl is not installed: %v", "exec: not found")
	}()
	<-done
	return r
}

// TestSkipEnvOneRule checks the one rule of a test that cannot run here:
// it fails under CI=true and under MCPV2_REQUIRE_ALL (not "0"), and skips
// otherwise; an explicit MCPV2_REQUIRE_ALL=0 lets it skip even under CI.
func TestSkipEnvOneRule(t *testing.T) {
	for _, c := range []struct {
		ci, requireAll string
		fail           bool
	}{
		{"", "", false},
		{"true", "", true},
		{"", "1", true},
		{"true", "1", true},
		{"false", "", false},
		{"", "0", false},
		{"true", "0", false},
	} {
		t.Run(fmt.Sprintf("CI=%s,%s=%s", c.ci, RequireAllEnv, c.requireAll), func(t *testing.T) {
			t.Setenv("CI", c.ci)
			t.Setenv(RequireAllEnv, c.requireAll)
			r := run(t)
			if c.fail && r.failed == "" {
				t.Errorf("skipped (%q), want a failure", r.skipped)
			}
			if !c.fail && r.skipped == "" {
				t.Errorf("failed (%q), want a skip", r.failed)
			}
			if msg := r.failed + r.skipped; msg == "" || !strings.Contains(msg, "curl is not installed: exec: not found") {
				t.Errorf("the message %q does not say what is missing", msg)
			}
		})
	}
}
