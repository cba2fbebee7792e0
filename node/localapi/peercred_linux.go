package localapi

import (
	"io/fs"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerUID returns the user of the process at the other end of c
// (SO_PEERCRED).
func peerUID(c *net.UnixConn) (int, error) {
	sc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := sc.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return -1, err
	}
	if cerr != nil {
		return -1, cerr
	}
	return int(cred.Uid), nil
}

// owner returns the uid that owns fi's file.
func owner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
