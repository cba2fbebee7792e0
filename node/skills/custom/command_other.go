//go:build !linux

package skills

import (
	"errors"
	"os/exec"
)

// customCommandSupported reports whether command handlers can run here:
// they need Linux, whose prlimit(2) and process groups bound them.
func customCommandSupported() error {
	return errors.New(`"command" handlers need Linux (process-group and rlimit control)`)
}

func customPrepareCommand(*exec.Cmd, *customRunAs) {}

func mcpPrepareCommand(*exec.Cmd) {}

func customCanEnter(string, *customRunAs) error { return errors.ErrUnsupported }

func customCanExec(string, *customRunAs) error { return errors.ErrUnsupported }

func customKillGroup(int) error { return errors.ErrUnsupported }

func customApplyLimits(int, uint64, uint64) error { return errors.ErrUnsupported }

func customSignal(*exec.ExitError) (string, bool) { return "", false }
