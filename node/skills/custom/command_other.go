//go:build !linux

package custom

import (
	"errors"
	"os/exec"
)

// commandSupported reports whether command handlers can run here:
// they need Linux, whose prlimit(2) and process groups bound them.
func commandSupported() error {
	return errors.New(`"command" handlers need Linux (process-group and rlimit control)`)
}

func prepareCommand(*exec.Cmd, *runAs) {}

func mcpPrepareCommand(*exec.Cmd) {}

func canEnter(string, *runAs) error { return errors.ErrUnsupported }

func canExec(string, *runAs) error { return errors.ErrUnsupported }

func killGroup(int) error { return errors.ErrUnsupported }

func applyLimits(int, uint64, uint64) error { return errors.ErrUnsupported }

func exitSignal(*exec.ExitError) (string, bool) { return "", false }
