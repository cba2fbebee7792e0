package edge

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// The credentials of the edge (docs/spec.md §0). A request presents at most
// one, as the X-MCPV2-Session header, the sessionId query parameter or
// Authorization: Bearer; its shape says which kind it is:
//
//   - an API key starts with protocol.KeyPrefix ("mcpv2_");
//   - an OpenID Connect access token is a JWT (three base64url segments);
//   - anything else is an edge session token (SPEC §5).
//
// A request with none is an anonymous caller on the faces (MCP, A2A, the
// peer faces) unless the edge requires authentication, and is refused on
// the edge's own session endpoints (POST /mcpv2, /mcpv2/ai, the gateway,
// find, audit), as the seed's were.

// credential is what a request's credential proves about its caller.
type credential struct {
	kind       protocol.CallerKind
	id         string // the caller's ID; "" keeps "ip:<addr>"
	owner      string // protocol.Caller.Owner
	limit      string // the key of its request-rate bucket
	grants     []string
	principals []string
	nonce      string // an edge session's nonce ("" for other kinds)
	expires    time.Time
}

// presented returns the credential r carries, "" for none.
func presented(r *http.Request) string {
	if tok := r.Header.Get(SessionHeader); tok != "" {
		return tok
	}
	if tok := r.URL.Query().Get(SessionParam); tok != "" {
		return tok
	}
	if a, ok := cutBearer(r.Header.Get("Authorization")); ok {
		return a
	}
	return ""
}

// cutBearer returns the credential of an Authorization header of the
// Bearer scheme (the scheme's name is case-insensitive, RFC 7235).
func cutBearer(h string) (string, bool) {
	scheme, v, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	v = strings.TrimSpace(v)
	return v, v != ""
}

// looksLikeJWT reports whether tok has the shape of a JWS in compact
// serialization: three base64url segments, the first a JSON header. An
// edge session has one dot, a key none.
func looksLikeJWT(tok string) bool {
	if strings.Count(tok, ".") != 2 {
		return false
	}
	head, _, _ := strings.Cut(tok, ".")
	if len(head) > 4096 {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return false
	}
	var h struct {
		Alg *string `json:"alg"`
	}
	return json.Unmarshal(b, &h) == nil && h.Alg != nil
}

// isSessionShaped reports whether tok, a credential presented, has the
// shape of an edge session token: neither an API key nor a JWT.
func isSessionShaped(tok string) bool {
	return !strings.HasPrefix(tok, protocol.KeyPrefix) && !looksLikeJWT(tok)
}

// credentialOf verifies the credential r presents. ok is false when r
// presents none (cred is then an anonymous caller limited per IP); a
// credential that fails its check is perr, a 401.
func (s *Server) credentialOf(r *http.Request) (cred credential, ok bool, perr *protocol.Error) {
	tok := presented(r)
	ip := clientIP(r.RemoteAddr)
	switch {
	case tok == "":
		return credential{kind: protocol.CallerAnonymous, limit: "ip:" + ip}, false, nil
	case isSessionShaped(tok):
		cred, perr = s.sessionCredential(tok, ip)
	case strings.HasPrefix(tok, protocol.KeyPrefix):
		cred, perr = s.keyCredential(tok)
	default:
		cred, perr = s.oidcCredential(r, tok)
	}
	return cred, true, perr
}

// keyCredential checks an API key with the node's key ring.
func (s *Server) keyCredential(tok string) (credential, *protocol.Error) {
	if s.cfg.Keys == nil {
		return credential{}, invalidCredential("key", "invalid credential: this node accepts no API keys")
	}
	name, grants, err := s.cfg.Keys.VerifyKey(tok)
	if err != nil {
		var c credential // a known key, revoked or expired, is audited by name
		if name != "" {
			c = credential{kind: protocol.CallerKey, id: protocol.PolicyKey + name}
		}
		return c, invalidCredential("key", "invalid API key: "+err.Error())
	}
	id := protocol.PolicyKey + name
	return credential{kind: protocol.CallerKey, id: id, owner: id, limit: id, grants: grants}, nil
}

// oidcCredential checks an OpenID Connect access token for the resource r
// asks for.
func (s *Server) oidcCredential(r *http.Request, tok string) (credential, *protocol.Error) {
	if s.oidc == nil {
		return credential{}, invalidCredential("issuer", "invalid token: this node accepts no OpenID Connect access tokens (it names no --oidc-issuer)")
	}
	cl, perr := s.oidc.Verify(r.Context(), tok, s.resourceURL(r))
	if perr != nil {
		return credential{}, perr
	}
	sum := sha256.Sum256([]byte(cl.Issuer))
	id := protocol.PolicyOIDC + cl.Subject
	// Owner and rate bucket name the issuer too: two issuers may each have
	// a subject "alice", and they are not one caller.
	owner := protocol.PolicyOIDC + hex.EncodeToString(sum[:6]) + ":" + cl.Subject
	principals := make([]string, 0, len(cl.Scopes))
	for _, sc := range cl.Scopes {
		principals = append(principals, protocol.PolicyScope+sc)
	}
	return credential{kind: protocol.CallerOIDC, id: id, owner: owner, limit: owner, principals: principals, expires: cl.Expiry}, nil
}

