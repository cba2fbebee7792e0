package custom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

type commandJSON struct {
	Type     string            `json:"type"`
	Command  []string          `json:"command"`
	TimeoutS *float64          `json:"timeout_s"`
	MemoryMB *int64            `json:"memory_mb"`
	Env      map[string]string `json:"env"`
}

const (
	// stderrKeep is how much of a command's stderr is kept (its tail).
	stderrKeep = 8 << 10
	// stderrShow is how much of that tail goes into an error message.
	stderrShow = 512
	// waitDelay bounds how long a call waits for a program's pipes
	// to close after it exited or was killed (a background process it left
	// behind may hold them).
	waitDelay = time.Second
)

// envNameRE is what names in a command handler's env must match.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedEnv are set by the handler on every call and may not be
// given in a skills file.
var reservedEnv = map[string]bool{"HOME": true, "TMPDIR": true, "MCPV2_CALLER": true}

// command is a built command handler. Its fields are set at load and
// only read afterwards, so run is safe for concurrent use.
type command struct {
	name     string
	path     string   // the program, resolved to an absolute path at load
	argv     []string // argv[0] as written in the file
	timeout  time.Duration
	memBytes uint64
	env      []string // the extra KEY=VALUE pairs of the skills file
	pathEnv  string
	scratch  string        // root of per-call scratch directories; "" = os.TempDir
	runs     chan struct{} // the semaphore of concurrent runs, shared by the file's command skills
	runAs    *runAs        // nil: the node's own user
	// prologue: the shell prologue sets the rlimits before the program
	// runs (always with runAs; as the node's own user when shell exists).
	// Else they are set with prlimit(2) right after it starts.
	prologue bool
	baseDir  string // the skills file's directory, scrubbed from stderr
	maxOut   int64
	log      *slog.Logger
}

// newCommand builds a command handler. The program is resolved with
// exec.LookPath now (a program that cannot be found fails the load); a
// relative path with a slash is taken relative to baseDir. argv is
// executed as given: no shell interprets it (shell only runs a fixed
// prologue that sets the rlimits; see newCmd). The handler shares l's run
// semaphore with the Loader's other command skills.
func newCommand(name string, raw json.RawMessage, l *Loader, baseDir string) (*command, error) {
	var cj commandJSON
	if err := decodeStrict(raw, &cj); err != nil {
		return nil, jsonError(raw, err)
	}
	if err := commandSupported(); err != nil {
		return nil, fieldf("type", "%w", err)
	}
	if len(cj.Command) == 0 || cj.Command[0] == "" {
		return nil, fieldf("command", "missing (want [\"program\", \"arg\", ...])")
	}
	if len(cj.Command) > maxArgv {
		return nil, fieldf("command", "%d arguments, at most %d are allowed", len(cj.Command), maxArgv)
	}
	for i, a := range cj.Command {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, fieldf(fmt.Sprintf("command[%d]", i), "contains a NUL byte")
		}
	}
	prog, err := lookPath(cj.Command[0], baseDir)
	if err != nil {
		return nil, fieldf("command[0]", "%w", err)
	}
	timeout, err := parseTimeout(cj.TimeoutS)
	if err != nil {
		return nil, err
	}
	mem := int64(DefaultMemoryMB)
	if cj.MemoryMB != nil {
		mem = *cj.MemoryMB
		if mem < 1 || mem > MaxMemoryMB {
			return nil, fieldf("memory_mb", "%d is out of range [1, %d]", mem, MaxMemoryMB)
		}
	}
	var env []string
	for k, v := range cj.Env {
		if reservedEnv[k] {
			return nil, fieldf("env."+k, "is set by the node and may not be given")
		}
		kv, err := envEntry(k, v)
		if err != nil {
			return nil, err
		}
		env = append(env, kv)
	}
	scratch := l.cfg.scratchDir
	if scratch != "" {
		if scratch, err = filepath.Abs(scratch); err != nil {
			return nil, fmt.Errorf("scratch directory: %w", err)
		}
		if err := os.MkdirAll(scratch, 0o700); err != nil {
			return nil, fmt.Errorf("scratch directory: %w", err)
		}
	}
	if ra := l.runAs; ra != nil {
		root := scratch
		if root == "" {
			root = os.TempDir()
		} else if err := os.Chmod(root, 0o711); err != nil {
			// The user enters its own directory below, but cannot list.
			return nil, fmt.Errorf("scratch directory: %w", err)
		}
		if err := canEnter(root, ra); err != nil {
			return nil, fmt.Errorf("scratch directory: %w", err)
		}
		if err := canExec(prog, ra); err != nil {
			return nil, fieldf("command[0]", "%w", err)
		}
		if err := canExec(shell, ra); err != nil {
			return nil, fmt.Errorf("run-as needs %s to set the program's rlimits: %w", shell, err)
		}
	}
	pathEnv := os.Getenv("PATH")
	if pathEnv == "" {
		pathEnv = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	c := &command{
		name: name, path: prog, argv: cj.Command, timeout: timeout,
		memBytes: uint64(mem) << 20, env: env, pathEnv: pathEnv,
		scratch: scratch, runs: l.runs, runAs: l.runAs,
		baseDir: baseDir, maxOut: l.cfg.maxOutput, log: l.cfg.log,
		prologue: l.runAs != nil || shellUsable(),
	}
	return c, nil
}

