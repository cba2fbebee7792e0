package testenv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A2AAgent is a running cmd/mcpv2/mcptest/testdata/npm/a2a-agent.mjs: an
// external A2A agent built only from @a2a-js/sdk 1.3.0's server side (see
// the script's top for its flags and skills).
type A2AAgent struct {
	// URL is the agent's base URL (http://127.0.0.1:PORT).
	URL string
	cmd *exec.Cmd
	log *Buffer
	// Exited is closed when the process has exited.
	Exited <-chan struct{}
	stop   sync.Once
}

// npmDirOnce finds and prepares the npm directory once per test binary.
var npmDirOnce struct {
	sync.Once
	dir string
	err error
}

// A2ANPMDir is cmd/mcpv2/mcptest/testdata/npm of the module the test runs
// in, with its node_modules installed (npm ci from the lock file, once,
// when missing).
func A2ANPMDir() (string, error) {
	npmDirOnce.Do(func() {
		wd, err := os.Getwd()
		if err != nil {
			npmDirOnce.err = err
			return
		}
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				npmDirOnce.dir = filepath.Join(d, "cmd", "mcpv2", "mcptest", "testdata", "npm")
				break
			}
			if filepath.Dir(d) == d {
				npmDirOnce.err = fmt.Errorf("no go.mod above %s", wd)
				return
			}
		}
		if _, err := os.Stat(filepath.Join(npmDirOnce.dir, "node_modules", "@a2a-js", "sdk", "package.json")); err == nil {
			return
		}
		if _, err := exec.LookPath("npm"); err != nil {
			npmDirOnce.err = fmt.Errorf("npm is not installed (the A2A agent's packages are missing): %w", err)
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = npmDirOnce.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			npmDirOnce.err = fmt.Errorf("npm ci in %s: %v\n%s", npmDirOnce.dir, err, out)
		}
	})
	return npmDirOnce.dir, npmDirOnce.err
}

// StartA2AAgent runs a2a-agent.mjs with args (--version 1.0|0.3,
// --no-streaming, --sign, --name NAME) under node and waits up to 30 s for
// its URL. It is stopped when the test ends (its log logged if t failed).
// Without node (or npm to install the packages) t is skipped, or fails
// under CI=true or MCPV2_REQUIRE_ALL.
func StartA2AAgent(t testing.TB, args ...string) *A2AAgent {
	t.Helper()
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		SkipEnv(t, "node is not installed: %v", err)
	}
	dir, err := A2ANPMDir()
	if err != nil {
		SkipEnv(t, "%v", err)
	}
	cmd := exec.Command(nodeBin, append([]string{"a2a-agent.mjs"}, args...)...)
	cmd.Dir = dir
	cmd.Env = CleanEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe() // the agent exits when it closes
	if err != nil {
		t.Fatal(err)
	}
	a := &A2AAgent{cmd: cmd, log: &Buffer{}}
	cmd.Stderr = a.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	a.Exited = exited
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		first := true
		for sc.Scan() {
			if first {
				urlc <- strings.TrimSpace(sc.Text())
				first = false
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		stdin.Close()
		a.Stop()
		if t.Failed() {
			t.Logf("a2a-agent.mjs %v log:\n%s", args, a.log.String())
		}
	})
	select {
	case a.URL = <-urlc:
	case <-exited:
		t.Fatalf("a2a-agent.mjs %v exited before printing its URL:\n%s", args, a.log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("a2a-agent.mjs %v: no URL in 30 s:\n%s", args, a.log.String())
	}
	if !strings.HasPrefix(a.URL, "http://127.0.0.1:") {
		t.Fatalf("a2a-agent.mjs %v printed %q, not its URL", args, a.URL)
	}
	return a
}

// Stop kills the agent and waits for it (a test that kills an agent to
// see it unhealthy calls it). It is idempotent.
func (a *A2AAgent) Stop() {
	a.stop.Do(func() {
		_ = a.cmd.Process.Kill()
		<-a.Exited
	})
}
