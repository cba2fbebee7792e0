package localapi

import (
	"fmt"
	"io/fs"
	"os"
)

// CheckPrivate refuses what a user other than this process's (effective)
// user and root could change: fi, the FileInfo of path (os.Stat, or Stat
// of the opened file), must belong to this user or to root, and be
// writable by neither its group nor others. A directory with the sticky
// bit (as /tmp) that others may write is accepted: they may add entries
// there but not replace or remove ours. what names the thing in the error
// ("the config file"), which says how to fix it.
//
// It is the one rule for what mcpv2 trusts on disk: the control socket's
// directory (Listen) and the config file (cmd/mcpv2).
func CheckPrivate(what, path string, fi fs.FileInfo) error {
	euid := os.Geteuid()
	if uid, ok := owner(fi); ok && uid != euid && uid != 0 {
		return fmt.Errorf("%s %s belongs to uid %d, not to this user (uid %d) or root, and its owner could change it: chown %d %s, or run mcpv2 as uid %d", what, path, uid, euid, euid, path, uid)
	}
	perm := fi.Mode().Perm()
	if perm&0o022 != 0 && !(fi.IsDir() && fi.Mode()&fs.ModeSticky != 0) {
		return fmt.Errorf("%s %s is writable by others (mode %04o), who could change it: chmod go-w %s", what, path, perm, path)
	}
	return nil
}