// shell runs the prologue that sets a program's rlimits before it runs.
const shell = "/bin/sh"

// shellUsable reports whether shell is an executable file (an image
// without one, FROM scratch, runs programs with prlimit(2) instead).
// It is a variable so that a test can take the other way.
var shellUsable = func() bool {
	fi, err := os.Stat(shell)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// newCmd builds the exec.Cmd of one call: shell running a fixed prologue
// that lowers its own rlimits (which needs no privilege) and then execs
// the program, in the same process, with the arguments passed as
// positional parameters: the shell never interprets them, and the program
// sees its absolute path as argv[0]. The limits are so in place before
// the program's first instruction: set after it started, an address-space
// limit below what its runtime has reserved by then makes its next
// allocation fail (a Go program reserves over 1 GiB at start, and died
// "out of memory" at random under the default memory_mb when prlimit(2)
// came late). Without shell (and without a run-as user) it is the program
// itself (argv[0] as written), whose rlimits run sets with prlimit(2)
// right after it starts.
func (c *command) newCmd(ctx context.Context, cpuSeconds uint64) *exec.Cmd {
	if !c.prologue {
		cmd := exec.CommandContext(ctx, c.path, c.argv[1:]...)
		cmd.Args[0] = c.argv[0]
		return cmd
	}
	// The shell exports PWD: unset, the program's environment is the
	// node's own choice alone (run).
	prologue := fmt.Sprintf(`unset PWD OLDPWD && ulimit -c 0 && ulimit -v %d && ulimit -S -t %d && ulimit -H -t %d && exec "$0" "$@"`,
		c.memBytes>>10, cpuSeconds, cpuSeconds+1)
	return exec.CommandContext(ctx, shell, append([]string{"-c", prologue, c.path}, c.argv[1:]...)...)
}

// lookPath resolves a program the way exec.LookPath does, refusing a
// match through a relative PATH entry (exec.ErrDot), and returns an
// absolute path: calls run in a scratch directory, not the node's.
func lookPath(prog, baseDir string) (string, error) {
	if strings.ContainsRune(prog, filepath.Separator) && !filepath.IsAbs(prog) && baseDir != "" {
		prog = filepath.Join(baseDir, prog)
	}
	p, err := exec.LookPath(prog)
	if err != nil {
		var ee *exec.Error
		switch {
		case errors.Is(err, exec.ErrDot):
			return "", fmt.Errorf("program %q is only found relative to the current directory", prog)
		case errors.Is(err, exec.ErrNotFound):
			return "", fmt.Errorf("program %q: %w", prog, exec.ErrNotFound)
		case errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("program %q does not exist", prog)
		case errors.Is(err, fs.ErrPermission):
			return "", fmt.Errorf("program %q is not an executable file", prog)
		case errors.As(err, &ee):
			return "", fmt.Errorf("program %q: %w", prog, ee.Err)
		}
		return "", err
	}
	return filepath.Abs(p)
}

func (c *command) fail(format string, a ...any) error {
	return protocol.Errorf(protocol.CodeToolExecution, "command skill %q: "+format, append([]any{c.name}, a...)...)
}

// run executes one call: a slot of the run semaphore (or an immediate
// CodeRateLimited refusal), a fresh scratch directory, the program in its
// own process group with rlimits, as the run-as user if one is set, with a
// scrubbed environment, the arguments on stdin and a JSON object on stdout.
// Whatever happens, the whole process group is killed and the scratch
// directory removed before run returns and frees its slot.
func (c *command) run(ctx context.Context, args json.RawMessage) (any, error) {
	if ctx.Err() != nil {
		return nil, c.fail("canceled")
	}
	select {
	case c.runs <- struct{}{}:
		defer func() { <-c.runs }()
	default:
		return nil, protocol.Errorf(protocol.CodeRateLimited,
			"command skill %q: too many command runs at once (limit %d); try again later", c.name, cap(c.runs))
	}
	dir, err := os.MkdirTemp(c.scratch, "mcpv2-call-")
	if err != nil {
		c.log.Warn("custom command: no scratch directory", "skill", c.name, "err", err)
		return nil, c.fail("cannot create a scratch directory")
	}
	defer c.removeScratch(dir)
	if c.runAs != nil {
		if err := os.Chown(dir, int(c.runAs.uid), int(c.runAs.gid)); err != nil {
			c.log.Warn("custom command: scratch directory not handed to the run-as user", "skill", c.name, "user", c.runAs.name, "err", err)
			return nil, c.fail("cannot create a scratch directory")
		}
	}

	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cpu := uint64(math.Ceil(c.timeout.Seconds()))
	cmd := c.newCmd(rctx, cpu)
	cmd.Dir = dir
	// The environment is built from nothing: the node's own (secrets,
	// OLDPWD, PWD and the like) never reaches the program.
	cmd.Env = append([]string{
		"PATH=" + c.pathEnv,
		"HOME=" + dir,
		"TMPDIR=" + dir,
		"LANG=C.UTF-8",
		"MCPV2_CALLER=" + skills.CallInfoFrom(ctx).Caller,
	}, c.env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, c.fail("cannot start the program")
	}
	stdout := &cappedBuffer{max: c.maxOut, onOverflow: cancel}
	stderr := &tailBuffer{keep: stderrKeep}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = waitDelay
	prepareCommand(cmd, c.runAs)

	// Pdeathsig (set by prepareCommand) fires when the OS thread that
	// forked the child exits, not the process: keep this goroutine on its
	// thread until the child is reaped (golang/go#27505).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		c.log.Debug("custom command did not start", "skill", c.name, "err", err)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, c.fail("cannot start the program: not found")
		case errors.Is(err, fs.ErrPermission):
			return nil, c.fail("cannot start the program: permission denied")
		}
		return nil, c.fail("cannot start the program")
	}
	pid := cmd.Process.Pid
	// Sweep the group when done: a background process the program left
	// behind dies with the call.
	defer killGroup(pid)

	// Without the shell prologue (which set them before the program ran)
	// the limits apply from here on; the program has run unconstrained for
	// the few microseconds since exec. Its input is only written once they
	// are in place, so nothing a caller sends runs unconstrained. A run-as
	// user always has the prologue: prlimit(2) on another user's process
	// needs CAP_SYS_RESOURCE, which a container's root often lacks.
	if !c.prologue {
		if err := applyLimits(pid, c.memBytes, cpu); err != nil {
			_ = killGroup(pid)
			_ = cmd.Wait()
			c.log.Warn("custom command: rlimits not applied", "skill", c.name, "err", err)
			return nil, c.fail("cannot apply process limits")
		}
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := stdin.Write(args)
		wrote <- errors.Join(err, stdin.Close())
	}()
	waitErr := cmd.Wait()
	// Wait closed stdin after the program exited, which ends a blocked
	// Write; a program need not read its input, so the error is moot.
	<-wrote

	switch {
	case stdout.overflow:
		return nil, c.fail("output exceeds %d bytes", c.maxOut)
	case ctx.Err() != nil:
		return nil, c.fail("canceled")
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		return nil, c.fail("timed out after %v", c.timeout)
	}
	if waitErr != nil && !errors.Is(waitErr, exec.ErrWaitDelay) {
		tail := c.stderrTail(stderr.Bytes(), dir)
		c.log.Debug("custom command failed", "skill", c.name, "err", waitErr, "stderr", tail)
		var ee *exec.ExitError
		what := "failed"
		if errors.As(waitErr, &ee) {
			what = exitReason(ee)
		}
		if tail != "" {
			return nil, c.fail("%s: stderr: %s", what, tail)
		}
		return nil, c.fail("%s", what)
	}
	obj, why := jsonObject(stdout.buf.Bytes())
	if why != "" {
		return nil, c.fail("%s", why)
	}
	return obj, nil
}

