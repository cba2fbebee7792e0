package main

import (
	"strings"
	"testing"
)

// TestUIFlag: --ui refuses what is not a loopback address (unless
// --ui-public), a login link exported back from a banner, and another
// scheme, each naming the fix, before the node starts.
func TestUIFlag(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--ui", "0.0.0.0:0"}, "needs the public option (--ui-public)"},
		{nil, []string{"--ui", "127.0.0.1"}, "want host:port"},
		{[]string{"MCPV2_UI=http://127.0.0.1:40123/login?token=abc"}, nil, "is a login link"},
		{nil, []string{"--ui", "https://127.0.0.1:8384/"}, "serves plain HTTP"},
		{nil, []string{"--ui", "off", "--ui-public"}, "--ui-public needs --ui ADDR"},
	} {
		args := append([]string{"node", "--data-dir", t.TempDir(), "--p2p-port", "0", "--no-mesh"}, tc.args...)
		_, errs, code := runEnv(t, tc.env, args...)
		if code == 0 || !strings.Contains(errs, tc.want) || strings.Contains(errs, "token=abc") {
			t.Errorf("%v %v: exit %d, stderr %q: want an error with %q (and no token)", tc.env, tc.args, code, errs, tc.want)
		}
	}
}
