// Package supervise starts a child process and watches it: the child's
// standard error goes straight to a log file (no pipe, so the child keeps
// logging should this process die), its standard output comes through a
// pipe that is read for the banner the child prints at start (the
// KEY=value lines of an `mcpv2 node`, the last of them MCPV2_DATA_DIR) and
// copied, byte for byte, to the same log file, and the child's exit is
// waited for in a goroutine of its own. Callers wait on events (the
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
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// DefaultGrace is how long Close waits after SIGTERM before SIGKILL
	// when WithGrace is not given.
	DefaultGrace = 10 * time.Second
	// DefaultTail is how many of the last lines of the log Tail and
	// ExitError quote when WithTail is not given.
	DefaultTail = 20

	// BannerPrefix begins the key of every banner line.
	BannerPrefix = "MCPV2_"
	// BannerEnd is the key of the banner's last line.
	BannerEnd = "MCPV2_DATA_DIR"

	// maxLine caps one line of standard output as the banner parser
	// keeps it: a longer one is no banner line and is skipped (a banner
	// line is far shorter). The log has it whole.
	maxLine = 64 << 10
	// maxTailLine caps one quoted line of the tail, for error messages.
	maxTailLine = 1 << 10
	// tailBytes is how much of the end of the log Tail reads.
	tailBytes = 16 << 10
	// defaultWaitDelay bounds how long standard output is read after the
	// child has exited, should something it started still hold it open.
	defaultWaitDelay = 2 * time.Second
)

// ErrKilled is what Close returns (wrapped) when the child did not exit
// within the grace period after SIGTERM and was killed.
var ErrKilled = errors.New("supervise: killed after the grace period")

// Option configures New.
type Option func(*config) error

type config struct {
	env       []string
	log       *os.File
	grace     time.Duration
	tail      int
	waitDelay time.Duration
}

// WithEnv sets the child's environment (os/exec's Cmd.Env); without it the
// child inherits this process's.
func WithEnv(env []string) Option {
	return func(c *config) error {
		c.env = env
		return nil
	}
}