// exitReason says how a program ended, for an error message.
func exitReason(ee *exec.ExitError) string {
	if sig, ok := exitSignal(ee); ok {
		return fmt.Sprintf("killed by signal (%s)", sig)
	}
	return fmt.Sprintf("exit status %d", ee.ExitCode())
}

// stderrTail turns the kept stderr tail into a short one-line text fit for
// a remote caller: valid UTF-8, at most stderrShow bytes, with the
// host paths it knows of (scratch directory, program, skills file
// directory, the node's home directory) replaced. This is best effort: a program can print any path.
func (c *command) stderrTail(b []byte, dir string) string {
	s := strings.ToValidUTF8(string(b), "?")
	repl := []string{dir, "."}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dir {
		repl = append(repl, real, ".")
	}
	repl = append(repl, c.path, filepath.Base(c.path))
	if c.scratch != "" {
		repl = append(repl, c.scratch, "<scratch>")
	}
	if c.baseDir != "" {
		repl = append(repl, c.baseDir, "<skills-dir>")
	}
	if home, err := os.UserHomeDir(); err == nil && len(home) > 1 {
		repl = append(repl, home, "~")
	}
	s = strings.NewReplacer(repl...).Replace(s)
	var lines []string
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	s = strings.Join(lines, " | ")
	if len(s) > stderrShow {
		s = s[len(s)-stderrShow:]
		for i := 0; i < 4 && i < len(s); i++ { // do not start mid-rune
			if s[i]&0xC0 != 0x80 {
				s = s[i:]
				break
			}
		}
		s = "…" + s
	}
	return s
}

