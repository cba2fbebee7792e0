package supervise

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The children are this test binary, run again with childEnv set to the
// part it plays (fakeChild).
const childEnv = "SUPERVISE_TEST_CHILD"

func TestMain(m *testing.M) {
	if part := os.Getenv(childEnv); part != "" {
		os.Exit(fakeChild(part))
	}
	goleak.VerifyTestMain(m)
}

// withWaitDelay sets how long standard output is read after the child's
// exit (default defaultWaitDelay), for a test that has it expire.
func withWaitDelay(d time.Duration) Option {
	return func(c *config) error {
		c.waitDelay = d
		return nil
	}
}

// rawChunks is what the child "raw" writes to standard output, one write
// each: a banner with CRLF line ends and a line cut across writes, a line
// longer than maxLine that looks like a banner line, a megabyte after the
// banner (more than a pipe holds, so nobody reading would block the
// child), and a last line with no newline.
func rawChunks() []string {
	return []string{
		"starting\r\nMCPV2_PEER_ID=12D3",
		"KooWfake\r\n",
		"MCPV2_LONG=" + strings.Repeat("x", maxLine+10),
		"\nMCPV2_DATA_DIR=/tmp/fake\r\n",
		"MCPV2_AFTER=ignored\n",
		strings.Repeat("0123456789abcdef", 1<<16) + "\n",
		"no newline at the end",
	}
}

// fakeChild plays a child and returns its exit status:
//
//	banner    prints a banner in pieces (a line cut across writes), a line
//	          on stderr, then waits for SIGTERM and exits 0
//	raw       writes rawChunks to stdout and exits 0
//	exit      prints half a banner and two lines on stderr, exits 3
//	silent    prints nothing and waits for SIGTERM
//	stubborn  prints a banner and ignores SIGTERM
//
// and the parts of unixChild where there are process groups.
func fakeChild(part string) int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	switch part {
	case "banner":
		// Stderr goes straight to the log, stdout through the Proc: a
		// line on stderr only between whole lines on stdout.
		fmt.Fprint(os.Stdout, "starting\n")
		fmt.Fprint(os.Stderr, "level=INFO msg=ready\n")
		fmt.Fprint(os.Stdout, "MCPV2_PEER_ID=12D3Koo")
		fmt.Fprint(os.Stdout, "Wfake\nMCPV2_P2P_ADDRESS=/ip4/127.0.0.1/tcp/1\nMCPV2_P2P_ADDRESS=/ip4/127.0.0.1/udp/1/quic-v1\n")
		fmt.Fprint(os.Stdout, "NOT_A_BANNER=x\nMCPV2_DATA_DIR=/tmp/fake\nafter the banner\n")
		<-term
		fmt.Fprint(os.Stderr, "stopping on SIGTERM\n")
		return 0
	case "raw":
		for _, c := range rawChunks() {
			if _, err := os.Stdout.WriteString(c); err != nil {
				return 1
			}
		}
		return 0
	case "exit":
		fmt.Fprint(os.Stdout, "MCPV2_PEER_ID=12D3KooWfake\n")
		fmt.Fprint(os.Stderr, "level=WARN msg=\"port busy\"\nmcpv2: listen tcp 127.0.0.1:1: bind: address already in use\n")
		return 3
	case "silent":
		<-term
		return 0
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		fmt.Fprint(os.Stdout, "MCPV2_DATA_DIR=/tmp/fake\n")
		select {}
	}
	if code, ok := unixChild(part); ok {
		return code
	}
	fmt.Fprintf(os.Stderr, "no part %q\n", part)
	return 2
}

// childArgs returns this test binary and its environment for the child
// part.
func childArgs(t *testing.T, part string, env ...string) (string, []string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// GORACE: a race-enabled child that exits 0 would otherwise sleep a
	// second in the race runtime's exit.
	return exe, append(os.Environ(), append(env, childEnv+"="+part, "GORACE=atexit_sleep_ms=0")...)
}

