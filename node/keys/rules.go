package keys

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/mcpv2/mcpv2/protocol"
)

// secretBytes is how many random bytes a secret carries.
const secretBytes = 32

// secretLen is the length of a secret: the prefix and the unpadded
// base64url of secretBytes.
var secretLen = len(protocol.KeyPrefix) + base64.RawURLEncoding.EncodedLen(secretBytes)

// MaxGrants is the most grants one key may carry.
const MaxGrants = 256

// maxGrantLen is the longest grant (a skill name) a key may carry.
const maxGrantLen = 256

// MaxExpires is the longest expiry ParseExpires and Ring.Add take: 100
// years. A key that should not expire is given no expiry.
const MaxExpires = 100 * 365 * 24 * time.Hour

// newSecret returns a fresh secret: protocol.KeyPrefix and the unpadded
// base64url of 32 bytes from crypto/rand.
func newSecret() string {
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it crashes the program instead)
	return protocol.KeyPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// hashSecret is what the file stores of a secret.
func hashSecret(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// LooksLikeKey reports whether s has the shape of an API key's secret:
// protocol.KeyPrefix followed by exactly 43 characters of the base64url
// alphabet (A-Z, a-z, 0-9, '-', '_'). It looks at nothing else, so a face
// can tell a key from an edge session token or a JWT without a lookup;
// whether the key exists is VerifyKey's to say.
func LooksLikeKey(s string) bool {
	if len(s) != secretLen || !strings.HasPrefix(s, protocol.KeyPrefix) {
		return false
	}
	for i := len(protocol.KeyPrefix); i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// checkName says what is wrong with the key name name, nil if nothing.
func checkName(name string) error {
	if protocol.ValidKeyName(name) {
		return nil
	}
	return fmt.Errorf("key name %q: a name is 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'", name)
}

// checkGrants says what is wrong with the grants of a key, nil if
// nothing: each is a skill name or "*" (every skill), non-empty, at most
// 256 bytes, with no comma, white space or control character, and there
// are at most MaxGrants of them.
func checkGrants(grants []string) error {
	if len(grants) > MaxGrants {
		return fmt.Errorf("%d grants: a key carries at most %d", len(grants), MaxGrants)
	}
	for _, g := range grants {
		if g == "" {
			return errors.New(`a grant is empty: each grant is a skill name or "*"`)
		}
		if len(g) > maxGrantLen {
			return fmt.Errorf("grant %.40q…: longer than %d bytes", g, maxGrantLen)
		}
		if i := strings.IndexFunc(g, func(r rune) bool {
			return r == ',' || unicode.IsSpace(r) || unicode.IsControl(r) || r == '\uFFFD'
		}); i >= 0 {
			return fmt.Errorf(`grant %q: a grant is a skill name or "*", with no comma, white space or control character`, g)
		}
	}
	return nil
}

// ParseExpires parses how long a new key stays valid, as `mcpv2 key add
// --expires` takes it: a whole number of days ("30d") or weeks ("2w"), or
// anything time.ParseDuration takes ("12h", "90m", "1h30m"). "" and any
// zero ("0", "0d") mean the key never expires. A negative duration, or one
// longer than MaxExpires, is an error.
func ParseExpires(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	var d time.Duration
	if n, unit := s[:len(s)-1], s[len(s)-1]; (unit == 'd' || unit == 'w') && n != "" && strings.Trim(n, "0123456789") == "" {
		v, err := strconv.ParseInt(n, 10, 64)
		day := 24 * time.Hour
		if unit == 'w' {
			day *= 7
		}
		if err != nil || v > int64(MaxExpires/day) {
			return 0, fmt.Errorf("expiry %q is longer than %d days: give none for a key that never expires", s, MaxExpires/(24*time.Hour))
		}
		d = time.Duration(v) * day
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("expiry %q: want a number of days (30d), weeks (2w), hours (12h) or minutes (90m), or 0 for never", s)
		}
	}
	if d < 0 {
		return 0, fmt.Errorf("expiry %q is negative: want how long from now the key stays valid", s)
	}
	if d > MaxExpires {
		return 0, fmt.Errorf("expiry %q is longer than %d days: give none for a key that never expires", s, MaxExpires/(24*time.Hour))
	}
	return d, nil
}
