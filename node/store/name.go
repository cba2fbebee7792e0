package store

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest file name accepted, in bytes (the common file
// system limit for one path component).
const MaxNameLen = 255

// tempPrefix starts the name of every temp file the store writes. List hides
// such names, Open removes them as stale, and users cannot choose them.
const tempPrefix = ".mcpv2-tmp-"

// ValidateName reports whether name is an acceptable file name: a plain name
// of 1 to MaxNameLen bytes of valid UTF-8, not "." or "..", with no '/' or
// '\\', no NUL or other control character, no volume name, local in the
// sense of filepath.IsLocal (which on Windows also refuses reserved names
// such as "NUL"), and not starting with a reserved prefix (temp files,
// partial uploads). The error wraps ErrInvalidName and quotes the name. It
// is a pure function, safe to call concurrently; Files also refuses names
// that are symlinks, which only the file system can tell.
func ValidateName(name string) error {
	if why := nameProblem(name); why != "" {
		return fmt.Errorf("store: name %s: %s: %w", quote(name), why, ErrInvalidName)
	}
	return nil
}

// nameProblem says what is wrong with name, or "" if nothing is.
func nameProblem(name string) string {
	switch {
	case name == "":
		return "empty"
	case len(name) > MaxNameLen:
		return "longer than " + strconv.Itoa(MaxNameLen) + " bytes"
	case !utf8.ValidString(name):
		return "not valid UTF-8"
	case name == "." || name == "..":
		return "not a plain name"
	case strings.ContainsAny(name, `/\`):
		return "contains a path separator"
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return "contains a control character"
	case filepath.IsAbs(name) || filepath.VolumeName(name) != "":
		return "is an absolute path"
	case !filepath.IsLocal(name):
		return "not a local name" // Windows reserved names such as NUL
	case strings.HasPrefix(name, tempPrefix):
		return "uses the reserved prefix " + strconv.Quote(tempPrefix)
	case strings.HasPrefix(name, partPrefix):
		return "uses the reserved prefix " + strconv.Quote(partPrefix)
	}
	return ""
}

// quote quotes a name for an error message, shortening a very long one.
func quote(name string) string {
	const max = 80
	if len(name) > max {
		return strconv.Quote(name[:max]) + "..."
	}
	return strconv.Quote(name)
}