// start runs this test binary as the child part, and closes it when the
// test ends should the test not have.
func start(t *testing.T, part string, opts ...Option) *Proc {
	t.Helper()
	exe, env := childArgs(t, part)
	p, err := New(exe, []string{"-test.run=^$"}, append([]Option{WithEnv(env)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// openLog opens a new log file as a caller of New would.
func openLog(t *testing.T) (*os.File, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "child.log")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return f, path
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestBannerThenClose(t *testing.T) {
	f, logPath := openLog(t)
	p := start(t, "banner", WithLogFile(f))
	b, err := p.Banner(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	want := Banner{
		"MCPV2_PEER_ID":     {"12D3KooWfake"},
		"MCPV2_P2P_ADDRESS": {"/ip4/127.0.0.1/tcp/1", "/ip4/127.0.0.1/udp/1/quic-v1"},
		"MCPV2_DATA_DIR":    {"/tmp/fake"},
	}
	if fmt.Sprint(b) != fmt.Sprint(want) {
		t.Fatalf("banner %v, want %v", b, want)
	}
	if b.First("MCPV2_PEER_ID") != "12D3KooWfake" || b.First("MCPV2_NONE") != "" {
		t.Fatalf("First: %q %q", b.First("MCPV2_PEER_ID"), b.First("MCPV2_NONE"))
	}
	if p.Exited() || p.Err() != nil {
		t.Fatalf("exited %v (%v) after its banner", p.Exited(), p.Err())
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !p.Exited() || p.Err() != nil {
		t.Fatalf("after Close: exited %v, %v; want a clean exit on SIGTERM", p.Exited(), p.Err())
	}
	if err := p.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v, want net.ErrClosed", err)
	}
	// The banner still answers once the child is gone.
	if b2, err := p.Banner(ctxFor(t)); err != nil || b2.First("MCPV2_DATA_DIR") != "/tmp/fake" {
		t.Fatalf("Banner after exit: %v, %v", b2, err)
	}
	// The log has both streams, whole lines, stdout in order.
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"starting", "MCPV2_PEER_ID=12D3KooWfake", "level=INFO msg=ready", "MCPV2_DATA_DIR=/tmp/fake", "after the banner", "stopping on SIGTERM"} {
		if !strings.Contains(string(log), "\n"+l+"\n") && !strings.HasPrefix(string(log), l+"\n") {
			t.Errorf("the log lacks the line %q:\n%s", l, log)
		}
	}
	if tail := p.Tail(); len(tail) == 0 || tail[len(tail)-1] != "stopping on SIGTERM" {
		t.Errorf("Tail %q", tail)
	}
	// The Proc closed the log file it was given.
	if _, err := f.WriteString("x"); !errors.Is(err, os.ErrClosed) {
		t.Errorf("write to the log after the exit: %v, want os.ErrClosed", err)
	}
}

// TestLogIsExactCopy checks that the log holds byte for byte what the
// child wrote (no line cut, no CR dropped, no newline added) and that
// standard output is drained after the banner.
func TestLogIsExactCopy(t *testing.T) {
	f, logPath := openLog(t)
	p := start(t, "raw", WithLogFile(f))
	b, err := p.Banner(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	want := Banner{"MCPV2_PEER_ID": {"12D3KooWfake"}, "MCPV2_DATA_DIR": {"/tmp/fake"}}
	if fmt.Sprint(b) != fmt.Sprint(want) {
		t.Fatalf("banner %v, want %v", b, want)
	}
	select {
	case <-p.Done():
	case <-ctxFor(t).Done():
		t.Fatal("the child did not exit: blocked on its standard output?")
	}
	if p.Err() != nil {
		t.Fatalf("exit: %v", p.Err())
	}
	got, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if wantLog := strings.Join(rawChunks(), ""); !bytes.Equal(got, []byte(wantLog)) {
		t.Fatalf("the log (%d bytes) is not what the child wrote (%d bytes)", len(got), len(wantLog))
	}
	// Tail reads the end of the file alone: the megabyte line, cut there,
	// is left out.
	if tail := p.Tail(); len(tail) != 1 || tail[0] != "no newline at the end" {
		t.Errorf("Tail %.200q", tail)
	}
}

func TestExitBeforeBanner(t *testing.T) {
	f, _ := openLog(t)
	p := start(t, "exit", WithTail(3), WithLogFile(f))
	_, err := p.Banner(ctxFor(t))
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("Banner: %v, want an *ExitError", err)
	}
	var xe *exec.ExitError
	if !errors.As(err, &xe) || xe.ExitCode() != 3 || ee.Pid != p.Pid() {
		t.Fatalf("exit error %v (pid %d of %d)", err, ee.Pid, p.Pid())
	}
	// WithTail(3): the log's three lines, read when the child had exited.
	// Stdout reaches the log through the Proc, stderr directly, so only
	// the order within each stream is sure.
	const last = "mcpv2: listen tcp 127.0.0.1:1: bind: address already in use"
	var stderr []string
	for _, l := range ee.Log {
		if l != "MCPV2_PEER_ID=12D3KooWfake" {
			stderr = append(stderr, l)
		}
	}
	if len(ee.Log) != 3 || len(stderr) != 2 || stderr[0] != `level=WARN msg="port busy"` || stderr[1] != last {
		t.Fatalf("Log %q", ee.Log)
	}
	if msg := err.Error(); !strings.Contains(msg, "exit status 3") || !strings.Contains(msg, last) {
		t.Fatalf("the message names neither the status nor the reason: %s", msg)
	}
	if !p.Exited() || ExitText(p.Err()) != "exit status 3" {
		t.Fatalf("Exited %v, Err %v", p.Exited(), p.Err())
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close of an exited child: %v", err)
	}
	if err := p.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v, want net.ErrClosed", err)
	}
}

func TestWithoutLog(t *testing.T) {
	p := start(t, "exit")
	_, err := p.Banner(ctxFor(t))
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Log != nil || p.Tail() != nil {
		t.Fatalf("Banner: %v, Tail %q; want an *ExitError and no log", err, p.Tail())
	}
}

func TestContextEndsTheWait(t *testing.T) {
	p := start(t, "silent")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := p.Banner(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Banner: %v, want context.Canceled", err)
	}
	if p.Exited() {
		t.Fatalf("the child exited (%v) when only the wait was cancelled", p.Err())
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestCloseKillsAfterGrace(t *testing.T) {
	p := start(t, "stubborn", WithGrace(100*time.Millisecond))
	if _, err := p.Banner(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	err := p.Close()
	if !errors.Is(err, ErrKilled) || !strings.Contains(err.Error(), "within 100ms of SIGTERM") {
		t.Fatalf("Close: %v, want ErrKilled", err)
	}
	var xe *exec.ExitError
	if !errors.As(p.Err(), &xe) || !strings.Contains(ExitText(p.Err()), "killed") {
		t.Fatalf("Err %v, want killed", p.Err())
	}
	if err := p.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v, want net.ErrClosed", err)
	}
}

func TestNewFails(t *testing.T) {
	f, _ := openLog(t)
	missing := filepath.Join(t.TempDir(), "no-such-program")
	_, err := New(missing, nil, WithLogFile(f))
	var se *StartError
	if !errors.As(err, &se) || se.Name != missing || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("New of a program that does not exist: %v, want a *StartError", err)
	}
	if want := "supervise: start " + missing + ": "; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("message %q, want it to begin %q", err, want)
	}
	if _, err := f.WriteString("x"); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("a failed New left the log open: %v", err)
	}
	for _, o := range []Option{WithGrace(0), WithTail(-1), WithLogFile(nil)} {
		f, _ := openLog(t)
		if _, err := New("true", nil, o, WithLogFile(f)); err == nil {
			t.Fatal("New accepted an invalid option")
		}
		if _, err := f.WriteString("x"); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("a failed New left the log open: %v", err)
		}
	}
}

// TestStdoutWriter feeds the banner parser directly: lines cut across
// writes, CRLF, a runaway line that begins like a banner line, and the
// rest only logged once the banner is complete.
func TestStdoutWriter(t *testing.T) {
	f, logPath := openLog(t)
	p := &Proc{cfg: config{log: f}, ready: make(chan struct{}), banner: Banner{}}
	w := stdoutWriter{p: p}
	in := []string{"MCPV2_A=", "1\r\nx\n", "", "MCPV2_LONG=" + strings.Repeat("y", maxLine), "z", "\nMCPV2_B=2\n", "MCPV2_DATA_DIR=d\nMCPV2_C=3\n", "MCPV2_D=4\n"}
	for _, s := range in {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%.20q) = %d, %v", s, n, err)
		}
	}
	f.Close()
	select {
	case <-p.ready:
	default:
		t.Fatal("the banner is not complete")
	}
	want := Banner{"MCPV2_A": {"1"}, "MCPV2_B": {"2"}, "MCPV2_DATA_DIR": {"d"}}
	if fmt.Sprint(p.banner) != fmt.Sprint(want) {
		t.Fatalf("banner %v, want %v", p.banner, want)
	}
	if got, err := os.ReadFile(logPath); err != nil || string(got) != strings.Join(in, "") {
		t.Fatalf("the log is not what was written (%v)", err)
	}
}
