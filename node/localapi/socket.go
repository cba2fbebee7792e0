package localapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// maxSunPath is the longest unix socket path that bind and connect take
// (sun_path is 108 bytes on Linux, 104 on the BSDs, with its NUL).
const maxSunPath = 103

// ErrNodeRunning is the error of Listen when a node answers on the socket
// already.
var ErrNodeRunning = errors.New("a node already serves the control socket")

// Listen makes the control socket at path and listens on it, for peers of
// this process's user (and root) only:
//
//   - path's directory must belong to this user (or root) and be writable
//     by no one else, or be sticky (CheckPrivate): else another user could
//     swap the socket;
//   - the socket is bound in a new 0700 directory beside it, set to 0600
//     and renamed into place, so it is never reachable by others whatever
//     the umask;
//   - a socket already at path is replaced only when a dial to it is
//     refused (a node that died without removing it); a node that answers
//     there is ErrNodeRunning, and a file that is no socket is refused;
//   - each accepted connection's peer user is checked (SO_PEERCRED on
//     Linux) and other users' connections are closed unanswered.
//
// A path longer than a socket address takes (about 104 bytes) is bound
// and dialled through /proc/self/fd on Linux; elsewhere it is an error
// that says so. Closing the listener does not remove path. log (nil:
// discard) gets the replacement of a stale socket and each refusal.
func Listen(path string, log *slog.Logger) (net.Listener, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, name := filepath.Split(path)
	dir = filepath.Clean(dir)
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	if err := checkExisting(path, log); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(dir, ".control-")
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	defer os.RemoveAll(tmp)
	bound := filepath.Join(tmp, name)
	var ln *net.UnixListener
	err = withShortPath(bound, func(addr string) error {
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
		if err != nil {
			return err
		}
		ln = l
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false) // bound elsewhere: the API removes path itself
	fail := func(err error) (net.Listener, error) {
		ln.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := os.Chmod(bound, 0o600); err != nil {
		return fail(err)
	}
	if err := os.Rename(bound, path); err != nil {
		return fail(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fail(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		os.Remove(path)
		return fail(fmt.Errorf("is %v after it was made, want a 0600 socket", fi.Mode()))
	}
	return &credListener{UnixListener: ln, uid: os.Geteuid(), log: log}, nil
}

// checkDir refuses a directory that another user could change
// (CheckPrivate): they could replace the socket.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("control socket: %s is not a directory", dir)
	}
	if err := CheckPrivate("the directory", dir, fi); err != nil {
		return fmt.Errorf("control socket (another user could replace it): %w", err)
	}
	return nil
}

// checkExisting looks at what is at path already: nothing, or a stale
// socket, is fine (the rename replaces it); a live socket or another file
// is an error.
func checkExisting(path string, log *slog.Logger) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("control socket: %s exists and is not a socket (%v): move it away", path, fi.Mode().Type())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := dialSocket(ctx, path)
	if err == nil {
		c.Close()
		return fmt.Errorf("control socket %s: %w (is another mcpv2 using this data dir?)", path, ErrNodeRunning)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("control socket %s: exists, and a dial to it failed (%w): remove it if no node runs", path, err)
	}
	log.Info("local API: replacing the control socket of a node that is gone", "socket", path)
	return nil
}

// dialSocket connects to the unix socket at path (through withShortPath).
func dialSocket(ctx context.Context, path string) (net.Conn, error) {
	var c net.Conn
	err := withShortPath(path, func(addr string) error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "unix", addr)
		return err
	})
	return c, err
}

// withShortPath calls fn with a socket address for path: path itself when
// it fits in a socket address, else (Linux) /proc/self/fd/N/NAME with N an
// open descriptor of path's directory, valid while fn runs.
func withShortPath(path string, fn func(addr string) error) error {
	if len(path) <= maxSunPath {
		return fn(path)
	}
	if runtime.GOOS != "linux" {
		return fmt.Errorf("the path is %d bytes, longer than a unix socket address takes (%d): use a shorter --data-dir", len(path), maxSunPath)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	sc, err := d.SyscallConn()
	if err != nil {
		return err
	}
	var fd uintptr
	if err := sc.Control(func(f uintptr) { fd = f }); err != nil {
		return err
	}
	addr := fmt.Sprintf("/proc/self/fd/%d/%s", fd, filepath.Base(path))
	if len(addr) > maxSunPath {
		return fmt.Errorf("the path is %d bytes, longer than a unix socket address takes (%d): use a shorter --data-dir", len(path), maxSunPath)
	}
	err = fn(addr)
	runtime.KeepAlive(d)
	return err
}

// credListener closes the connections of other users than uid (and
// root).
type credListener struct {
	*net.UnixListener
	uid int
	log *slog.Logger
}

// Accept returns the next connection of this user or root, closing
// others'.
func (l *credListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		uid, err := peerUID(c)
		if err != nil {
			l.log.Warn("local API: refused a connection: its user is unknown", "err", err)
			c.Close()
			continue
		}
		if uid >= 0 && uid != l.uid && uid != 0 {
			l.log.Warn("local API: refused a connection of another user", "uid", uid)
			c.Close()
			continue
		}
		return c, nil
	}
}
