//go:build unix && !linux

package custom

import (
	"syscall"
	"time"
)

// waitExit waits, at most d, for process pid to exit and reports whether
// it did. Without Linux's pidfd no event says that a process that is not
// this one's child exited: a bounded poll.
func waitExit(pid int, d time.Duration) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d)
	for syscall.Kill(pid, 0) == nil {
		select {
		case <-tick.C:
		case <-deadline:
			return syscall.Kill(pid, 0) != nil
		}
	}
	return true
}
