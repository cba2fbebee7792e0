package edge

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"sync"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// Edge tokens come in two kinds that share one wire format (SPEC §5, §6).
// A secret holder's token is MACed with the node's secret itself, as the
// seed's client minted it. An anonymous session, issued by GET
// /mcpv2/session to anyone, is MACed with a key derived from the secret, so
// the token tells which it is, and no anonymous token verifies as a secret
// holder's (that would need the secret).

// anonymousKeyLabel separates the derived key from every other use of the
// secret; a change of it ends every anonymous session.
const anonymousKeyLabel = "mcpv2 edge anonymous session key v1"

// anonymousKey derives the HMAC key of anonymous sessions from secret.
func anonymousKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(anonymousKeyLabel))
	return m.Sum(nil)
}

// verifyToken checks tok for a caller seen from ip and says which kind of
// caller presented it: a secret holder when the secret MACs it, anonymous
// when the derived key does. Errors are VerifyToken's, from the check that
// got furthest (a token whose MAC matches neither key fails with
// ErrTokenSignature).
func (s *Server) verifyToken(tok, ip string) (protocol.Token, protocol.CallerKind, error) {
	now, skew := s.cfg.Now(), s.cfg.ClockSkew
	if t, kind, ok := s.verified.get(tok, ip, now); ok {
		return t, kind, nil
	}
	kind := protocol.CallerSecretHolder
	t, err := protocol.VerifyToken(s.secret, tok, ip, now, skew)
	if errors.Is(err, protocol.ErrTokenSignature) {
		kind = protocol.CallerAnonymous
		t, err = protocol.VerifyToken(s.anonKey, tok, ip, now, skew)
	}
	if err != nil {
		return protocol.Token{}, 0, err
	}
	s.verified.put(tok, ip, t, kind, now)
	return t, kind, nil
}

// Verified tokens are remembered for a moment: a session sends many
// requests, and an anonymous one cost two HMACs each (the secret's, then the
// derived key's).
const (
	// tokenCacheFor is how long a verified token is taken on trust.
	tokenCacheFor = time.Second
	// tokenCacheMax bounds the cache; past it the cache starts over.
	tokenCacheMax = 4096
)

// tokenCache holds tokens that verified, each with the IP it verified for,
// until tokenCacheFor has passed or the token expires, whichever is first;
// a token may only ever verify again once it has (its MAC, subject and
// issue time do not change), so the only check time can undo is expiry.
// mu guards m.
type tokenCache struct {
	mu sync.Mutex
	m  map[string]cachedToken
}

type cachedToken struct {
	ip    string
	t     protocol.Token
	kind  protocol.CallerKind
	until time.Time
}

func (c *tokenCache) get(tok, ip string, now time.Time) (protocol.Token, protocol.CallerKind, bool) {
	c.mu.Lock()
	e, ok := c.m[tok]
	c.mu.Unlock()
	if !ok || e.ip != ip || !now.Before(e.until) {
		return protocol.Token{}, 0, false
	}
	return e.t, e.kind, true
}

func (c *tokenCache) put(tok, ip string, t protocol.Token, kind protocol.CallerKind, now time.Time) {
	until := now.Add(tokenCacheFor)
	if exp := t.ExpiresAt(); exp.Before(until) {
		until = exp
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= tokenCacheMax {
		c.m = make(map[string]cachedToken)
	}
	c.m[tok] = cachedToken{ip: ip, t: t, kind: kind, until: until}
}