// sessionCredential checks an edge session token (SPEC §5) seen from ip,
// and that it is not revoked.
func (s *Server) sessionCredential(tok, ip string) (credential, *protocol.Error) {
	t, kind, perr := s.verifySession(tok, ip)
	if perr != nil {
		return credential{}, perr
	}
	if at, revoked := s.sessions.revokedAt(t.Nonce); revoked {
		return credential{}, invalidCredential("revoked", fmt.Sprintf("invalid session: revoked at %s; get a new one from GET /mcpv2/session", at.UTC().Format(time.RFC3339)))
	}
	return credential{kind: kind, owner: ownerOf(kind, t), limit: "session:" + t.Nonce, nonce: t.Nonce, expires: t.ExpiresAt()}, nil
}

// invalidCredential is the 401 error of a refused credential.
func invalidCredential(reason, msg string) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeInvalidSession, Message: msg, Data: map[string]string{"reason": reason}}
}

// anonymousRefused reports whether a face refuses a request that presents
// no credential: with RequireAuth, or when an issuer is named and the
// policy grants anonymous callers nothing beyond the open methods (an
// OAuth client is then sent to log in rather than served nothing).
func (s *Server) anonymousRefused() bool {
	return s.cfg.RequireAuth || (len(s.cfg.OIDCIssuers) > 0 && !s.cfg.AnonymousGrants)
}

// unauthorized answers 401 with perr and a WWW-Authenticate challenge
// (RFC 6750 §3; with the protected-resource metadata of RFC 9728 when the
// edge names an OpenID Connect issuer).
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request, q *request, perr *protocol.Error) {
	code := "invalid_token"
	if m, _ := perr.Data.(map[string]string); m["reason"] == "missing" {
		code = "" // RFC 6750 §3.1: no error code when no credential was sent
	}
	s.challenge(w, r, code, perr.Message)
	s.refuse(w, r, q, http.StatusUnauthorized, perr)
}

// sessionBook remembers what the edge knows of edge sessions beyond their
// tokens: how many it issued that have not expired, and which were
// revoked. mu guards every field.
type sessionBook struct {
	mu      sync.Mutex
	issued  []issuedBatch             // oldest first, by expiry minute
	revoked map[string]revokedSession // by nonce, until the token expires
	swept   time.Time                 // when revoked was last swept (active)
	// revokedIssued counts the entries of revoked that this edge issued.
	revokedIssued int
}

// issuedBatch counts the sessions issued whose expiry falls in one minute.
type issuedBatch struct {
	expires time.Time // the end of the minute
	n       int
}

// revokedSession is a revoked session: when, until when it would have
// been valid, and whether this edge issued it (an anonymous session).
type revokedSession struct {
	at, expires time.Time
	issued      bool
}

// maxRevoked caps the revoked sessions remembered; each needed a valid
// session to revoke, and is forgotten when it expires.
const maxRevoked = 1 << 16

// issue counts a session issued now that expires at exp.
func (b *sessionBook) issue(exp, now time.Time) {
	exp = exp.Truncate(time.Minute).Add(time.Minute)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweepIssued(now)
	if n := len(b.issued); n > 0 && !b.issued[n-1].expires.Before(exp) {
		b.issued[n-1].n++ // a clock step back counts in the newest batch
		return
	}
	b.issued = append(b.issued, issuedBatch{expires: exp, n: 1})
}

// revoke remembers that the session nonce, which expires at exp, is
// revoked from now; false when the book is full of unexpired revocations.
func (b *sessionBook) revoke(nonce string, exp time.Time, issued bool, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.revoked[nonce]; ok {
		return true
	}
	if len(b.revoked) >= maxRevoked {
		b.sweepRevoked(now)
		if len(b.revoked) >= maxRevoked {
			return false
		}
	}
	if b.revoked == nil {
		b.revoked = map[string]revokedSession{}
	}
	b.revoked[nonce] = revokedSession{at: now, expires: exp, issued: issued}
	if issued {
		b.revokedIssued++
	}
	return true
}

// revokedAt says whether the session nonce is revoked, and since when.
func (b *sessionBook) revokedAt(nonce string) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.revoked[nonce]
	return r.at, ok
}

// active counts the sessions this edge issued that have neither expired
// nor been revoked, and the revoked sessions (of any kind) not yet
// expired, each to the minute.
func (b *sessionBook) active(now time.Time) (active, revoked int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweepIssued(now)
	// Health asks for the counts, and anyone may ask for health: the
	// revocations are swept at most once a minute, the counts' own grain.
	if now.Sub(b.swept) >= time.Minute || now.Before(b.swept) {
		b.sweepRevoked(now)
		b.swept = now
	}
	for _, x := range b.issued {
		active += x.n
	}
	return max(0, active-b.revokedIssued), len(b.revoked)
}

// sweepIssued drops the batches expired by now.
func (b *sessionBook) sweepIssued(now time.Time) {
	i := 0
	for i < len(b.issued) && !now.Before(b.issued[i].expires) {
		i++
	}
	b.issued = b.issued[i:]
}

// sweepRevoked forgets the revocations of tokens expired by now.
func (b *sessionBook) sweepRevoked(now time.Time) {
	for n, r := range b.revoked {
		if now.After(r.expires) {
			delete(b.revoked, n)
			if r.issued {
				b.revokedIssued--
			}
		}
	}
}

// credentialCounts is the credentials part of the health answer.
func (s *Server) credentialCounts() *CredentialCounts {
	sessions, revoked := s.sessions.active(s.cfg.Now())
	keys := -1
	if s.cfg.Keys != nil {
		keys = s.cfg.Keys.ActiveKeys()
	}
	return &CredentialCounts{APIKeys: keys, Sessions: sessions, RevokedSessions: revoked,
		OIDCIssuers: s.cfg.OIDCIssuers, Anonymous: !s.anonymousRefused()}
}
