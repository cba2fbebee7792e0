package edge

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"

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
	t, err := protocol.VerifyToken(s.secret, tok, ip, now, skew)
	if err == nil {
		return t, protocol.CallerSecretHolder, nil
	}
	if !errors.Is(err, protocol.ErrTokenSignature) {
		return protocol.Token{}, 0, err
	}
	t, err = protocol.VerifyToken(s.anonKey, tok, ip, now, skew)
	if err != nil {
		return protocol.Token{}, 0, err
	}
	return t, protocol.CallerAnonymous, nil
}
