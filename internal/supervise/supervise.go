// Package supervise starts a child process and watches it: it reads the
// child's standard output and standard error through pipes, tees both to a
// log file, collects the banner the child prints at start (the KEY=value
// lines of an `mcpv2 node`, the last of them MCPV2_DATA_DIR), and waits for
// the child's exit in a goroutine of its own. Callers wait on events (the
// banner, the exit, their context), never by polling a file.
//
// It imports the standard library alone.
package supervise

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// DefaultGrace is how long Close waits after SIGTERM before SIGKILL
	// when WithGrace is not given.
	DefaultGrace = 10 * time.Second
	// DefaultTail is how many of the last lines of output a Proc keeps
	// (of both streams, and of standard error alone) when WithTail is not
	// given.
	DefaultTail = 20

	// BannerPrefix begins the key of every banner line.
	BannerPrefix = "MCPV2_"
	// BannerEnd is the key of the banner's last line.
	BannerEnd = "MCPV2_DATA_DIR"

	// maxLine caps one line of output: a longer one is cut into pieces of
	// this size (a banner line is far shorter).
	maxLine = 64 << 10
	// maxTailLine caps one kept line of the tail, for error messages.
	maxTailLine = 1 << 10
	// waitDelay bounds how long the pipes are read after the child has
	// exited, should something it started still hold them open.
	waitDelay = 2 * time.Second
)

// ErrKilled is what Close returns (wrapped) when the child did not exit
// within the grace period after SIGTERM and was killed.
var ErrKilled = errors.New("supervise: killed after the grace period")

// Option configures New.
type Option func(*config) error

type config struct {
	env     []string
	logPath string
	grace   time.Duration
	tail    int
}

// WithEnv sets the child's environment (os/exec's Cmd.Env); without it the
// child inherits this process's.
func WithEnv(env []string) Option {
	return func(c *config) error {
		c.env = env
		return nil
	}
}

// WithLogFile tees every line of the child's standard output and standard
// error, as it arrives, to the file at path (created with mode 0600, or
// appended to). The Proc owns the file and closes it once the child has
// exited. Without it the output is only read.
func WithLogFile(path string) Option {
	return func(c *config) error {
		if path == "" {
			return errors.New("supervise: WithLogFile: empty path")
		}
		c.logPath = path
		return nil
	}
}

// WithGrace sets how long Close waits after SIGTERM before it kills the
// child (default DefaultGrace). It must be positive.
func WithGrace(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("supervise: WithGrace(%s): not positive", d)
		}
		c.grace = d
		return nil
	}
}

// WithTail sets how many of the last lines of output are kept for Tail
// and ExitError (default DefaultTail). It must be positive.
func WithTail(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("supervise: WithTail(%d): not positive", n)
		}
		c.tail = n
		return nil
	}
}

// Banner is the banner of a child: the values of each KEY=value line whose
// key begins with BannerPrefix, in the order printed.
type Banner map[string][]string

