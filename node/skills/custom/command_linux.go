//go:build linux

package custom

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// commandSupported reports whether command handlers can run here.
func commandSupported() error { return nil }

// prepareCommand puts the program in its own process group (so the
// whole group can be killed), asks the kernel to kill it should this
// thread die (Pdeathsig; the caller keeps its goroutine locked to the
// thread until the child is reaped), and makes cancellation kill the whole
// group rather than the leader alone. With ra, the program runs as that
// user, its group and supplementary groups (set between fork and exec,
// before Pdeathsig, which a credential change would clear).
func prepareCommand(cmd *exec.Cmd, ra *runAs) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if ra != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: ra.uid, Gid: ra.gid, Groups: ra.groups}
	}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
}

// mcpPrepareCommand puts a custom MCP server in its own process group, so
// that what it leaves behind (npx's node, say) can be killed with it. No
// Pdeathsig: the server outlives the goroutine that started it; it ends
// when its stdin closes, as MCP servers do when the node dies.
func mcpPrepareCommand(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// canEnter checks, from the mode bits, that ra may search dir and
// every directory above it (after resolving symlinks), so that a program
// run as ra can be started in a directory below dir.
func canEnter(dir string, ra *runAs) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	for d := real; ; d = filepath.Dir(d) {
		if err := access(d, ra, 0o1); err != nil {
			return fmt.Errorf("user %s cannot enter %s: %w", ra.name, d, err)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// canExec checks, from the mode bits, that ra may execute prog
// (resolved through symlinks) and search every directory above it.
func canExec(prog string, ra *runAs) error {
	real, err := filepath.EvalSymlinks(prog)
	if err != nil {
		return err
	}
	if err := access(real, ra, 0o1); err != nil {
		return fmt.Errorf("program %q is not executable by user %s: %w", prog, ra.name, err)
	}
	if err := canEnter(filepath.Dir(real), ra); err != nil {
		return fmt.Errorf("program %q: %w", prog, err)
	}
	return nil
}

// access checks that the owner, group or other bits of path that
// apply to ra grant every bit of want (rwx as 4, 2, 1). ACLs and
// capabilities are not consulted: this is an early, clear failure for the
// common mistakes, the kernel has the last word at run time.
func access(path string, ra *runAs, want uint32) error {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return err
	}
	perm := st.Mode & 0o7
	switch {
	case st.Uid == ra.uid:
		perm = st.Mode >> 6 & 0o7
	case slices.Contains(ra.groups, st.Gid):
		perm = st.Mode >> 3 & 0o7
	}
	if perm&want != want {
		return fs.ErrPermission
	}
	return nil
}

// killGroup sends SIGKILL to the process group led by pid. A group
// that is already gone is os.ErrProcessDone.
func killGroup(pid int) error {
	if pid <= 0 {
		return errors.New("no process group")
	}
	err := unix.Kill(-pid, unix.SIGKILL)
	if errors.Is(err, unix.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// applyLimits sets the rlimits of the running process pid with
// prlimit(2): address space (RLIMIT_AS) to memBytes, CPU time (RLIMIT_CPU)
// to cpuSeconds (SIGXCPU) with a hard limit one second later (SIGKILL), and
// no core files. They are inherited by whatever the program starts from
// then on. os/exec cannot set rlimits between fork and exec, so they are
// applied right after Start; a process that has already exited is not an
// error.
func applyLimits(pid int, memBytes, cpuSeconds uint64) error {
	limits := []struct {
		name     string
		resource int
		lim      unix.Rlimit
	}{
		{"RLIMIT_AS", unix.RLIMIT_AS, unix.Rlimit{Cur: memBytes, Max: memBytes}},
		{"RLIMIT_CPU", unix.RLIMIT_CPU, unix.Rlimit{Cur: cpuSeconds, Max: cpuSeconds + 1}},
		{"RLIMIT_CORE", unix.RLIMIT_CORE, unix.Rlimit{Cur: 0, Max: 0}},
	}
	for _, l := range limits {
		if err := unix.Prlimit(pid, l.resource, &l.lim, nil); err != nil {
			if errors.Is(err, unix.ESRCH) {
				return nil
			}
			return fmt.Errorf("prlimit %s: %w", l.name, err)
		}
	}
	return nil
}

// exitSignal returns the signal that ended the program, if one did.
func exitSignal(ee *exec.ExitError) (string, bool) {
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return "", false
	}
	sig := ws.Signal()
	if name := unix.SignalName(sig); name != "" {
		return fmt.Sprintf("%s: %s", name, sig), true
	}
	return sig.String(), true
}
