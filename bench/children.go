package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// readyTimeout bounds how long a child may take to say it is ready.
const readyTimeout = 30 * time.Second

// child is a server process of the bench: an `mcpv2 node`, this program
// in a role, or the lean baseline binary (bench/bare) in one. It is killed by [children.closeAll], and dies with the bench
// anyway: a role exits when its stdin (a pipe from the bench) closes, and
// on Linux every child gets SIGKILL when the bench dies (procattr_linux.go).
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// lines are the stdout lines up to and including the ready line.
	lines []string
	// later gets the stdout lines after the ready line, for ask; a line
	// that finds it full is dropped.
	later chan string
	// stderr keeps the child's stderr for error messages.
	stderr *tailBuffer
	// exited is closed once the process has exited; err is then its
	// Wait error.
	exited chan struct{}
	err    error
	// asked counts the questions of ask, which tags each with its count.
	asked atomic.Uint64
}

// pid is the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// alive returns an error naming the child when it has exited.
func (c *child) alive() error {
	select {
	case <-c.exited:
		return fmt.Errorf("%s exited: %v; its stderr ends: %s", c.name, c.err, c.stderr.String())
	default:
		return nil
	}
}

// value returns the value of the first stdout line "key=value" before the
// ready line.
func (c *child) value(key string) string {
	for _, l := range c.lines {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			return v
		}
	}
	return ""
}

