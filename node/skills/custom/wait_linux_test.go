//go:build linux

package custom

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitDir waits, at most d, until cond holds, looking again whenever an
// entry of dir is created, moved in or written (inotify). It reports
// whether cond holds. It may be called from any goroutine: it reports its
// own failures with t.Errorf.
func waitDir(t *testing.T, dir string, d time.Duration, cond func() bool) bool {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Errorf("inotify: %v", err)
		return cond()
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE); err != nil {
		t.Errorf("inotify %s: %v", dir, err)
		return cond()
	}
	deadline := time.Now().Add(d)
	buf := make([]byte, 4096)
	for !cond() {
		left := time.Until(deadline)
		if left <= 0 {
			return cond()
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Errorf("poll inotify: %v", err)
			return cond()
		}
		if n > 0 {
			_, _ = unix.Read(fd, buf) // the events only say: look again
		}
	}
	return true
}

// waitExit waits, at most d, for process pid to exit (its pidfd becomes
// readable; a zombie has exited) and reports whether it did. A pid that
// is gone already has exited.
func waitExit(pid int, d time.Duration) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true
	}
	if err != nil {
		return waitExitPolling(pid, d)
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(d)
	for {
		left := max(time.Until(deadline), 0)
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0
	}
}

// waitExitPolling is waitExit where the kernel has no pidfd (before Linux
// 5.3): a bounded poll, as no other event says that a process that is not
// this one's child exited.
func waitExitPolling(pid int, d time.Duration) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d)
	for !processGone(pid) {
		select {
		case <-tick.C:
		case <-deadline:
			return processGone(pid)
		}
	}
	return true
}
