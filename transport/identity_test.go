package transport

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	cryptopb "github.com/libp2p/go-libp2p/core/crypto/pb"
)

func TestLoadOrCreateIdentityCreatesThenReloads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home", "mcpv2")
	path := filepath.Join(dir, "identity.key")

	key, err := LoadOrCreateIdentity(path)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if key.Type() != cryptopb.KeyType_Ed25519 {
		t.Fatalf("key type = %s, want Ed25519", key.Type())
	}
	if runtime.GOOS != "windows" {
		assertMode(t, path, 0o600)
		assertMode(t, dir, 0o700)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "identity.key" {
		t.Fatalf("directory holds %v, want only identity.key (no temporary file left)", entries)
	}

	again, err := LoadOrCreateIdentity(path)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	if !key.Equals(again) {
		t.Fatal("reloaded key differs from the created one")
	}

	other, err := LoadOrCreateIdentity(filepath.Join(dir, "other.key"))
	if err != nil {
		t.Fatal(err)
	}
	if key.Equals(other) {
		t.Fatal("two new identities are equal")
	}
}

func TestLoadOrCreateIdentityExistingDirKeepsMode(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "identity.key")
	if _, err := LoadOrCreateIdentity(path); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		assertMode(t, path, 0o600)
		assertMode(t, dir, 0o755) // an existing directory is not the package's to change
	}
}

func TestLoadOrCreateIdentityRefusesOpenMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes do not express access rights on Windows")
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660, 0o777} {
		t.Run(mode.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "identity.key")
			if _, err := LoadOrCreateIdentity(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, mode); err != nil {
				t.Fatal(err)
			}
			_, err := LoadOrCreateIdentity(path)
			if err == nil {
				t.Fatalf("mode %04o accepted", mode)
			}
			for _, want := range []string{path, "chmod 600", "transport: load identity:"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			// The refusal must not have replaced the key.
			if err := os.Chmod(path, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadOrCreateIdentity(path); err != nil {
				t.Fatalf("after chmod 600: %v", err)
			}
		})
	}
}

func TestLoadOrCreateIdentityRefusesBadFiles(t *testing.T) {
	secp, _, err := crypto.GenerateSecp256k1Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	secpBytes, err := crypto.MarshalPrivateKey(secp)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		content []byte
		want    string
	}{
		{"empty", nil, "corrupt"},
		{"garbage", []byte("this is not a key\n"), "corrupt"},
		{"truncated", secpBytes[:10], "corrupt"},
		{"huge", make([]byte, maxKeyFileSize+1), "corrupt"},
		{"secp256k1", secpBytes, "Ed25519 key is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "identity.key")
			if err := os.WriteFile(path, tc.content, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadOrCreateIdentity(path)
			if err == nil {
				t.Fatal("bad key file accepted")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name %s and say %q", err, path, tc.want)
			}
			// A bad file is never silently replaced by a new identity.
			got, err := os.ReadFile(path)
			if err != nil || string(got) != string(tc.content) {
				t.Fatalf("key file changed (err %v)", err)
			}
		})
	}
}

func TestLoadOrCreateIdentityRefusesDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "identity.key")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := LoadOrCreateIdentity(path)
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("err = %v, want a not-a-regular-file error", err)
	}
}

func TestLoadOrCreateIdentityUnwritableDir(t *testing.T) {
	// The parent "directory" is a regular file, so it cannot be created.
	parent := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(parent, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadOrCreateIdentity(filepath.Join(parent, "identity.key"))
	if err == nil || !strings.HasPrefix(err.Error(), "transport: ") {
		t.Fatalf("err = %v, want a transport error", err)
	}
	if _, err := LoadOrCreateIdentity(""); err == nil {
		t.Fatal("empty path accepted")
	}
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != want {
		t.Fatalf("%s mode = %04o, want %04o", path, got, want)
	}
}
