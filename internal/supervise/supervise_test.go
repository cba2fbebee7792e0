package supervise

import (
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

// fakeChild plays a child and returns its exit status:
//
//	banner    prints a banner in pieces (a line cut across writes), a line
//	          on stderr, then waits for SIGTERM and exits 0
//	exit      prints half a banner and two lines on stderr, exits 3
//	silent    prints nothing and waits for SIGTERM
//	stubborn  prints a banner and ignores SIGTERM
func fakeChild(part string) int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	switch part {
	case "banner":
		fmt.Fprint(os.Stdout, "starting\nMCPV2_PEER_ID=12D3Koo")
		fmt.Fprint(os.Stderr, "level=INFO msg=ready\n")
		fmt.Fprint(os.Stdout, "Wfake\nMCPV2_P2P_ADDRESS=/ip4/127.0.0.1/tcp/1\nMCPV2_P2P_ADDRESS=/ip4/127.0.0.1/udp/1/quic-v1\n")
		fmt.Fprint(os.Stdout, "NOT_A_BANNER=x\nMCPV2_DATA_DIR=/tmp/fake\nafter the banner\n")
		<-term
		fmt.Fprint(os.Stderr, "stopping on SIGTERM\n")
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
	fmt.Fprintf(os.Stderr, "no part %q\n", part)
	return 2
}

// start runs this test binary as the child part, and closes it when the
// test ends should the test not have.
func start(t *testing.T, part string, opts ...Option) *Proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// GORACE: a race-enabled child that exits 0 would otherwise sleep a
	// second in the race runtime's exit.
	opts = append([]Option{WithEnv(append(os.Environ(), childEnv+"="+part, "GORACE=atexit_sleep_ms=0"))}, opts...)
	p, err := New(exe, []string{"-test.run=^$"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestBannerThenClose(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	p := start(t, "banner", WithLogFile(logPath))
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
}

func TestExitBeforeBanner(t *testing.T) {
	p := start(t, "exit", WithTail(1))
	_, err := p.Banner(ctxFor(t))
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("Banner: %v, want an *ExitError", err)
	}
	var xe *exec.ExitError
	if !errors.As(err, &xe) || xe.ExitCode() != 3 || ee.Pid != p.Pid() {
		t.Fatalf("exit error %v (pid %d of %d)", err, ee.Pid, p.Pid())
	}
	// WithTail(1): only the last line of stderr.
	const last = "mcpv2: listen tcp 127.0.0.1:1: bind: address already in use"
	if len(ee.Stderr) != 1 || ee.Stderr[0] != last {
		t.Fatalf("Stderr %q", ee.Stderr)
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
	if _, err := New(filepath.Join(t.TempDir(), "no-such-program"), nil); err == nil {
		t.Fatal("New started a program that does not exist")
	}
	if _, err := New("true", nil, WithLogFile(filepath.Join(t.TempDir(), "no-dir", "x.log"))); err == nil || !strings.Contains(err.Error(), "open the log") {
		t.Fatalf("New with an unwritable log: %v", err)
	}
	for _, o := range []Option{WithGrace(0), WithTail(-1), WithLogFile("")} {
		if _, err := New("true", nil, o); err == nil {
			t.Fatal("New accepted an invalid option")
		}
	}
}

func TestLineWriter(t *testing.T) {
	var got []string
	w := lineWriter{line: func(s string) { got = append(got, s) }}
	for _, s := range []string{"a", "b\r\nc\n", "", "\n", strings.Repeat("x", maxLine+1), "y"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	w.flush()
	want := []string{"ab", "c", "", strings.Repeat("x", maxLine), "xy"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("lines %q, want %q", got, want)
	}
}
