//go:build unix

package supervise

import (
	"os"
	"os/exec"
	"syscall"
)

// setChildAttrs puts the child in a process group of its own, so that a
// Ctrl-C at the terminal reaches the parent alone, which then stops its
// children in order.
func setChildAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills p's whole process group (p and whatever it started that
// stayed in that group; not a node's custom skill commands and MCP
// servers, which run in process groups of their own, see
// node/skills/custom), and p itself should the group be gone.
func killGroup(p *os.Process) {
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	_ = p.Kill()
}
