//go:build !linux

package main

import "os/exec"

// setDeathSignal does nothing off Linux: roles still exit when their stdin
// closes, and the bench needs /proc anyway.
func setDeathSignal(*exec.Cmd) {}