// removeScratch removes a call's scratch directory, making directories the
// program left unwritable writable first when a plain removal fails.
func (c *command) removeScratch(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		c.log.Warn("custom command: scratch directory not removed", "skill", c.name, "dir", dir, "err", err)
	}
}

// tailBuffer keeps the last keep bytes written to it.
type tailBuffer struct {
	keep int
	buf  []byte
}

// Write keeps the tail of what it is given; it never fails.
func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.keep {
		t.buf = append(t.buf[:0], p[len(p)-t.keep:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.keep; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// Bytes returns the kept tail.
func (t *tailBuffer) Bytes() []byte { return t.buf }

// runAs is the user command programs run as (WithRunAs).
type runAs struct {
	name     string
	uid, gid uint32
	groups   []uint32 // supplementary groups, the primary one included
}

// lookupRunAs resolves a run-as user by name, or by numeric uid when
// no user has that name. It returns nil when there is nothing to switch:
// the user is the node's own. Switching to another user needs root.
func lookupRunAs(name string) (*runAs, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if _, perr := strconv.ParseUint(name, 10, 32); perr == nil {
			u, err = user.LookupId(name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("run-as %q: no such user (%v)", name, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("run-as %q: uid %q is not numeric", name, u.Uid)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("run-as %q: gid %q is not numeric", name, u.Gid)
	}
	euid := os.Geteuid()
	if uint64(euid) == uid {
		return nil, nil
	}
	if euid != 0 {
		return nil, fmt.Errorf("run-as %q: switching users needs the node to run as root (it runs as uid %d)", name, euid)
	}
	ra := &runAs{name: u.Username, uid: uint32(uid), gid: uint32(gid), groups: []uint32{uint32(gid)}}
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil && uint32(g) != ra.gid {
				ra.groups = append(ra.groups, uint32(g))
			}
		}
	}
	return ra, nil
}
