package store

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzFileName checks the name validator: it never panics, every refusal
// wraps ErrInvalidName, and an accepted name is a plain name that stays
// directly inside the directory.
func FuzzFileName(f *testing.F) {
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateName(name)
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("ValidateName(%q) = %v, not ErrInvalidName", name, err)
			}
			return
		}
		switch {
		case name == "", name == ".", name == "..":
			t.Fatalf("accepted %q", name)
		case strings.ContainsAny(name, "/\\\x00"):
			t.Fatalf("accepted %q with a separator or NUL", name)
		case len(name) > MaxNameLen, !utf8.ValidString(name):
			t.Fatalf("accepted %q: too long or not UTF-8", name)
		case strings.HasPrefix(name, tempPrefix):
			t.Fatalf("accepted the reserved prefix: %q", name)
		case !filepath.IsLocal(name):
			t.Fatalf("accepted non-local %q", name)
		}
		for _, r := range name {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("accepted %q with a control character", name)
			}
		}
		base := filepath.FromSlash("/srv/files")
		if p := filepath.Join(base, name); filepath.Dir(p) != base || filepath.Base(p) != name {
			t.Fatalf("accepted %q, which joins to %q", name, p)
		}
	})
}
