package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// TestOrchestrateExample runs examples/orchestrate/run.sh as a user would,
// with this test's mcpv2 binary: a bootstrap node and four agent processes
// on loopback, `mcpv2 orchestrate` answering "what is 7 times 6, what is
// the weather in Tokyo, and how many engineers are in Platform" from three
// different agents at once, then an agent killed in the middle of its
// subtask and the subtask finished by the other agent that offers the
// skill. The script checks each of these and exits non-zero on a miss.
func TestOrchestrateExample(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	script, err := filepath.Abs(filepath.Join("..", "..", "examples", "orchestrate", "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Env = append(testenv.CleanEnv(), "MCPV2_BIN="+binPath, "GORACE=atexit_sleep_ms=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	t.Logf("run.sh took %v", time.Since(start).Round(time.Millisecond))
	if err != nil || !strings.Contains(out.String(), "all checks passed") || strings.Contains(out.String(), "FAIL") {
		t.Fatalf("examples/orchestrate/run.sh: %v\n%s", err, out.String())
	}
	for _, want := range []string{"the subtasks ran on 3 different agents", "took 2 attempts", "finished on the surviving agent"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("run.sh output lacks %q", want)
		}
	}
}
