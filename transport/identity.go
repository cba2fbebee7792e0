package transport

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/libp2p/go-libp2p/core/crypto"
	cryptopb "github.com/libp2p/go-libp2p/core/crypto/pb"
)

// maxKeyFileSize bounds how much of a key file is read. A marshalled Ed25519
// key is 68 bytes; anything near this size is not a key file.
const maxKeyFileSize = 4 << 10

// LoadOrCreateIdentity returns the Ed25519 private key stored at path,
// creating it on first use.
//
// The file holds the key in libp2p's protobuf encoding
// ([crypto.MarshalPrivateKey]), the format Kubo and other libp2p daemons use.
// A new key is written atomically (a temporary file in the same directory,
// fsync, rename, fsync of the directory) with mode 0600; a missing parent
// directory is created with mode 0700. An existing file is refused when its
// mode allows any group or other access (the error names the file and says to
// run chmod 600), when it is not a regular file, when it cannot be decoded,
// and when it holds a key that is not Ed25519. On Windows the mode check is
// skipped, as file modes there do not express access rights.
//
// Two processes creating the same missing file at the same instant may each
// get a different key, the last rename winning on disk; a data directory is
// meant to be used by one node at a time.
func LoadOrCreateIdentity(path string) (crypto.PrivKey, error) {
	if path == "" {
		return nil, errors.New("transport: load identity: empty key file path")
	}
	key, err := loadIdentity(path)
	if err == nil {
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return createIdentity(path)
}

// loadIdentity reads and checks an existing key file. A missing file yields an
// error matching fs.ErrNotExist.
func loadIdentity(path string) (crypto.PrivKey, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("transport: load identity: %w", err)
	}
	defer f.Close()

	// Stat the open file, not the path, so the checked file is the read one.
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("transport: load identity: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("transport: load identity: key file %s is not a regular file (mode %s)", path, info.Mode())
	}
	if perm := info.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return nil, fmt.Errorf("transport: load identity: key file %s has mode %04o, which lets group or other users access the private key; run `chmod 600 %s`", path, perm, path)
	}

	data, err := io.ReadAll(io.LimitReader(f, maxKeyFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("transport: load identity: read %s: %w", path, err)
	}
	if len(data) > maxKeyFileSize {
		return nil, fmt.Errorf("transport: load identity: key file %s is corrupt: larger than %d bytes, not a libp2p private key", path, maxKeyFileSize)
	}
	key, err := crypto.UnmarshalPrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("transport: load identity: key file %s is corrupt (not a libp2p private key; move it away to create a new identity): %w", path, err)
	}
	if key.Type() != cryptopb.KeyType_Ed25519 {
		return nil, fmt.Errorf("transport: load identity: key file %s holds a %s key; an Ed25519 key is required", path, key.Type())
	}
	return key, nil
}

// createIdentity generates an Ed25519 key and writes it atomically to path.
func createIdentity(path string) (crypto.PrivKey, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("transport: create identity: %w", err)
	}
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("transport: create identity: generate key: %w", err)
	}
	data, err := crypto.MarshalPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("transport: create identity: marshal key: %w", err)
	}
	if err := WriteFile(path, data); err != nil {
		return nil, fmt.Errorf("transport: create identity: %w", err)
	}
	return key, nil
}
