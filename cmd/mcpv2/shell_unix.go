//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// setChildAttrs puts a peer that the shell starts in a process group of its
// own, so that a Ctrl-C at the terminal reaches the shell alone, which then
// stops its peers in order and says so.
func setChildAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killChild kills p's whole process group (p and whatever it started, such
// as custom skill commands), and p itself should the group be gone.
func killChild(p *os.Process) {
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	_ = p.Kill()
}