// First returns the first value of key, or "".
func (b Banner) First(key string) string {
	if v := b[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// ExitError is what Banner returns when the child exited before its banner
// was complete.
type ExitError struct {
	// Pid was the child's process ID.
	Pid int
	// Err is os/exec's Cmd.Wait error: nil for exit status 0, else an
	// *exec.ExitError (exit status, or the signal that ended it).
	Err error
	// Stderr holds the last lines that the child wrote to standard error.
	Stderr []string
}

// Error names the exit status and quotes the last lines of standard error.
func (e *ExitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "supervise: pid %d exited before its banner: %s", e.Pid, ExitText(e.Err))
	if len(e.Stderr) > 0 {
		b.WriteString("; last lines of stderr:\n  ")
		b.WriteString(strings.Join(e.Stderr, "\n  "))
	}
	return b.String()
}

// Unwrap returns Err.
func (e *ExitError) Unwrap() error { return e.Err }

// ExitText says how a child ended from its Wait error: "exit status 0" for
// nil, else the error's text ("exit status 1", "signal: killed").
func ExitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// Proc is a running child process. Its methods may be called from any
// goroutine. It owns one goroutine, which waits for the child's exit (and
// for os/exec's copying of its output, which calls the Proc's line
// handlers); Close stops the child and so ends it. Every Proc must be
// closed, even one whose child has exited.
type Proc struct {
	cfg config
	cmd *exec.Cmd
	log *os.File // nil without WithLogFile; written under mu, closed by the waiter

	ready  chan struct{} // closed once banner is complete
	banner Banner        // written by the stdout reader before ready is closed

	done chan struct{} // closed once the child has exited and been waited for
	err  error         // Wait's error, written before done is closed

	mu      sync.Mutex // guards log writes, tail and errTail
	tail    []string   // the last lines of both streams, oldest first
	errTail []string   // the last lines of standard error

	stdout, stderr lineWriter
	closed         atomic.Bool
}

// New starts the program name with args and begins to watch it. The child
// runs in a process group of its own where the system has them, so that a
// Ctrl-C at the terminal reaches the caller alone. A failed New leaves
// nothing running.
func New(name string, args []string, opts ...Option) (_ *Proc, err error) {
	cfg := config{grace: DefaultGrace, tail: DefaultTail}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	p := &Proc{cfg: cfg, ready: make(chan struct{}), done: make(chan struct{}), banner: Banner{}}
	if cfg.logPath != "" {
		if p.log, err = os.OpenFile(cfg.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
			return nil, fmt.Errorf("supervise: open the log: %w", err)
		}
	}
	p.cmd = exec.Command(name, args...)
	p.cmd.Env = cfg.env
	p.stdout.line = p.outLine
	p.stderr.line = p.errLine
	// Writers that are not files: os/exec makes the pipes and copies them
	// here, and Wait returns once both are drained (or waitDelay after the
	// exit, should a grandchild hold them).
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.WaitDelay = waitDelay
	setChildAttrs(p.cmd)
	if err := p.cmd.Start(); err != nil {
		if p.log != nil {
			p.log.Close()
		}
		return nil, fmt.Errorf("supervise: start %s: %w", name, err)
	}
	go p.wait()
	return p, nil
}

// wait is the Proc's goroutine.
func (p *Proc) wait() {
	err := p.cmd.Wait()
	// os/exec's copying has ended: the last partial lines are whole now.
	p.stdout.flush()
	p.stderr.flush()
	p.mu.Lock()
	if p.log != nil {
		p.log.Close()
		p.log = nil
	}
	p.mu.Unlock()
	p.err = err
	close(p.done)
}

// outLine handles a line of standard output: the log, the tail, the banner.
func (p *Proc) outLine(line string) {
	p.keep(line, false)
	select {
	case <-p.ready:
		return // the banner is complete; the rest is only logged
	default:
	}
	k, v, ok := strings.Cut(line, "=")
	if !ok || !strings.HasPrefix(k, BannerPrefix) {
		return
	}
	p.banner[k] = append(p.banner[k], v)
	if k == BannerEnd {
		close(p.ready)
	}
}

// errLine handles a line of standard error: the log and the tails.
func (p *Proc) errLine(line string) { p.keep(line, true) }

func (p *Proc) keep(line string, stderr bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.log != nil {
		// A failed write (a full disk) costs the log, never the child:
		// the pipe is read on.
		_, _ = io.WriteString(p.log, line+"\n")
	}
	if len(line) > maxTailLine {
		line = line[:maxTailLine] + "…"
	}
	p.tail = push(p.tail, line, p.cfg.tail)
	if stderr {
		p.errTail = push(p.errTail, line, p.cfg.tail)
	}
}

func push(lines []string, line string, max int) []string {
	if len(lines) >= max {
		lines = append(lines[:0], lines[len(lines)-max+1:]...)
	}
	return append(lines, line)
}

// Pid returns the child's process ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Banner waits until the child's banner is complete (its BannerEnd line)
// and returns it. It returns an *ExitError when the child exits first, and
// ctx's error when ctx ends first (the child runs on). Every call returns
// the same Banner, which the caller must not modify.
func (p *Proc) Banner(ctx context.Context) (Banner, error) {
	select {
	case <-p.ready:
		return p.banner, nil
	case <-p.done:
		select {
		case <-p.ready: // completed just before the exit
			return p.banner, nil
		default:
		}
		p.mu.Lock()
		stderr := append([]string(nil), p.errTail...)
		p.mu.Unlock()
		return nil, &ExitError{Pid: p.Pid(), Err: p.err, Stderr: stderr}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Done returns a channel that is closed once the child has exited and been
// waited for.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the child has exited (Done is closed).
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err returns os/exec's Cmd.Wait error once the child has exited (nil for
// exit status 0; ExitText words it), and nil while it runs.
func (p *Proc) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Tail returns the last lines of the child's output, both streams in the
// order they were read (at most the WithTail count).
func (p *Proc) Tail() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.tail...)
}

// Close stops the child: SIGTERM, then SIGKILL (to its whole process group
// where there are groups) if it has not exited within the grace period; it
// returns once the child has exited and its output is read. It returns nil
// when the child exited (by itself, or on SIGTERM), an error wrapping
// ErrKilled when it had to be killed, and net.ErrClosed on every call
// after the first.
func (p *Proc) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return net.ErrClosed
	}
	if p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			<-p.done
			return nil
		}
		killGroup(p.cmd.Process) // no SIGTERM on this system
	}
	grace := time.NewTimer(p.cfg.grace)
	defer grace.Stop()
	select {
	case <-p.done:
		return nil
	case <-grace.C:
	}
	killGroup(p.cmd.Process)
	<-p.done
	return fmt.Errorf("%w: pid %d did not stop within %s of SIGTERM", ErrKilled, p.Pid(), p.cfg.grace)
}

// lineWriter cuts what os/exec copies from one pipe into lines for line.
// One goroutine of os/exec calls Write, and flush runs after it has ended.
type lineWriter struct {
	buf  []byte
	line func(string)
}

// Write never fails: the child must never block on a pipe nobody reads.
func (w *lineWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			w.buf = append(w.buf, b...)
			for len(w.buf) >= maxLine {
				w.line(string(w.buf[:maxLine]))
				w.buf = append(w.buf[:0], w.buf[maxLine:]...)
			}
			break
		}
		w.buf = append(w.buf, b[:i]...)
		w.line(strings.TrimSuffix(string(w.buf), "\r"))
		w.buf = w.buf[:0]
		b = b[i+1:]
	}
	return n, nil
}

// flush hands on a last line that no newline ended.
func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.line(string(w.buf))
		w.buf = nil
	}
}
