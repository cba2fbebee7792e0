package mcptest

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// TestMCPTasksExtTasks runs an MCP client that already speaks the tasks
// extension, @modelcontextprotocol/ext-tasks 0.2.2 over the MCP
// TypeScript SDK's Client 2.3.1 (both from the lock file; testdata/npm/
// mcp-tasks.mjs), against a node with a slow skill (nap, 1.5 s), with an
// API key as a user has it, in both forms ext-tasks speaks: the 2025-11-25
// experimental tasks (its Client's default handshake) and the 2026-07-28
// extension io.modelcontextprotocol/tasks (the Client pinned to that
// revision, with the rawDispatch and v2RequestFraming adapter options
// ext-tasks requires for it). In each, the client calls nap as a task
// (and, in 2025-11-25, finds it in tasks/list), hands it off and drops its
// connection while it runs; another key's caller does not find the task;
// then a new client resumes it by its reference and gets nap's result,
// which the node ran as an A2A task of the same store.
func TestMCPTasksExtTasks(t *testing.T) {
	needNPM(t, "mcp-inspector") // the lock file installs ext-tasks and the client with it
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		testenv.SkipEnv(t, "node is not installed: %v", err)
	}
	a := startNode(t, "--port", "0", "--skills", napSkills(t))
	key := a.addKey(t, "tasker", "--grant", "nap")
	other := a.addKey(t, "stranger", "--grant", "nap")

	for _, era := range []struct{ name, env, caps string }{
		{"2025-11-25", "legacy", `ok: capabilities {"inventory":"server-list","execution":true,"cancellation":true`},
		{"2026-07-28", "modern", `ok: capabilities {"inventory":"known-handles","execution":true,"cancellation":true`},
	} {
		t.Run(era.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, nodeBin, "mcp-tasks.mjs")
			cmd.Dir = npmDir
			cmd.Env = append(testenv.CleanEnv(), "MCP_URL="+a.mcpURL(), "MCP_TOKEN="+key, "MCP_OTHER_TOKEN="+other, "MCP_TOOL=nap", "MCP_ERA="+era.env)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("mcp-tasks.mjs: %v\n%s\n%s", err, out.String(), errb.String())
			}
			t.Logf("%s", out.String())
			want := []string{era.caps, "ok: task started ", "ok: dropped the connection", `ok: another caller: invalid params: task not found`,
				"ok: statuses working,", `ok: result {"slept":true}`}
			if era.env == "legacy" {
				want = append(want, "ok: tasks/list has it")
			} else {
				// The listen was opened on the task (running or ended): the
				// acknowledgement, then at least its status as it is then.
				want = append(want, "ok: listening ")
				if regexp.MustCompile(`ok: status notifications 0 `).MatchString(out.String()) {
					t.Errorf("no notifications/tasks on the listen stream:\n%s", out.String())
				}
			}
			for _, w := range want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("no %q in:\n%s\n%s", w, out.String(), errb.String())
				}
			}
		})
	}
}