// WithLogFile makes f, a file open for writing (best opened with
// O_APPEND), the child's log: the child's standard error is f itself (the
// child writes there directly, and goes on doing so should this process
// die), and what it prints on standard output is copied to f unchanged as
// it arrives. New takes f over: the Proc closes it once the child has
// exited and its output is drained, and New closes it when it fails. Tail
// and ExitError read the log back by f.Name(), so f must be opened by a
// path that stays valid. Without WithLogFile, standard error is discarded
// and standard output only read.
func WithLogFile(f *os.File) Option {
	return func(c *config) error {
		if f == nil {
			return errors.New("supervise: WithLogFile: nil file")
		}
		c.log = f
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

// WithTail sets how many of the last lines of the log Tail and ExitError
// quote (default DefaultTail). It must be positive.
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

// StartError is what New returns when the program could not be started.
type StartError struct {
	// Name is the program, as given to New.
	Name string
	// Err is os/exec's Cmd.Start error.
	Err error
}

// Error names the program and the reason.
func (e *StartError) Error() string {
	return fmt.Sprintf("supervise: start %s: %v", e.Name, e.Err)
}

// Unwrap returns Err.
func (e *StartError) Unwrap() error { return e.Err }

// ExitError is what Banner returns when the child exited before its banner
// was complete.
type ExitError struct {
	// Pid was the child's process ID.
	Pid int
	// Err is os/exec's Cmd.Wait error: nil for exit status 0, else an
	// *exec.ExitError (exit status, or the signal that ended it).
	Err error
	// Log holds the last lines of the log file (standard error, and
	// standard output copied there) as they were when the child had
	// exited, at most the WithTail count; nil without WithLogFile.
	Log []string
}

// Error names the exit status and quotes the last lines of the log.
func (e *ExitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "supervise: pid %d exited before its banner: %s", e.Pid, ExitText(e.Err))
	if len(e.Log) > 0 {
		b.WriteString("; last lines of the log:\n  ")
		b.WriteString(strings.Join(e.Log, "\n  "))
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
// for os/exec's copying of its standard output, which calls the Proc's
// stdout writer); Close stops the child and so ends it. Every Proc must be
// closed, even one whose child has exited.
type Proc struct {
	cfg     config
	cmd     *exec.Cmd
	logPath string // cfg.log's name, to read the tail back; "" without a log

	ready  chan struct{} // closed once banner is complete
	banner Banner        // written by the stdout writer before ready is closed

	done    chan struct{} // closed once the child has exited and been waited for
	err     error         // Wait's error, written before done is closed
	exitLog []string      // the log's tail at an exit before the banner, written before done is closed

	stdout stdoutWriter
	closed atomic.Bool
}

// New starts the program name with args and begins to watch it. The child
// runs in a process group of its own where the system has them, so that a
// Ctrl-C at the terminal reaches the caller alone. When the program cannot
// be started, New returns a *StartError. A failed New leaves nothing
// running (and has closed the WithLogFile file).
func New(name string, args []string, opts ...Option) (*Proc, error) {
	cfg := config{grace: DefaultGrace, tail: DefaultTail, waitDelay: defaultWaitDelay}
	var errs []error
	for _, o := range opts {
		// Every option, so that a log given after an invalid one is
		// closed too.
		errs = append(errs, o(&cfg))
	}
	if err := errors.Join(errs...); err != nil {
		if cfg.log != nil {
			cfg.log.Close()
		}
		return nil, err
	}
	p := &Proc{cfg: cfg, ready: make(chan struct{}), done: make(chan struct{}), banner: Banner{}}
	p.cmd = exec.Command(name, args...)
	p.cmd.Env = cfg.env
	p.stdout.p = p
	// Standard output is not a file, so os/exec makes a pipe and copies it
	// to p.stdout; Wait returns once it is drained (or waitDelay after the
	// exit, should a grandchild hold it). Standard error is the log file
	// itself, or /dev/null.
	p.cmd.Stdout = &p.stdout
	if cfg.log != nil {
		p.logPath = cfg.log.Name()
		p.cmd.Stderr = cfg.log
	}
	p.cmd.WaitDelay = cfg.waitDelay
	setChildAttrs(p.cmd)
	if err := p.cmd.Start(); err != nil {
		if cfg.log != nil {
			cfg.log.Close()
		}
		return nil, &StartError{Name: name, Err: err}
	}
	go p.wait()
	return p, nil
}

// wait is the Proc's goroutine.
func (p *Proc) wait() {
	err := p.cmd.Wait()
	if errors.Is(err, exec.ErrWaitDelay) && p.cmd.ProcessState != nil && p.cmd.ProcessState.Success() {
		// The child exited 0 and something it started still holds its
		// standard output: that is no failure of the child's.
		err = nil
	}
	// os/exec's copying has ended: nothing writes to the log any more
	// but the child's descendants, through descriptors of their own.
	if p.cfg.log != nil {
		p.cfg.log.Close()
	}
	select {
	case <-p.ready:
	default:
		p.exitLog = p.Tail()
	}
	p.err = err
	close(p.done)
}

// stdoutWriter takes what os/exec copies from the child's standard output:
// it writes every chunk unchanged to the log, and cuts the chunks into
// lines for the banner until the banner is complete. One goroutine of
// os/exec calls Write.
type stdoutWriter struct {
	p    *Proc
	buf  []byte // a line begun, until the banner is complete
	skip bool   // the line begun is longer than maxLine: no banner line
}

// Write never fails: the child must never block on a pipe nobody reads,
// and a failed write to the log (a full disk) costs the log, not the
// child.
func (w *stdoutWriter) Write(b []byte) (int, error) {
	if w.p.cfg.log != nil {
		_, _ = w.p.cfg.log.Write(b)
	}
	select {
	case <-w.p.ready:
		return len(b), nil // the banner is complete; the rest is only logged
	default:
	}
	for rest := b; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if !w.skip {
				w.buf = append(w.buf, rest...)
			}
			if len(w.buf) > maxLine {
				w.buf, w.skip = w.buf[:0], true
			}
			break
		}
		if w.skip || len(w.buf)+i > maxLine {
			w.buf, w.skip = w.buf[:0], false
			rest = rest[i+1:]
			continue
		}
		w.buf = append(w.buf, rest[:i]...)
		rest = rest[i+1:]
		line := strings.TrimSuffix(string(w.buf), "\r")
		w.buf = w.buf[:0]
		if w.bannerLine(line) {
			w.buf = nil
			break
		}
	}
	return len(b), nil
}

// bannerLine takes a line of standard output into the banner, and reports
// whether it completed the banner.
func (w *stdoutWriter) bannerLine(line string) bool {
	k, v, ok := strings.Cut(line, "=")
	if !ok || !strings.HasPrefix(k, BannerPrefix) {
		return false
	}
	w.p.banner[k] = append(w.p.banner[k], v)
	if k == BannerEnd {
		close(w.p.ready)
		return true
	}
	return false
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
		return nil, &ExitError{Pid: p.Pid(), Err: p.err, Log: append([]string(nil), p.exitLog...)}
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
// exit status 0, also when something the child started held its standard
// output open past the exit; ExitText words it), and nil while it runs.
func (p *Proc) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Tail reads the end of the log file once and returns its last lines (at
// most the WithTail count, each cut at 1 KiB, without their line ends),
// for error messages. It returns nil without WithLogFile, or when the log
// cannot be read.
func (p *Proc) Tail() []string {
	if p.logPath == "" {
		return nil
	}
	return readTail(p.logPath, p.cfg.tail)
}

// readTail returns the last n lines of the last tailBytes of the file at
// path.
func readTail(path string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	cut := false
	if fi, err := f.Stat(); err == nil && fi.Size() > tailBytes {
		_, err = f.Seek(-tailBytes, io.SeekEnd)
		cut = err == nil
	}
	b, err := io.ReadAll(io.LimitReader(f, tailBytes))
	if err != nil {
		return nil
	}
	if i := bytes.IndexByte(b, '\n'); cut && i >= 0 {
		b = b[i+1:] // the rest of a line cut by the seek
	}
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		l = strings.TrimSuffix(l, "\r")
		if len(l) > maxTailLine {
			l = l[:maxTailLine] + "…"
		}
		lines[i] = l
	}
	return lines
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
