//go:build unix

package supervise

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Where the parts of TestChildOutlivesSupervisor find the log and the
// socket to report on.
const (
	logEnv    = "SUPERVISE_TEST_LOG"
	reportEnv = "SUPERVISE_TEST_REPORT"
)

// unixChild plays the parts that need process groups or signals beyond
// SIGTERM:
//
//	supervisor  runs the part orphan under New, its log the file at
//	            $SUPERVISE_TEST_LOG, prints the orphan's pid once its
//	            banner is in, and waits to be killed
//	orphan      prints a banner and a line on stderr; on SIGUSR1 writes a
//	            line to stderr, dials the unix socket $SUPERVISE_TEST_REPORT,
//	            says "alive" there and exits 0
//	waitdelay   prints a banner, starts the part sleeper on the same
//	            stdout, and exits 0
//	sleeper     sleeps until killed
func unixChild(part string) (int, bool) {
	switch part {
	case "supervisor":
		f, err := os.OpenFile(os.Getenv(logEnv), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1, true
		}
		exe, _ := os.Executable()
		env := append(os.Environ(), childEnv+"=orphan")
		p, err := New(exe, []string{"-test.run=^$"}, WithEnv(env), WithLogFile(f))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1, true
		}
		if _, err := p.Banner(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1, true
		}
		fmt.Printf("pid %d\n", p.Pid())
		select {}
	case "orphan":
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		fmt.Fprint(os.Stderr, "before the supervisor died\n")
		fmt.Fprint(os.Stdout, "MCPV2_PEER_ID=12D3KooWfake\nMCPV2_DATA_DIR=/tmp/fake\n")
		<-usr1
		// The node logs to stderr; with a pipe there, this write would
		// meet a closed pipe and SIGPIPE would end the process.
		fmt.Fprint(os.Stderr, "after the supervisor died\n")
		c, err := net.Dial("unix", os.Getenv(reportEnv))
		if err != nil {
			return 1, true
		}
		defer c.Close()
		if _, err := io.WriteString(c, "alive\n"); err != nil {
			return 1, true
		}
		return 0, true
	case "waitdelay":
		fmt.Fprint(os.Stdout, "MCPV2_DATA_DIR=/tmp/fake\n")
		exe, _ := os.Executable()
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=sleeper")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1, true
		}
		return 0, true
	case "sleeper":
		select {}
	}
	return 0, false
}

// TestChildOutlivesSupervisor kills the supervising process (as a closed
// terminal or a SIGKILL would end `mcpv2 shell`): its child runs on, and
// what it then writes on stderr still reaches the log.
func TestChildOutlivesSupervisor(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "orphan.log")
	sockDir, err := os.MkdirTemp("", "sv") // short: a socket path is at most ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(sockDir, "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	exe, env := childArgs(t, "supervisor", logEnv+"="+logPath, reportEnv+"="+ln.Addr().String())
	sup := exec.Command(exe, "-test.run=^$")
	sup.Env, sup.Stderr = env, os.Stderr
	out, err := sup.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	line, err := bufio.NewReader(out).ReadString('\n')
	if _, serr := fmt.Sscanf(line, "pid %d", &pid); err != nil || serr != nil {
		_ = sup.Process.Kill()
		_ = sup.Wait()
		t.Fatalf("the supervisor said %q (%v)", line, err)
	}
	reported := false
	t.Cleanup(func() {
		if !reported {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	// The supervisor dies, and with it the read end of its child's stdout.
	if err := sup.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = sup.Wait()

	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		t.Fatalf("the child died with its supervisor: %v", err)
	}
	if err := ln.SetDeadline(time.Now().Add(60 * time.Second)); err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		t.Fatalf("no word from the child after its supervisor died: %v", err)
	}
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	said, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(said) != "alive\n" {
		t.Fatalf("the child said %q (%v)", said, err)
	}
	reported = true
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"before the supervisor died\n", "MCPV2_DATA_DIR=/tmp/fake\n", "after the supervisor died\n"} {
		if !strings.Contains(string(log), l) {
			t.Errorf("the log lacks %q:\n%s", l, log)
		}
	}
}

// TestCleanExitHeldStdout: the child exits 0 while a process it started
// holds its stdout open past the WaitDelay; that is a clean exit, not
// exec.ErrWaitDelay.
func TestCleanExitHeldStdout(t *testing.T) {
	p := start(t, "waitdelay", withWaitDelay(100*time.Millisecond))
	pgid := p.Pid()
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) }) // the sleeper
	if _, err := p.Banner(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-ctxFor(t).Done():
		t.Fatal("Wait did not return past the WaitDelay")
	}
	if err := p.Err(); err != nil {
		t.Fatalf("Err %v, want nil for an exit 0", err)
	}
	// The sleeper still runs, in the child's process group: the pipe was
	// held, and the WaitDelay did expire.
	if err := syscall.Kill(-pgid, 0); err != nil {
		t.Fatalf("the sleeper is gone (%v): the test tested nothing", err)
	}
}
