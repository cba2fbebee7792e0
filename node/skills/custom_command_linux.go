//go:build linux

package skills

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// customCommandSupported reports whether command handlers can run here.
func customCommandSupported() error { return nil }

// customPrepareCommand puts the program in its own process group (so the
// whole group can be killed), asks the kernel to kill it should this
// thread die (Pdeathsig; the caller keeps its goroutine locked to the
// thread until the child is reaped), and makes cancellation kill the whole
// group rather than the leader alone.
func customPrepareCommand(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return customKillGroup(cmd.Process.Pid) }
}

// customKillGroup sends SIGKILL to the process group led by pid. A group
// that is already gone is os.ErrProcessDone.
func customKillGroup(pid int) error {
	if pid <= 0 {
		return errors.New("no process group")
	}
	err := unix.Kill(-pid, unix.SIGKILL)
	if errors.Is(err, unix.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// customApplyLimits sets the rlimits of the running process pid with
// prlimit(2): address space (RLIMIT_AS) to memBytes, CPU time (RLIMIT_CPU)
// to cpuSeconds (SIGXCPU) with a hard limit one second later (SIGKILL), and
// no core files. They are inherited by whatever the program starts from
// then on. os/exec cannot set rlimits between fork and exec, so they are
// applied right after Start; a process that has already exited is not an
// error.
func customApplyLimits(pid int, memBytes, cpuSeconds uint64) error {
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

// customSignal returns the signal that ended the program, if one did.
func customSignal(ee *exec.ExitError) (string, bool) {
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
