package main

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill cmd when the bench dies, however it
// dies (a panic in a goroutine, SIGKILL), so that no server outlives a run.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
