//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// setChildAttrs leaves the child's attributes as they are where process
// groups do not exist.
func setChildAttrs(*exec.Cmd) {}

// killChild kills p.
func killChild(p *os.Process) { _ = p.Kill() }
