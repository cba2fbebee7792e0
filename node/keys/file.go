package keys

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpv2/mcpv2/protocol"
)

// MaxFileSize is the largest keys.json a Ring reads (1 MiB): some thousands
// of keys.
const MaxFileSize = 1 << 20

// fileVersion is the version of the keys.json format this package reads
// and writes.
const fileVersion = 1

// fileJSON is keys.json.
type fileJSON struct {
	Version int       `json:"version"`
	Keys    []keyJSON `json:"keys"`
}

// keyJSON is one key of keys.json. Times are RFC 3339 strings, parsed by
// parse so that a bad one is reported with the key it belongs to.
type keyJSON struct {
	Name    string   `json:"name"`
	SHA256  string   `json:"sha256"`
	Grants  []string `json:"grants"`
	Created string   `json:"created"`
	Expires string   `json:"expires,omitempty"`
	Revoked string   `json:"revoked,omitempty"`
}

// parse decodes the keys.json text data; name (the file's path) starts
// every error. It refuses unknown and repeated members, invalid UTF-8, text
// after the object, a version other than 1, and any key that is not valid
// (see checkKey), or whose name or hash another key has.
func parse(name string, data []byte) ([]Key, error) {
	var f fileJSON
	// JSON v2 (what Go ships as encoding/json/v2) refuses a repeated member
	// name and invalid UTF-8 by default, where encoding/json takes the last
	// member and replaces bad bytes: a hand-edited file with two "sha256"
	// members is an error, not a guess.
	if err := jsonv2.Unmarshal(data, &f, jsonv2.RejectUnknownMembers(true)); err != nil {
		return nil, fmt.Errorf("keys file %s: %s", name, jsonErrorText(err))
	}
	if f.Version != fileVersion {
		return nil, fmt.Errorf("keys file %s: version %d: this mcpv2 reads version %d", name, f.Version, fileVersion)
	}
	keys := make([]Key, 0, len(f.Keys))
	names := make(map[string]bool, len(f.Keys))
	sums := make(map[[32]byte]string, len(f.Keys))
	for i, kj := range f.Keys {
		k, err := fromJSON(kj)
		if err != nil {
			return nil, fmt.Errorf("keys file %s: key %d (%q): %w", name, i+1, kj.Name, err)
		}
		if names[k.Name] {
			return nil, fmt.Errorf("keys file %s: key %d: the name %q appears twice", name, i+1, k.Name)
		}
		if other, dup := sums[k.sum]; dup {
			return nil, fmt.Errorf("keys file %s: key %d (%q) has the sha256 of key %q", name, i+1, k.Name, other)
		}
		names[k.Name] = true
		sums[k.sum] = k.Name
		keys = append(keys, k)
	}
	return keys, nil
}

// jsonErrorText says what is wrong with the JSON that Unmarshal refused,
// naming the member at fault and no Go type.
func jsonErrorText(err error) string {
	var se *jsonv2.SemanticError
	if errors.As(err, &se) && errors.Is(err, jsonv2.ErrUnknownName) {
		where := ""
		if p := se.JSONPointer.Parent(); p != "" {
			where = fmt.Sprintf(" in %q", p)
		}
		return fmt.Sprintf("unknown member %q%s", se.JSONPointer.LastToken(), where)
	}
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		return "not valid JSON: " + strings.TrimPrefix(syn.Error(), "jsontext: ")
	}
	return protocol.JSONErrorText(err)
}

// fromJSON checks one key of the file and converts it.
func fromJSON(kj keyJSON) (Key, error) {
	k := Key{Name: kj.Name}
	if err := checkName(kj.Name); err != nil {
		return Key{}, err
	}
	if len(kj.SHA256) != 2*len(k.sum) {
		return Key{}, fmt.Errorf(`"sha256" must be %d hex digits (the SHA-256 of the secret), not %d characters`, 2*len(k.sum), len(kj.SHA256))
	}
	if _, err := hex.Decode(k.sum[:], []byte(kj.SHA256)); err != nil {
		return Key{}, fmt.Errorf(`"sha256" must be %d hex digits (the SHA-256 of the secret): %w`, 2*len(k.sum), err)
	}
	if kj.Grants != nil {
		if err := checkGrants(kj.Grants); err != nil {
			return Key{}, fmt.Errorf(`"grants": %w`, err)
		}
		k.Grants = append([]string(nil), kj.Grants...)
	}
	var err error
	if kj.Created == "" {
		return Key{}, errors.New(`"created" is missing`)
	}
	if k.Created, err = parseTime("created", kj.Created); err != nil {
		return Key{}, err
	}
	if kj.Expires != "" {
		if k.Expires, err = parseTime("expires", kj.Expires); err != nil {
			return Key{}, err
		}
	}
	if kj.Revoked != "" {
		if k.Revoked, err = parseTime("revoked", kj.Revoked); err != nil {
			return Key{}, err
		}
	}
	return k, nil
}

// parseTime parses the RFC 3339 time s of the member field. The time must
// fall in the years 1970 to 9999 (in UTC), which RFC 3339 can write.
func parseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: %q is not an RFC 3339 time (2026-12-01T10:00:00Z)", field, s)
	}
	if y := t.UTC().Year(); y < 1970 || y > 9999 {
		return time.Time{}, fmt.Errorf("%q: %q is outside the years 1970 to 9999", field, s)
	}
	return t.UTC(), nil
}

// encode returns the keys.json text of keys.
func encode(keys []Key) ([]byte, error) {
	f := fileJSON{Version: fileVersion, Keys: make([]keyJSON, 0, len(keys))}
	for _, k := range keys {
		kj := keyJSON{Name: k.Name, SHA256: hex.EncodeToString(k.sum[:]), Grants: k.Grants,
			Created: formatTime(k.Created), Expires: formatTime(k.Expires), Revoked: formatTime(k.Revoked)}
		if kj.Grants == nil {
			kj.Grants = []string{}
		}
		f.Keys = append(f.Keys, kj)
	}
	// Encoding stays with encoding/json (as protocol's does): it writes
	// what JSON v2 reads back.
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// formatTime writes t in RFC 3339 (UTC), "" for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// readFile reads and parses the keys file at path (see readRaw).
func readFile(path string) ([]Key, os.FileInfo, error) {
	data, fi, err := readRaw(path)
	if err != nil || fi == nil {
		return nil, fi, err
	}
	keys, err := parse(path, data)
	return keys, fi, err
}

// readRaw reads the keys file at path, at most MaxFileSize bytes, and
// returns its text and the FileInfo of what it read (from the open file, so
// that it describes the bytes read even if the file is replaced meanwhile).
// A missing file is no text and a nil FileInfo. An empty file is an error:
// the ring writes none, and one with no keys is best removed.
func readRaw(path string) ([]byte, os.FileInfo, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("keys file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("keys file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fi, fmt.Errorf("keys file %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	data, err := readCapped(f, fi.Size())
	if err != nil {
		return nil, fi, fmt.Errorf("keys file %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fi, fmt.Errorf("keys file %s: larger than %d bytes", path, MaxFileSize)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fi, fmt.Errorf("keys file %s: empty (remove it for a ring with no keys)", path)
	}
	return data, fi, nil
}

// readCapped reads r to its end or to MaxFileSize+1 bytes, whichever comes
// first, into a buffer sized for size bytes (the file's stat; a file that
// grew since is still read whole, up to the cap), as os.ReadFile does.
func readCapped(r io.Reader, size int64) ([]byte, error) {
	r = io.LimitReader(r, MaxFileSize+1)
	data := make([]byte, 0, min(max(size, 0), MaxFileSize)+1)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
