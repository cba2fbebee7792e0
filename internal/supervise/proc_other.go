//go:build !unix

package supervise

import (
	"os"
	"os/exec"
)

// setChildAttrs leaves the child's attributes as they are where process
// groups do not exist.
func setChildAttrs(*exec.Cmd) {}

// killGroup kills p.
func killGroup(p *os.Process) { _ = p.Kill() }
