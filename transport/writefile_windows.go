//go:build windows

package transport

import (
	"errors"
	"os"
	"path/filepath"
)

// WriteFile replaces the file at path with data atomically: the data goes
// to a temp file in the same directory, which is synced and renamed over
// path (MoveFileEx with MOVEFILE_REPLACE_EXISTING). github.com/google/renameio
// does not build on Windows, hence this copy of its steps.
func WriteFile(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return errors.Join(err, f.Close())
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
