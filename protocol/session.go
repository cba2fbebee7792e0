package protocol

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Session token errors. Every VerifyToken failure wraps ErrInvalidSession and
// one of the more precise reasons below.
var (
	// ErrInvalidSession is wrapped by every token refusal.
	ErrInvalidSession = errors.New("invalid session")
	// ErrTokenMalformed means the token is not payload.hmac of the spec's form.
	ErrTokenMalformed = errors.New("malformed token")
	// ErrTokenSignature means the HMAC does not match: tampered, or another
	// secret. Its text is what the edge and the mesh answer.
	ErrTokenSignature = errors.New("bad signature: the token was altered, or minted by a node with another secret")
	// ErrTokenExpired means now is past issued_at + ttl.
	ErrTokenExpired = errors.New("expired")
	// ErrTokenFuture means issued_at is beyond now + the allowed clock skew.
	ErrTokenFuture = errors.New("issued in the future")
	// ErrTokenSubject means the token was minted for another IP or PeerID.
	ErrTokenSubject = errors.New("minted for another caller")
)

// DefaultClockSkew is how far in the future issued_at may be (MCPV2_CLOCK_SKEW).
const DefaultClockSkew = 300 * time.Second

// maxTokenLen caps what VerifyToken reads.
const maxTokenLen = 1024

// Token is the decoded payload of a session token:
// "<subject>:<nonce>:<issued_at>:<ttl>", where subject is the caller's IP on
// the edge and its PeerID on the mesh.
type Token struct {
	Subject  string
	Nonce    string
	IssuedAt int64 // unix seconds
	TTL      int64 // seconds
}

// ExpiresAt is when the token stops being valid.
func (t Token) ExpiresAt() time.Time { return time.Unix(t.IssuedAt+t.TTL, 0) }

// MintToken returns a token for subject valid for ttl from now:
// base64url(payload) + "." + hex(HMAC_SHA256(secret, payload)).
func MintToken(secret []byte, subject string, now time.Time, ttl time.Duration) (string, Token) {
	t := Token{Subject: subject, Nonce: newNonce(), IssuedAt: now.Unix(), TTL: int64(ttl / time.Second)}
	return EncodeToken(secret, t), t
}

// newNonce returns 16 random bytes in hex.
func newNonce() string {
	var nb [16]byte
	_, _ = rand.Read(nb[:])
	return hex.EncodeToString(nb[:])
}

// b64 is the payload's encoding in a token.
func b64(payload string) string { return base64.RawURLEncoding.EncodeToString([]byte(payload)) }

// EncodeToken signs t with secret. Tests use it to build expired, future or
// tampered tokens.
func EncodeToken(secret []byte, t Token) string {
	payload := fmt.Sprintf("%s:%s:%d:%d", t.Subject, t.Nonce, t.IssuedAt, t.TTL)
	return b64(payload) + "." + hex.EncodeToString(sign(secret, payload))
}

func sign(secret []byte, payload string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// ParseToken decodes a token without checking its signature or times. It
// accepts only the form EncodeToken writes (lower-case hex MAC of 64 digits,
// canonical decimal numbers, strict base64url), plus the correctly padded
// base64url that the seed's Python clients send, so that a valid token cannot
// be altered into another string that also verifies.
func ParseToken(tok string) (Token, string, error) {
	malformed := func(why string) (Token, string, error) {
		return Token{}, "", fmt.Errorf("%w: %w: %s", ErrInvalidSession, ErrTokenMalformed, why)
	}
	if len(tok) > maxTokenLen {
		return malformed(fmt.Sprintf("longer than %d bytes", maxTokenLen))
	}
	b64, mac, ok := strings.Cut(tok, ".")
	if !ok || b64 == "" || mac == "" {
		return malformed("want base64url(payload).hex(hmac)")
	}
	if len(mac) != hex.EncodedLen(sha256.Size) || strings.Trim(mac, "0123456789abcdef") != "" {
		return malformed("the mac must be 64 lower-case hex digits")
	}
	enc := base64.RawURLEncoding.Strict()
	if strings.HasSuffix(b64, "=") {
		enc = base64.URLEncoding.Strict() // the seed's clients pad
	}
	raw, err := enc.DecodeString(b64)
	if err != nil || strings.ContainsAny(b64, "\r\n") { // the decoder skips CR and LF
		return malformed("payload is not base64url")
	}
	payload := string(raw)
	// Split from the right: the subject may be an IPv6 address with colons.
	parts := strings.Split(payload, ":")
	if len(parts) < 4 {
		return malformed("payload needs subject:nonce:issued_at:ttl")
	}
	n := len(parts)
	issued, ok1 := positiveInt(parts[n-2])
	ttl, ok2 := positiveInt(parts[n-1])
	if !ok1 || !ok2 {
		return malformed("issued_at and ttl must be positive integers")
	}
	t := Token{Subject: strings.Join(parts[:n-3], ":"), Nonce: parts[n-3], IssuedAt: issued, TTL: ttl}
	if t.Subject == "" || t.Nonce == "" {
		return malformed("empty subject or nonce")
	}
	return t, payload, nil
}

// positiveInt parses a positive decimal integer written as %d writes it: no
// sign, no leading zero.
func positiveInt(s string) (int64, bool) {
	if s == "" || s[0] < '1' || s[0] > '9' || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// VerifyToken checks tok against secret, the expected subject, now and the
// allowed clock skew (SPEC §5). It returns the decoded token when valid.
func VerifyToken(secret []byte, tok, subject string, now time.Time, skew time.Duration) (Token, error) {
	t, payload, err := ParseToken(tok)
	if err != nil {
		return Token{}, err
	}
	_, mac, _ := strings.Cut(tok, ".")
	got, err := hex.DecodeString(mac)
	if err != nil || !hmac.Equal(got, sign(secret, payload)) {
		return Token{}, fmt.Errorf("%w: %w", ErrInvalidSession, ErrTokenSignature)
	}
	nowS := now.Unix()
	switch {
	case t.IssuedAt > nowS+int64(skew/time.Second):
		return Token{}, fmt.Errorf("%w: %w", ErrInvalidSession, ErrTokenFuture)
	case t.TTL > 0 && nowS > t.IssuedAt+t.TTL:
		return Token{}, fmt.Errorf("%w: %w", ErrInvalidSession, ErrTokenExpired)
	case t.IssuedAt+t.TTL < t.IssuedAt: // overflow
		return Token{}, fmt.Errorf("%w: %w", ErrInvalidSession, ErrTokenExpired)
	case t.Subject != subject:
		return Token{}, fmt.Errorf("%w: %w", ErrInvalidSession, ErrTokenSubject)
	}
	return t, nil
}