// values returns the values of every stdout line "key=value" before the
// ready line.
func (c *child) values(key string) []string {
	var out []string
	for _, l := range c.lines {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

// ask asks a bare host (bench/bare) the question word (lean.AskStat,
// lean.AskPeers) and returns the JSON of its answer, the line
// "name TAG JSON", within askTimeout. Each question has a tag of its own,
// so that the answer to an earlier question that timed out, arriving late,
// is skipped and not taken for this one's. One goroutine at a time may ask
// a child.
func (c *child) ask(ctx context.Context, word, name string) (string, error) {
	tag := strconv.FormatUint(c.asked.Add(1), 10)
	query := word + " " + tag
	prefix := name + " " + tag + " "
	if _, err := io.WriteString(c.stdin, query+"\n"); err != nil {
		return "", fmt.Errorf("ask %s %q: %w", c.name, query, err)
	}
	timer := time.NewTimer(askTimeout)
	defer timer.Stop()
	for {
		select {
		case l := <-c.later:
			if v, ok := strings.CutPrefix(l, prefix); ok {
				return v, nil
			}
		case <-c.exited:
			return "", c.alive()
		case <-timer.C:
			return "", fmt.Errorf("ask %s %q: no %q line within %s", c.name, query, prefix, askTimeout)
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
}

// askTimeout bounds the wait for a child's answer to ask.
const askTimeout = 10 * time.Second

// children owns the child processes of a run; mu guards list.
type children struct {
	mu   sync.Mutex
	list []*child
}

// start runs argv with env added to the bench's environment (without the
// caller's MCPV2_* settings) and waits until a stdout line satisfies
// ready, or the child exits, or readyTimeout passes.
func (cs *children) start(ctx context.Context, name string, argv, env []string, ready func(line string) bool) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(cleanEnv(), env...)
	setDeathSignal(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &child{name: name, cmd: cmd, stdin: stdin, stderr: &tailBuffer{max: 4 << 10}, exited: make(chan struct{}),
		later: make(chan string, 16)}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cs.mu.Lock()
	cs.list = append(cs.list, c)
	cs.mu.Unlock()

	readyc := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var lines []string
		sent := false
		for sc.Scan() {
			if sent {
				select {
				case c.later <- sc.Text():
				default:
				}
				continue
			}
			lines = append(lines, sc.Text())
			if ready(sc.Text()) {
				readyc <- lines
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		c.err = cmd.Wait()
		close(c.exited)
	}()
	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case c.lines = <-readyc:
		return c, nil
	case <-c.exited:
		return nil, fmt.Errorf("%s exited before it was ready: %v; its stderr ends: %s", name, c.err, c.stderr.String())
	case <-timer.C:
		cs.kill(c)
		return nil, fmt.Errorf("%s was not ready within %s; its stderr ends: %s", name, readyTimeout, c.stderr.String())
	case <-ctx.Done():
		cs.kill(c)
		return nil, context.Cause(ctx)
	}
}

// startRole starts this program in role with args, and waits for its READY
// line, whose JSON it returns in info.
func (cs *children) startRole(ctx context.Context, role string, info any, args ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program to run it as %s: %w", role, err)
	}
	return cs.startReady(ctx, "the "+role+" child", append([]string{self}, args...), []string{roleEnv + "=" + role}, info)
}

// startReady starts argv (env added) and waits for its READY line, whose
// JSON it returns in info.
func (cs *children) startReady(ctx context.Context, name string, argv, env []string, info any) (*child, error) {
	c, err := cs.start(ctx, name, argv, env, func(l string) bool { return strings.HasPrefix(l, readyPrefix) })
	if err != nil {
		return nil, err
	}
	last := c.lines[len(c.lines)-1]
	if err := json.Unmarshal([]byte(strings.TrimPrefix(last, readyPrefix)), info); err != nil {
		cs.kill(c)
		return nil, fmt.Errorf("%s's ready line %q: %w", name, clip(last), err)
	}
	return c, nil
}

// kill ends c and waits for it; a child that already exited is left as is.
func (cs *children) kill(c *child) {
	_ = c.stdin.Close()
	_ = c.cmd.Process.Kill()
	<-c.exited
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for i, x := range cs.list {
		if x == c {
			cs.list = append(cs.list[:i], cs.list[i+1:]...)
			break
		}
	}
}

// closeAll kills every child still running and waits for them.
func (cs *children) closeAll() {
	cs.mu.Lock()
	list := cs.list
	cs.list = nil
	cs.mu.Unlock()
	for _, c := range list {
		_ = c.stdin.Close()
		_ = c.cmd.Process.Kill()
	}
	for _, c := range list {
		<-c.exited
	}
}

// runProc runs argv to completion within timeout and returns its wall
// time, from just before the start to the exit, and its stdout. A non-zero
// exit is an error carrying the end of its stderr.
func runProc(ctx context.Context, timeout time.Duration, argv, env []string) (time.Duration, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(cleanEnv(), env...)
	setDeathSignal(cmd)
	var out bytes.Buffer
	errb := &tailBuffer{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = &out, errb
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (limit %s)", ctx.Err(), timeout)
		}
		return took, out.Bytes(), fmt.Errorf("%s: %w; its stderr ends: %s", strings.Join(argv[:min(len(argv), 3)], " "), err, errb.String())
	}
	return took, out.Bytes(), nil
}

// runtimeEnv are the Go runtime's settings that the children do not
// inherit from the bench's environment: each side of a row runs its own
// defaults (`mcpv2 node` picks its GC settings only when GOGC and
// GOMEMLIMIT are unset, cmd/mcpv2/gc.go; the baselines run Go's), so a
// GOGC left in the shell cannot silently change what the memory rows
// compare.
var runtimeEnv = []string{"GOGC", "GOMEMLIMIT", "GODEBUG"}

// cleanEnv is the bench's environment without MCPV2_* settings, which would
// change how an mcpv2 process or a role behaves, and without runtimeEnv.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "MCPV2_") && !slices.Contains(runtimeEnv, name) {
			env = append(env, kv)
		}
	}
	return env
}

// strippedRuntimeEnv returns the runtimeEnv settings of the bench's own
// environment ("GOGC=50"), which the bench's process runs with and
// cleanEnv keeps from the children.
func strippedRuntimeEnv() []string {
	var out []string
	for _, name := range runtimeEnv {
		if v, ok := os.LookupEnv(name); ok {
			out = append(out, name+"="+v)
		}
	}
	return out
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent
// use (mu guards b).
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// String returns what is kept, on one line.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return "(nothing)"
	}
	return strings.ReplaceAll(s, "\n", " ⏎ ")
}

// errNotReady is wrapped when a child's ready line lacks what it must say.
var errNotReady = errors.New("child's ready line is incomplete")
