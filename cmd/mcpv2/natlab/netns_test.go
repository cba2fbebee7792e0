//go:build linux

package natlab

import (
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// Sockets inside the lab's namespaces, made by the test process itself,
// which stays in its own namespace.
//
// A socket belongs to the network namespace of the thread that made it,
// so natlabInNetns moves a locked thread there for the call and back
// afterwards. It must not end the thread instead (by leaving it locked
// when its goroutine exits), as the runtime would then do: the lab's
// processes are started with Pdeathsig, which Linux sends when the
// *thread* that forked them ends, and any thread may have forked one.

// natlabInNetns runs f on a thread moved into the network namespace ns,
// then moves the thread back and unlocks it. Were the thread not moved
// back, its goroutine exits still locked and the thread ends with it.
func natlabInNetns(ns string, f func()) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer unix.Close(self)
		fd, err := unix.Open(filepath.Join("/var/run/netns", ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		f()
		if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("setns back from %s: %w", ns, err) // stays locked: the thread ends
			return
		}
		runtime.UnlockOSThread()
		done <- nil
	}()
	return <-done
}

// natlabListenIn opens a TCP listener on addr inside the network namespace
// ns.
func natlabListenIn(t *testing.T, ns, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	err := natlabInNetns(ns, func() {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			t.Errorf("listen on %s in %s: %v", addr, ns, err)
		}
	})
	if err != nil || ln == nil {
		t.Fatalf("listen on %s in %s: %v", addr, ns, err)
	}
	return ln
}
