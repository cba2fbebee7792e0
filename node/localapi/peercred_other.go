//go:build !linux

package localapi

import (
	"io/fs"
	"net"
	"syscall"
)

// peerUID is -1 (unknown) outside Linux: there the socket's mode 0600 in
// a directory of the node's user alone keeps other users out.
func peerUID(*net.UnixConn) (int, error) { return -1, nil }

// owner returns the uid that owns fi's file.
func owner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
