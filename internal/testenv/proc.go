package testenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// bannerWait is how long StartProc waits for a process's banner; stopWait
// is how long Stop waits after SIGTERM before it kills the process.
const (
	bannerWait = 60 * time.Second
	stopWait   = 10 * time.Second
)

// Proc is a running `mcpv2 node` process, started by StartProc, and what
// its banner said. Its fields are set by StartProc and not changed after,
// but for ExitErr.
type Proc struct {
	// Cmd is the process; a test may signal it (Cmd.Process.Kill, then
	// wait on Exited) but must not Wait on it.
	Cmd *exec.Cmd
	// Banner holds the banner's KEY=VALUE lines on stdout, up to and with
	// its last, MCPV2_DATA_DIR: the values of each key in order.
	Banner map[string][]string
	// Log is the process's stderr, so far.
	Log *Buffer
	// Exited is closed when the process has exited (its stdout read to
	// the end, Cmd waited for).
	Exited <-chan struct{}
	// ExitErr is what Cmd.Wait returned. Read it only after Exited is
	// closed.
	ExitErr error
}

// StartProc runs argv (argv[0] is the program: the mcpv2 binary, or a
// command that execs it in place, as `ip netns exec NS` or env(1) to add
// variables) with the environment CleanEnv, stderr kept in Log, and waits
// up to 60 s for its banner's last line (MCPV2_DATA_DIR); t fails if the
// process exits before, or does not print it in time. Its stdout is read
// to the end, so that it never blocks writing there. When the test ends,
// the process is stopped (Stop) and, if t failed, its log is logged.
func StartProc(t testing.TB, argv ...string) *Proc {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = CleanEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	p := &Proc{Cmd: cmd, Log: &Buffer{}, Exited: exited}
	cmd.Stderr = p.Log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	banner := make(chan map[string][]string, 1)
	go func() {
		scanBanner(stdout, func(b map[string][]string) { banner <- b })
		p.ExitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("%v log:\n%s", cmd.Args, p.Log.String())
		}
	})
	select {
	case p.Banner = <-banner:
	case <-exited:
		select {
		case p.Banner = <-banner: // it printed its banner, then exited
		default:
			t.Fatalf("%v exited before its banner: %v\n%s", cmd.Args, p.ExitErr, p.Log.String())
		}
	case <-time.After(bannerWait):
		t.Fatalf("%v: no banner in %v:\n%s", cmd.Args, bannerWait, p.Log.String())
	}
	return p
}

// First returns the banner's first value of key, "" if it has none.
func (p *Proc) First(key string) string {
	if v := p.Banner[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Stop ends the process, SIGTERM and SIGKILL 10 s later if it has not
// exited by then, and waits for it; it returns at once if the process has
// exited. StartProc's cleanup calls it; a test calls it to stop a node
// before the test ends. It must not be called concurrently.
func (p *Proc) Stop() {
	select {
	case <-p.Exited:
		return
	default:
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Exited:
	case <-time.After(stopWait):
		_ = p.Cmd.Process.Kill()
		<-p.Exited
	}
}

// PolicyFile writes a node's policy file (--policy) holding grants, as a
// user writes one ({"grants": {"http": ["*"]}} lets every caller without a
// credential run every skill), into a new temporary directory of t, and
// returns its path.
func PolicyFile(t testing.TB, grants map[string][]string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"grants": grants})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// ReadBanner reads an `mcpv2 node`'s stdout to the end: the PeerID and P2P
// addresses of its banner go to peerID and addrs, and banner is closed at
// the banner's last line (MCPV2_DATA_DIR). The fields must not be read
// before then.
func ReadBanner(stdout io.Reader, peerID *string, addrs *[]string, banner chan struct{}) {
	scanBanner(stdout, func(b map[string][]string) {
		if v := b["MCPV2_PEER_ID"]; len(v) > 0 {
			*peerID = v[0]
		}
		*addrs = append(*addrs, b["MCPV2_P2P_ADDRESS"]...)
		close(banner)
	})
}

// scanBanner reads an `mcpv2 node`'s stdout to the end, and calls done
// once, at the banner's last line (MCPV2_DATA_DIR), with the banner's
// KEY=VALUE lines so far: the values of each key in order. What follows
// the banner is read and dropped.
func scanBanner(stdout io.Reader, done func(banner map[string][]string)) {
	sc := bufio.NewScanner(stdout)
	banner := map[string][]string{}
	for sc.Scan() {
		if banner == nil {
			continue
		}
		k, v, _ := strings.Cut(sc.Text(), "=")
		banner[k] = append(banner[k], v)
		if k == "MCPV2_DATA_DIR" {
			done(banner)
			banner = nil
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
}

// Run runs bin with args in the clean environment (CleanEnv), for at most
// a minute, and returns its stdout, stderr and exit code. A program that
// cannot be run fails the test.
func Run(t testing.TB, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = CleanEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return out.String(), errb.String(), code
}

// CountConns serves ln until the test ends: it counts the connections it
// accepts, writes reply (if any) to each and closes it. Tests use it as an
// address that speaks no libp2p, or one that must never be dialled.
func CountConns(t testing.TB, ln net.Listener, reply []byte) *atomic.Int32 {
	t.Helper()
	var n atomic.Int32
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			if len(reply) > 0 {
				_, _ = c.Write(reply)
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return &n
}
