package protocol

import (
	"crypto/hmac"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Mesh session tokens (SPEC §6, version 2). A node that holds the shared
// --secret puts one in a slot's context.session to be treated by the
// receiving peer as a secret holder. Version 1 named only the sender, so a
// token handed to one peer could be replayed by that peer (or anyone it
// gave it to) against every other peer of the secret; version 2 names the
// receiver and the purpose too:
//
//	base64url("mcpv2-mesh-2:" sender ":" audience ":" purpose ":" nonce ":" issued_at ":" ttl) "." hex(HMAC_SHA256(secret, payload))
//
// An edge token (subject:nonce:issued_at:ttl) never verifies as a mesh
// token, nor the other way round: the payloads differ in their first field.

// meshTokenPrefix opens the payload of a version 2 mesh token.
const meshTokenPrefix = "mcpv2-mesh-2"

// Purposes of a mesh session: what the receiver may accept it for.
const (
	// PurposeRPC is a token for the slots of /mcpv2/rpc.
	PurposeRPC = "rpc"
	// PurposeBlob is a token for one /mcpv2/blob transfer.
	PurposeBlob = "blob"
)

// Mesh token refusals, beside the session errors of VerifyToken.
var (
	// ErrTokenAudience means the token was minted for another receiver or
	// another purpose.
	ErrTokenAudience = errors.New("minted for another peer or purpose")
	// ErrTokenVersion means a version 1 mesh token, which names no
	// receiver; its sender must be upgraded.
	ErrTokenVersion = errors.New("a version 1 mesh session (it names no receiver, so any peer it was sent to could replay it); upgrade the sending node")
)

// MeshToken is the decoded payload of a mesh session token.
type MeshToken struct {
	// Sender is the PeerID of the node that minted it.
	Sender string
	// Audience is the PeerID of the node it is for.
	Audience string
	// Purpose is PurposeRPC or PurposeBlob.
	Purpose  string
	Nonce    string
	IssuedAt int64 // unix seconds
	TTL      int64 // seconds
}

// MintMeshToken returns a mesh session token from sender to audience for
// purpose, valid for ttl from now.
func MintMeshToken(secret []byte, sender, audience, purpose string, now time.Time, ttl time.Duration) string {
	payload := fmt.Sprintf("%s:%s:%s:%s:%s:%d:%d", meshTokenPrefix, sender, audience, purpose, newNonce(), now.Unix(), int64(ttl/time.Second))
	return b64(payload) + "." + hex.EncodeToString(sign(secret, payload))
}

// VerifyMeshToken checks a mesh session token presented by sender to the
// node audience for purpose. Every refusal wraps ErrInvalidSession and a
// precise reason: ErrTokenVersion for a version 1 token, ErrTokenSubject
// for another sender, ErrTokenAudience for another receiver or purpose,
// and VerifyToken's others.
func VerifyMeshToken(secret []byte, tok, sender, audience, purpose string, now time.Time, skew time.Duration) (MeshToken, error) {
	inner, payload, err := ParseToken(tok)
	if err != nil {
		return MeshToken{}, err
	}
	_, mac, _ := strings.Cut(tok, ".")
	got, err := hex.DecodeString(mac)
	if err != nil || !hmac.Equal(got, sign(secret, payload)) {
		return MeshToken{}, fmt.Errorf("%w: %w", ErrInvalidSession, ErrTokenSignature)
	}
	f := strings.Split(inner.Subject, ":")
	if f[0] != meshTokenPrefix {
		return MeshToken{}, fmt.Errorf("%w: %w", ErrInvalidSession, ErrTokenVersion)
	}
	if len(f) != 4 || f[1] == "" || f[2] == "" || f[3] == "" {
		return MeshToken{}, fmt.Errorf("%w: %w: want %s:sender:audience:purpose:nonce:issued_at:ttl", ErrInvalidSession, ErrTokenMalformed, meshTokenPrefix)
	}
	t := MeshToken{Sender: f[1], Audience: f[2], Purpose: f[3], Nonce: inner.Nonce, IssuedAt: inner.IssuedAt, TTL: inner.TTL}
	nowS := now.Unix()
	switch {
	case t.IssuedAt > nowS+int64(skew/time.Second):
		return MeshToken{}, fmt.Errorf("%w: %w", ErrInvalidSession, ErrTokenFuture)
	case t.IssuedAt+t.TTL < t.IssuedAt || nowS > t.IssuedAt+t.TTL:
		return MeshToken{}, fmt.Errorf("%w: %w", ErrInvalidSession, ErrTokenExpired)
	case t.Sender != sender:
		return MeshToken{}, fmt.Errorf("%w: %w", ErrInvalidSession, ErrTokenSubject)
	case t.Audience != audience || t.Purpose != purpose:
		return MeshToken{}, fmt.Errorf("%w: %w", ErrInvalidSession, ErrTokenAudience)
	}
	return t, nil
}
