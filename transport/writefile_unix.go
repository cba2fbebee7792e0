//go:build !windows

package transport

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// WriteFile replaces the file at path with data, mode 0600, atomically: a
// reader opens the old file or the new one, never a part of either, and a
// crash leaves one of the two. The temp file in the same directory is
// fsynced before the rename (renameio), and the directory after it, so
// that the rename itself survives a crash. It is the project's one atomic
// writer (the identity key, the peer cache, keys.json).
func WriteFile(path string, data []byte) error {
	// The permissions are static (umask ignored): the files hold keys and
	// hashes of credentials, and a umask of 0 must not make them
	// world-readable.
	t, err := renameio.NewPendingFile(path, renameio.WithStaticPermissions(0o600))
	if err != nil {
		return err
	}
	defer t.Cleanup()
	if _, err := t.Write(data); err != nil {
		return err
	}
	if err := t.CloseAtomicallyReplace(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir fsyncs the directory dir, making a rename in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
